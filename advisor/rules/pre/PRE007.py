from __future__ import annotations

import math
from typing import ClassVar

from advisor.rules.base import Evidence, Finding, Gain, Phase, Rule
from advisor.rules.config import Spec, ThresholdSpec
from advisor.rules.context import RunContext
from advisor.rules.helpers import fmt, matter_cap, ttft_typical
from advisor.rules.limits import TTFT_MS, TTFT_OBJECTIVES
from advisor.rules.severity import Severity, damp


class OverloadedSetup(Rule):
    """The benchmark offered more requests than the setup serves: TTFT is a queue, not prefill.

    ## Why is this bad?
    When requests arrive faster than the setup finishes them, the queue grows for the whole run
    and every request's TTFT is mostly the wait behind the ones before it: a median TTFT of
    seconds or minutes on a prompt that prefills in milliseconds. Nothing about the prompt, the
    prefix cache or the quantization explains it, and tuning them does not fix it; the offered
    load does not fit the setup. The served rate at these prompt and output lengths is the
    setup's capacity, and the ratio of offered to served is how much more of it the load needs.

    ## Fix
    Add capacity in proportion to the overload (about offered ÷ served replicas of this setup),
    shorten the outputs (each request holds a slot for its whole decode), or put admission
    control in front (a gateway rate limit that rejects early instead of queueing). Then measure
    below the knee: a rate the setup serves in full. In a sweep file (several offered rates) the
    finding names the knee, the highest rate the setup kept up with: its capacity.

    ## Example
    vLLM on one L4 with Llama-3.1-8B, 1,000-token prompts and 200-token outputs: offered
    32 req/s, served 0.4 req/s, TTFT p50 120 s. The setup serves about 0.4 req/s at these
    lengths; 32 req/s needs about 80× of it. Prefill of the prompt is about 0.5 s of the TTFT.
    """

    id = "PRE007"
    name = "prefill.overloaded_setup"
    action = "add-capacity"
    # The symptom is in the TTFT (a prefill-phase number), but the cause and the fix are capacity.
    phase = Phase.CAPACITY
    # One root cause, one recommendation: the queue (PRE005) and the prompt-length advice (PRE001)
    # describe the same TTFT this rule explains.
    supersedes: ClassVar[tuple[str, ...]] = ("PRE001", "PRE005")
    thresholds: ClassVar[tuple[Spec, ...]] = (
        ThresholdSpec(
            "served_share",
            ascending=False,
            unit="ratio",
            doc="served ÷ offered requests per second (smaller is worse); 1 is a setup that keeps up",
        ),
        ThresholdSpec(
            "queue_share",
            ascending=True,
            unit="ratio",
            doc="queueing ÷ TTFT in the TTFT breakdown of an overloaded run (raises the severity)",
        ),
        TTFT_MS,
    )

    def evaluate(self, ctx: RunContext) -> Finding | None:
        if ctx.microbenchmark:
            return None
        offered = ctx.run.workload.request_rate
        served = ctx.run.metrics.request_throughput_rps
        ttft = ttft_typical(ctx)
        if not offered or not served or ttft is None or not math.isfinite(offered) or offered <= 0:
            return None
        share = served / offered
        ttft_value, ttft_path = ttft
        breakdown = ctx.ttft
        queue_ms = breakdown.queueing.ms if breakdown is not None else None
        overload = self.t("served_share").severity_of(share)
        if overload is Severity.NONE:
            return None
        if breakdown is not None:
            # How much of the TTFT is the queue says how much it hurts, once the run is overloaded.
            overload = max(overload, self.t("queue_share").severity_of(breakdown.share("queueing")))
        severity = damp(
            overload,
            matter_cap(ctx, self.common, TTFT_OBJECTIVES, self.t("ttft_ms"), ttft_value),
        )
        needed = offered / served
        if not math.isfinite(needed):
            return None  # a served rate that rounds to zero: MEAS005 speaks of the failed requests
        without_queue = ttft_value - queue_ms if queue_ms else None
        evidence = [
            Evidence("request_throughput_rps", served, f"≈ {fmt(offered)} (the offered rate)", "run"),
            Evidence("workload.request_rate", offered, "≤ the served rate", "run"),
        ]
        if queue_ms is not None and breakdown is not None:
            evidence.append(
                Evidence(
                    "ttft_breakdown.queueing_ms",
                    queue_ms,
                    f"≈ 0 when the setup keeps up ({breakdown.queueing.source})",
                    "run",
                )
            )
        lengths = _lengths(ctx)
        summary = (
            f"this setup serves about {fmt(served)} req/s{lengths}; the offered {fmt(offered)} req/s needs "
            f"about {fmt(needed)}× of it, or shorter outputs, or admission control"
        )
        sweep = ctx.sweep
        if sweep is not None and sweep.load == "request_rate":
            # The sweep measured the knee directly: the highest offered rate the setup kept up with.
            summary += (
                f"; across the sweep's {sweep.points} rates it keeps up to {fmt(sweep.knee)} req/s offered "
                f"(serving {fmt(sweep.capacity_rps)} req/s), its capacity at these lengths"
            )
        gain = (
            Gain(ttft_path, ttft_value, max(without_queue, ttft_value * 0.01))
            if without_queue is not None and without_queue < ttft_value
            else None
        )
        return Finding(
            severity=severity,
            title=f"Overloaded: {summary}",
            evidence=tuple(evidence),
            fix={
                "vllm": (
                    f"Serve the load with about {math.ceil(needed)} replicas of this setup behind the load balancer "
                    "(or --tensor-parallel-size over more GPUs), cap the output length (max_tokens), or rate-limit "
                    f"at the gateway; benchmark at or below {fmt(served)} req/s to measure the setup itself."
                ),
                "sglang": (
                    f"About {math.ceil(needed)} replicas (or --dp-size), shorter outputs, or a rate limit at the "
                    f"gateway; benchmark at or below {fmt(served)} req/s."
                ),
                "other": (
                    f"Add capacity (about {math.ceil(needed)}× this setup), shorten the outputs, or admit fewer "
                    f"requests (a gateway rate limit); benchmark at or below {fmt(served)} req/s."
                ),
            },
            expected_gain=gain,
            confidence=0.8 if queue_ms is not None else 0.6,
            details={
                "capacity_rps": round(served, 3),
                "offered_rps": round(offered, 3),
                "needed": round(needed, 2),
                **({"sweep": sweep.to_dict()} if sweep is not None else {}),
            },
        )


def _lengths(ctx: RunContext) -> str:
    m = ctx.measured
    if m.prompt_tokens and m.output_tokens:
        return f" at {fmt(m.prompt_tokens)}-token prompts and {fmt(m.output_tokens)}-token outputs"
    return " at these lengths"
