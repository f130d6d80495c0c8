from __future__ import annotations

from typing import ClassVar

from advisor.rules import fixes, runtimes
from advisor.rules.base import Evidence, Finding, Gain, Rule
from advisor.rules.budget import itl_guard
from advisor.rules.config import ParamSpec, Spec, ThresholdSpec
from advisor.rules.context import RunContext
from advisor.rules.damping import slo_cap
from advisor.rules.helpers import fmt, latency_label, prefill_ms
from advisor.rules.severity import Severity, damp

#: Runtimes whose chunked-prefill state may be unknown (vLLM's V0 engine enables it only for long
#: context, TGI 2.x had it experimental): judged from the tail when the run does not say.
_UNKNOWN_JUDGED = ("vllm", "sglang", "tgi", "trtllm")

#: With the state unknown, one whole prompt's prefill must take at least this share of the ITL
#: p99-p50 gap before its stall is named as the cause (stricter than the budget plan's
#: ``budget_min_explained``, 0.3, because here the setting itself is a guess).
_EXPLAINED = 0.5


class ChunkedPrefillDisabled(Rule):
    """Chunked prefill is off, so each long prompt stalls every stream for its whole prefill.

    ## Why is this bad?
    Without chunked prefill, a prompt is prefilled in one step, and every sequence that is
    decoding waits until it finishes: one 8,000-token prompt stalls all streams for the whole
    prefill. Chunked prefill cuts prompts into budget-sized chunks mixed into decode steps, which
    gives most of the isolation of a disaggregated deployment with one flag. vLLM's V1 engine
    always chunks; SGLang turns it off with ``--chunked-prefill-size -1``; TensorRT-LLM's LLM API
    defaults ``enable_chunked_prefill`` to false.

    When the run does not say and the version has no default the advisor can vouch for (vLLM
    before V1 enables it only for long-context models, TGI 2.x had it experimental), the rule
    speaks only when the ITL tail shows it: stretched, and one whole prompt's prefill explains at
    least half of the p99-p50 gap; then at most moderate.

    ## Fix
    Turn it on with a moderate budget: vLLM ≥ 0.8 (V1), or ``--enable-chunked-prefill
    --max-num-batched-tokens 2048`` on older versions; SGLang ``--chunked-prefill-size 2048``;
    TensorRT-LLM ``enable_chunked_prefill: true``.

    ## Example
    TensorRT-LLM serving 4,000-token prompts to 16 concurrent streams with chunking off: each new
    prompt stalls every stream for about 380 ms on an L40S; 2048-token chunks halve the stall.
    """

    id = "CFG002"
    name = "config.chunked_prefill_disabled"
    action = "enable-chunked-prefill"
    # With chunking off, prompt stalls are the first explanation of stretched tails.
    supersedes: ClassVar[tuple[str, ...]] = ("SCH002",)
    thresholds: ClassVar[tuple[Spec, ...]] = (
        ThresholdSpec(
            "stall_ms",
            ascending=True,
            unit="ms",
            doc="prefill time of one whole prompt: the stall every stream sees",
        ),
        ParamSpec("budget", unit="tokens", doc="chunk budget the fix proposes", minimum=256),
        ParamSpec(
            "smooth_tail_ratio",
            unit="ratio",
            doc="ITL p99 ÷ p50 below which no interference is visible (finding capped at low)",
            minimum=1,
        ),
    )

    def evaluate(self, ctx: RunContext) -> Finding | None:
        knob = ctx.engine.chunked_prefill
        uncached = ctx.measured.uncached_prompt_tokens
        conc = ctx.measured.concurrency
        # Unknown (vLLM before V1, TGI before 3): judged only when the tail shows the stall.
        unknown = knob.value is None and ctx.runtime in _UNKNOWN_JUDGED
        if (knob.value is not False and not unknown) or not uncached or conc is None or conc < 2:
            return None
        budget = int(self.p("budget"))
        stall = prefill_ms(ctx, uncached)
        if stall is None or uncached <= budget:
            return None
        chunk = prefill_ms(ctx, budget) or stall
        m = ctx.run.metrics
        dist, path = (m.itl_ms, "itl_ms") if m.itl_ms.p99 else (m.tpot_ms, "tpot_ms")
        visible: Severity | None = None
        gain: Gain | None = None
        if dist.p99 and dist.p50:
            if dist.p99 / dist.p50 < self.p("smooth_tail_ratio"):
                visible = Severity.LOW
            to = dist.p50 + (dist.p99 - dist.p50) * chunk / stall
            gain = Gain(f"{path}.p99", dist.p99, to)
        if unknown and (
            not dist.p99
            or not dist.p50
            or visible is not None
            or itl_guard(ctx) is not None
            or stall < _EXPLAINED * (dist.p99 - dist.p50)
        ):
            return None  # not stated, and the tail does not show whole-prompt stalls
        severity = damp(
            self.t("stall_ms").severity_of(stall),
            visible,
            slo_cap(ctx, self.common, "itl_p99_ms", "tpot_p99_ms"),
            Severity.MODERATE if unknown else None,
        )
        evidence = [
            Evidence(knob.arg or "enable_chunked_prefill", knob.describe(), "true", "run"),
            Evidence("prefill_stall_ms", stall, f"≈ {fmt(chunk)} per {budget}-token chunk", "physics"),
        ]
        if dist.p99:
            evidence.append(Evidence(f"{path}.p99", dist.p99, f"≈ {fmt(gain.to)}" if gain else "", "run"))
        state = (
            f"not stated, and {ctx.runtime} {ctx.run.setup.runtime_version or ''}".rstrip()
            + " has no default the advisor can vouch for"
            if unknown
            else "off"
        )
        return Finding(
            severity=severity,
            title=(
                f"Chunked prefill is {state}: each {fmt(uncached)}-token prompt stalls all {fmt(conc)} "
                "streams for about "
                f"{fmt(stall, 'ms')}" + (f" ({latency_label(path)} p99 {fmt(dist.p99, 'ms')})" if dist.p99 else "")
            ),
            evidence=tuple(evidence),
            fix=runtimes.annotate_fix(fixes.chunked_prefill_on(budget), ctx.runtime, ctx.run.setup.runtime_version),
            expected_gain=gain,
            confidence=0.4 if unknown else 0.7 if knob.explicit else 0.55,
        )
