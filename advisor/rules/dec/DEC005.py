from __future__ import annotations

from typing import ClassVar

from advisor.errors import AdvisorError
from advisor.physics import HardwareSpec
from advisor.rules import whatif
from advisor.rules.base import Evidence, Finding, Rule, Status
from advisor.rules.config import ParamSpec, Spec, ThresholdSpec
from advisor.rules.context import RunContext
from advisor.rules.damping import slo_cap
from advisor.rules.helpers import fmt, hw_label
from advisor.rules.severity import damp

#: Run labels that name a device the team plans to move to.
PLAN_LABELS = ("planned_hardware", "candidate_hardware", "upgrade_to")
_PLAN_LABEL_SET = frozenset(PLAN_LABELS)


class ComputeUpgradeWontHelpDecode(Rule):
    """A planned hardware change adds compute but not bandwidth, so decode will not speed up.

    ## Why is this bad?
    Decode is memory-bandwidth-bound: each token reads all the weights, so its speed follows the
    spec-sheet GB/s, not the TFLOPS. A device with much more compute and similar bandwidth makes
    prefill (TTFT) faster but leaves tokens per second where they are: an L40S has more tensor
    throughput than an A100 but 864 GB/s against 2,039, and decodes 2.4× slower.

    ## Fix
    Choose decode hardware by memory bandwidth; the finding names catalog devices that would
    decode at least 30 % faster. Keep the compute-rich device only if TTFT is the goal.

    ## Example
    Label ``planned_hardware=nvidia-h100-pcie`` on a Llama-3.1-8B bf16 run on an A100 80GB SXM
    decoding at 100 tok/s: the H100 PCIe has 2.4× the dense compute (756 vs 312 TFLOPS) but 2,000
    against 2,039 GB/s, so decode would stay at about 98 tok/s.
    """

    id = "DEC005"
    name = "decode.compute_upgrade_wont_help"
    action = "upgrade-bandwidth"
    rule_status = Status.PREVIEW
    thresholds: ClassVar[tuple[Spec, ...]] = (
        ThresholdSpec(
            "compute_over_decode",
            ascending=True,
            unit="ratio",
            doc="compute gain ÷ predicted decode gain of the planned device",
        ),
        ParamSpec(
            "max_decode_gain",
            unit="ratio",
            doc="decode speed-up below which the plan 'will not help'",
            minimum=1,
        ),
    )

    def evaluate(self, ctx: RunContext) -> Finding | None:
        labels = ctx.run.labels
        if _PLAN_LABEL_SET.isdisjoint(labels):
            return None  # most runs name no plan: one set operation says so
        name = next((labels[k] for k in PLAN_LABELS if labels.get(k)), None)
        decode, cur, hw = ctx.measured.decode_tok_s, ctx.roofline, ctx.hardware
        if name is None or decode is None or cur is None or hw is None or ctx.catalog is None:
            return None
        try:
            planned = ctx.catalog.resolve_hardware(name)
        except (AdvisorError, ValueError, KeyError, LookupError, TypeError):
            return None
        if not isinstance(planned, HardwareSpec) or planned.id == hw.id:
            return None
        new = whatif.reanalyse(ctx, hardware=planned)
        if new is None or new.prefill_tflops is None or cur.prefill_tflops is None:
            return None
        decode_gain = whatif.decode_ratio(ctx, new, hardware=planned) or 1.0
        compute_gain = new.prefill_tflops / cur.prefill_tflops
        if decode_gain >= self.p("max_decode_gain") or compute_gain <= 1.0:
            return None
        options = whatif.hardware_options(ctx, min_ratio=1.3)
        listed = (
            ", ".join(f"{hw_label(o.hardware)} ≈ {fmt(o.decode_tok_s, 'tok/s')}" for o in options)
            or "none in the catalog"
        )
        return Finding(
            severity=damp(
                self.t("compute_over_decode").severity_of(compute_gain / decode_gain),
                slo_cap(ctx, self.common, "decode_tok_s_min", "itl_p50_ms", "tpot_p99_ms"),
            ),
            title=(
                f"{hw_label(planned)} has {compute_gain:.1f}× the compute but decode would "
                f"{'drop to' if decode_gain < 0.97 else 'stay at'} about "
                f"{fmt(decode * decode_gain, 'tok/s')} (now {fmt(decode, 'tok/s')}): decode follows bandwidth"
            ),
            evidence=(
                Evidence(
                    "planned.mem_bandwidth_gb_s",
                    planned.mem_bandwidth_gb_s,
                    f"> {fmt(hw.mem_bandwidth_gb_s * 1.3)} for a faster decode",
                    "physics",
                ),
                Evidence(
                    "planned.tflops",
                    new.prefill_tflops,
                    f"{fmt(cur.prefill_tflops)} now (prefill only)",
                    "physics",
                ),
                Evidence("decode_tok_s", decode, f"≈ {fmt(decode * decode_gain)} on {planned.id}", "physics"),
            ),
            fix={
                "other": (
                    f"For decode, pick by memory bandwidth. Faster options: {listed}. The planned device "
                    f"speeds up prefill by {compute_gain:.1f}×."
                )
            },
            expected_gain=None,
            confidence=0.7,
            details={
                "planned": planned.id,
                "decode_ratio": round(decode_gain, 2),
                "compute_ratio": round(compute_gain, 2),
                "options": [o.to_dict() for o in options],
            },
        )
