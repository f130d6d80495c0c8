from __future__ import annotations

from typing import ClassVar

from advisor.rules.base import Evidence, Finding, Gain, Rule, Status
from advisor.rules.budget import ESTIMATE_BAND
from advisor.rules.config import Spec, ThresholdSpec
from advisor.rules.context import RunContext
from advisor.rules.helpers import (
    QUEUE_DOMINANT_SHARE,
    compute_is_estimated,
    describe_setup,
    expected_by,
    fmt,
    fmt_range,
    is_reasoning_model,
    matter_cap,
    ttft_typical,
)
from advisor.rules.limits import TTFT_MS, TTFT_OBJECTIVES
from advisor.rules.severity import damp

#: A model load taking this share of the TTFT marks the sample as a cold call (PRE006's finding),
#: whose prefill rate is not the steady state's.
_COLD_SHARE = 0.5


class PrefillBelowExpected(Rule):
    """Prefill (or TTFT without queueing) is well below what the same setup reaches elsewhere.

    ## Why is this bad?
    Prefill is compute-bound: its expected speed is the device's tensor throughput times the
    efficiency the same runtime reaches on the same kind of hardware. A run far below that band
    loses compute somewhere: a slow attention backend, tiny prefill chunks, tokenisation on a busy
    CPU, a tensor-parallel interconnect over PCIe, or clocks capped by power.

    ## Fix
    Check the prefill path against a reference run: attention backend (FlashAttention /
    FlashInfer), the per-step token budget (PRE004), CPU load on the host, the interconnect
    between tensor-parallel GPUs, and clocks under load. Where the device's compute is an estimate
    (no published rate: the DGX Spark, Strix Halo, recent Apple chips, CPUs) and the band comes from
    the physics, the run is judged against a band widened ``ESTIMATE_BAND``× at its slow end. A
    cold call (the model load is half the TTFT or more, PRE006) is not judged.

    ## Example
    SGLang, Qwen2.5-7B bf16 on an L40S: runs like it prefill 2,000-token prompts at 9,000–14,000
    tok/s; this one at 4,100.
    """

    id = "REG002"
    name = "expectation.prefill_below_expected"
    action = "fix-serving-stack"
    rule_status = Status.PREVIEW
    thresholds: ClassVar[tuple[Spec, ...]] = (
        ThresholdSpec(
            "ratio",
            ascending=False,
            unit="ratio",
            doc="measured ÷ expected prefill speed (TTFT: expected ÷ measured)",
        ),
        TTFT_MS,
    )

    def evaluate(self, ctx: RunContext) -> Finding | None:
        exp = ctx.expectations
        if exp is None:
            return None
        ttft = ttft_typical(ctx)
        cap_value = ttft[0] if ttft else None
        load = ctx.run.metrics.load_ms
        if load and ttft is not None and load >= _COLD_SHARE * ttft[0]:
            return None  # a cold first call (PRE006): its prefill carries one-time kernel set-up
        measured = ctx.measured.prefill_tok_s
        # A prior built on an estimated compute figure is a band, not a point: the device may be
        # ESTIMATE_BAND× slower than the estimate, so the run is judged against the band's slow end.
        slack = self._estimate_slack(ctx)
        if measured is not None and exp.prefill_tok_s is not None:
            band = exp.prefill_tok_s
            low, expected = band.low / slack, band.expected / slack
            if measured >= low:
                return None
            ratio, metric, found, target = measured / expected, "prefill_tok_s", measured, expected
            expected_text, unit = fmt_range(low, band.high), "tok/s"
        elif (
            ttft is not None
            and exp.ttft_ms is not None
            and self._queue_free(ctx)
            and not ctx.microbenchmark
            # A reasoning model's TTFT holds hidden reasoning tokens (MEAS007), not a slow prefill.
            and not is_reasoning_model(ctx)
        ):
            band = exp.ttft_ms
            high, expected = band.high * slack, band.expected * slack
            if ttft[0] <= high:
                return None
            ratio, metric, found, target = expected / ttft[0], ttft[1], ttft[0], expected
            expected_text, unit = fmt_range(band.low, high), "ms"
        else:
            return None
        severity = damp(
            self.t("ratio").severity_of(ratio),
            matter_cap(ctx, self.common, TTFT_OBJECTIVES, self.t("ttft_ms"), cap_value),
        )
        return Finding(
            severity=severity,
            title=(
                f"{expected_by(ctx)} {expected_text} {unit} for {metric} from {describe_setup(ctx)}"
                + (f" (widened {ESTIMATE_BAND:g}× for the device's estimated compute)" if slack > 1 else "")
                + f"; this run {fmt(found)}"
            ),
            evidence=(Evidence(metric, found, expected_text, "model"),),
            fix={
                "other": (
                    "Check the prefill path against a reference run: attention backend, the per-step "
                    "token budget, CPU load (tokenisation)"
                    # Only a run split over GPUs has an interconnect to blame.
                    + (
                        ", the interconnect between tensor-parallel GPUs"
                        if (ctx.run.setup.tensor_parallel or 1) > 1
                        else ""
                    )
                    + ", and clocks under load."
                )
            },
            expected_gain=Gain(metric, found, target),
            confidence=0.45,
        )

    @staticmethod
    def _estimate_slack(ctx: RunContext) -> float:
        """ESTIMATE_BAND when the band comes from the physics (the prior, or the ceiling scaled to
        the device) and the device's compute is an estimate; 1 for a fitted model's band, which is
        learnt from measured runs, and for published compute figures."""
        exp = ctx.expectations
        if exp is None or not compute_is_estimated(ctx):
            return 1.0
        carried = exp.carried_by or ("model" if exp.source.startswith("fitted model") else "prior")
        return 1.0 if carried == "model" else ESTIMATE_BAND

    @staticmethod
    def _queue_free(ctx: RunContext) -> bool:
        m = ctx.run.metrics
        if m.queue_waiting_mean or m.queue_waiting_max or m.queue_ms.p50:
            return False
        breakdown = ctx.ttft
        if breakdown is not None and breakdown.queueing.ms and breakdown.share("queueing") >= QUEUE_DOMINANT_SHARE:
            return False  # offered far above served: the TTFT is a queue (PRE007)
        return (ctx.measured.concurrency or 1.0) <= 1.0 or m.queue_waiting_max == 0
