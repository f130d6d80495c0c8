from __future__ import annotations

from typing import ClassVar

from advisor.rules import fixes
from advisor.rules.base import Evidence, Finding, Gain, Rule
from advisor.rules.config import Spec, ThresholdSpec
from advisor.rules.context import RunContext
from advisor.rules.helpers import annotate_fix, fmt, prefill_rate
from advisor.rules.limits import FRACTION_TARGET


class Preemptions(Rule):
    """Running requests are pre-empted and recomputed because the KV pool ran out.

    ## Why is this bad?
    When the KV pool cannot hold the next token of every running sequence, the scheduler evicts
    some of them (vLLM V1 uses RECOMPUTE): their KV is dropped and the whole context is prefilled
    again later. The GPU does the same work twice, throughput falls, and the evicted streams stall
    for the length of a prefill. vLLM logs it and counts ``vllm:num_preemptions_total``; SGLang
    reports retracted requests.

    ## Fix
    Give the pool more room or ask less of it (vLLM's own guidance): raise
    ``--gpu-memory-utilization``, lower ``--max-num-seqs`` or ``--max-num-batched-tokens``, or add
    GPUs with ``--tensor-parallel-size``. An 8-bit KV cache halves what each token holds.

    ## Example
    vLLM on an L4 with 256 max sequences and long outputs: 380 pre-emptions over 1,000 requests;
    re-prefilling their contexts cost about a quarter (24 %) of the run's GPU time.
    """

    id = "CAP002"
    name = "capacity.preemptions"
    action = "raise-gpu-memory-utilization"
    actions: ClassVar[tuple[str, ...]] = ("reduce-max-num-seqs",)
    supersedes: ClassVar[tuple[str, ...]] = ("CAP001",)
    # Severity grades how often a request is evicted (each one a user-visible stall); the
    # throughput gain is a by-product, so it does not cap the severity.
    damp_by_gain = False
    thresholds: ClassVar[tuple[Spec, ...]] = (
        ThresholdSpec("per_request", ascending=True, unit="ratio", doc="pre-emptions per completed request"),
        FRACTION_TARGET,
    )

    def evaluate(self, ctx: RunContext) -> Finding | None:
        m = ctx.run.metrics
        count = m.preemptions
        n = ctx.measured.n_requests
        if not count or not n:
            return None
        per_request = count / n
        e = ctx.engine
        fraction = e.memory_fraction.value
        target = self.p("fraction_target")
        raise_fraction = fraction is None or fraction < target
        gain: Gain | None = None
        wasted_share: float | None = None
        rate = prefill_rate(ctx)
        duration = m.duration_s
        if rate is not None and duration and ctx.measured.prompt_tokens and m.output_throughput_tok_s:
            # Each pre-emption re-prefills the sequence's context: prompt + about half the output.
            context = ctx.measured.prompt_tokens + (ctx.measured.output_tokens or 0.0) / 2.0
            wasted_s = count * context / rate[0]
            wasted_share = min(wasted_s / duration, 0.9)
            gain = Gain(
                "output_throughput_tok_s",
                m.output_throughput_tok_s,
                m.output_throughput_tok_s / (1.0 - wasted_share),
            )
        seqs = e.max_num_seqs.value
        fewer = max(1, int(seqs * 0.75)) if seqs else None
        fix = fixes.memory_fraction(target) if raise_fraction else {}
        if fewer is not None:
            fix = fixes.merge(fix, fixes.max_seqs(fewer, ctx.run.setup.runtime_version), sep=" and/or ")
        fix = fixes.merge(
            fix,
            {"vllm": "(or --tensor-parallel-size to add memory; --kv-cache-dtype fp8 halves KV per token)."},
        )
        fix.setdefault(
            "other",
            ("Give the KV pool more room (memory fraction, 8-bit KV cache, more GPUs) or run fewer sequences at once."),
        )
        evidence = [
            Evidence("preemptions", count, "0", "run"),
            Evidence("preemptions_per_request", per_request, f"< {self.t('per_request').low:g}", "run"),
        ]
        if wasted_share is not None:
            evidence.append(Evidence("recompute_share_of_run", wasted_share, "0", "physics"))
        return Finding(
            severity=self.t("per_request").severity_of(per_request),
            title=(
                f"{fmt(count)} pre-emptions over {fmt(float(n))} requests: evicted sequences are recomputed"
                + (f" (about {wasted_share:.0%} of the run's time)" if wasted_share is not None else "")
            ),
            evidence=tuple(evidence),
            fix=annotate_fix(fix, ctx.runtime, ctx.run.setup.runtime_version),
            expected_gain=gain,
            confidence=0.7,
            action="raise-gpu-memory-utilization" if raise_fraction else "reduce-max-num-seqs",
        )
