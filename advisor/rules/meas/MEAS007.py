from __future__ import annotations

from typing import ClassVar

from advisor.rules.base import Evidence, Finding, Rule
from advisor.rules.config import Spec, ThresholdSpec
from advisor.rules.context import RunContext
from advisor.rules.helpers import fmt, is_reasoning_model, matter_cap, ttft_typical
from advisor.rules.limits import TTFT_MS, TTFT_OBJECTIVES
from advisor.rules.severity import Severity, damp

#: A note on what the TTFT measured, not a fault of the setup: never above moderate.
_CAP = Severity.MODERATE


class ReasoningTokensInTtft(Rule):
    """A reasoning model's TTFT includes hidden reasoning tokens, not just prefill.

    ## Why is this bad?
    Reasoning models (gpt-oss, DeepSeek-R1 and its distills, Qwen3 in thinking mode, QwQ) generate
    reasoning tokens before the answer. Whether a benchmark counts them as output depends on the
    server's reasoning parser and the client, so the "first token" may be the first *visible* one,
    after hundreds of decode steps. Such a TTFT says little about prefill, the prompt or the
    interconnect, and output counts below the requested length are the same effect.

    ## Fix
    Decide what to measure. To time the answer, keep the reasoning but measure the time to the
    first visible token; to time prefill, turn the thinking down: ``reasoning_effort: "low"`` for
    gpt-oss, ``chat_template_kwargs: {"enable_thinking": false}`` for Qwen3 on vLLM and SGLang,
    ``--reasoning-budget 0`` on llama-server, ``"think": false`` on Ollama. Serve with the
    runtime's reasoning parser (vLLM and SGLang ``--reasoning-parser``) so that reasoning and
    answer are told apart.

    ## Example
    gpt-oss-20b on vLLM, 1,000-token prompts, TTFT p50 1.4 s: prefill of the prompt is about
    0.2 s; the other 1.2 s are reasoning tokens before the first visible one.
    """

    id = "MEAS007"
    name = "measurement.reasoning_tokens_in_ttft"
    action = "improve-measurement"
    # The prompt-length finding would blame prefill for the same TTFT.
    supersedes: ClassVar[tuple[str, ...]] = ("PRE001",)
    thresholds: ClassVar[tuple[Spec, ...]] = (
        ThresholdSpec(
            "remainder_share",
            ascending=True,
            unit="ratio",
            doc="share of the TTFT neither queueing nor prefill explains (the TTFT breakdown's remainder)",
        ),
        TTFT_MS,
    )

    def evaluate(self, ctx: RunContext) -> Finding | None:
        breakdown = ctx.ttft
        ttft = ttft_typical(ctx)
        if ctx.microbenchmark or breakdown is None or ttft is None or not is_reasoning_model(ctx):
            return None
        share = breakdown.share("remainder")
        ttft_value = ttft[0]
        severity = damp(
            self.t("remainder_share").severity_of(share),
            matter_cap(ctx, self.common, TTFT_OBJECTIVES, self.t("ttft_ms"), ttft_value),
            _CAP,
        )
        prefill = breakdown.prefill
        low = self.t("remainder_share").low
        evidence = [
            Evidence(
                "ttft_breakdown.remainder_ms",
                breakdown.remainder.ms,
                f"< {fmt(low * ttft_value)} ({low:.0%} of the TTFT)",
                "run",
            )
        ]
        if prefill.ms is not None:
            evidence.append(Evidence("ttft_breakdown.prefill_ms", prefill.ms, f"from {prefill.source}", "physics"))
        model = ctx.model.id if ctx.model is not None else "this model"
        return Finding(
            severity=severity,
            title=(
                f"{model} reasons before it answers: about {fmt(breakdown.remainder.ms, 'ms')} of the "
                f"{fmt(ttft_value, 'ms')} TTFT is neither prefill nor queueing, most likely hidden reasoning "
                "tokens; measure the time to the first visible token"
            ),
            evidence=tuple(evidence),
            fix={
                "vllm": (
                    'Send reasoning_effort: "low" (gpt-oss) or chat_template_kwargs: {"enable_thinking": false} '
                    "(Qwen3) to time prefill; serve with --reasoning-parser so the answer is told apart, and "
                    "measure the time to the first visible token."
                ),
                "sglang": (
                    'Send chat_template_kwargs: {"enable_thinking": false} (Qwen3) or reasoning_effort (gpt-oss); '
                    "serve with --reasoning-parser and measure the time to the first visible token."
                ),
                "llamacpp": (
                    "Start llama-server with --reasoning-budget 0 to time prefill, or measure the time to the "
                    "first visible token."
                ),
                "ollama": 'Send "think": false to time prefill, or measure the time to the first visible token.',
                "other": (
                    "Turn the model's thinking down (reasoning effort or its thinking switch) to time prefill, "
                    "or measure the time to the first visible token."
                ),
            },
            expected_gain=None,
            confidence=0.6,
            details={"ttft_breakdown": breakdown.to_dict()},
        )
