from __future__ import annotations

from typing import ClassVar

from advisor.rules.base import Evidence, Finding, Rule
from advisor.rules.config import Spec, ThresholdSpec
from advisor.rules.context import RunContext
from advisor.rules.helpers import annotate_fix, fmt, is_reasoning_model, matter_cap, output_shortfall, ttft_typical
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
    interconnect, and output counts below the requested length are the same effect: where the file
    says what it asked for (``workload.output_tokens_requested``: genai-perf and aiperf
    ``output_tokens.mean``, vLLM ``--random-output-len``, guidellm ``output_tokens=``), "N requested,
    M counted" joins the evidence. Only as support: a model stopping early at EOS counts fewer too,
    so the shortfall alone never raises the finding.
    A part of the TTFT with no figure is not claimed to be zero: with no queue figure at more than
    one stream in flight the unexplained time may be a queue, so the finding is then at most ``low``.

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
        # No queue figure at more than one stream in flight: the "remainder" may be a queue the run
        # did not report (aiperf at 100 streams), so the reasoning tokens are a low note, not the finding.
        streams = ctx.measured.concurrency
        queue_unknown = breakdown.queueing.ms is None and (streams is None or streams > 1.0)
        severity = damp(
            self.t("remainder_share").severity_of(share),
            matter_cap(ctx, self.common, TTFT_OBJECTIVES, self.t("ttft_ms"), ttft_value),
            Severity.LOW if queue_unknown else _CAP,
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
        shortfall = output_shortfall(ctx)
        if shortfall is not None:
            requested, counted = shortfall
            evidence.append(Evidence("output_tokens_mean", counted, f"{fmt(requested)} requested", "run"))
        model = ctx.model.id if ctx.model is not None else "this model"
        title = _title(model, breakdown.remainder.ms, ttft_value, prefill.ms, breakdown.queueing.ms, streams)
        if shortfall is not None:
            title += f" ({fmt(shortfall[0])} output tokens requested, {shortfall[1]:,.0f} counted)"
        return Finding(
            severity=severity,
            title=title,
            evidence=tuple(evidence),
            fix=annotate_fix(
                {
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
                ctx.runtime,
                ctx.run.setup.runtime_version,
            ),
            expected_gain=None,
            confidence=0.6,
            details={"ttft_breakdown": breakdown.to_dict()},
        )


def _title(
    model: str, remainder: float | None, ttft: float, prefill: float | None, queue: float | None, streams: float | None
) -> str:
    """Say only what the breakdown knows: a part with no figure is not claimed to be zero."""
    head = f"{model} reasons before it answers"
    tail = "; measure the time to the first visible token"
    if prefill is not None and queue is not None:
        return (
            f"{head}: about {fmt(remainder, 'ms')} of the {fmt(ttft, 'ms')} TTFT is neither prefill nor "
            f"queueing, most likely hidden reasoning tokens{tail}"
        )
    known = "prefill" if prefill is not None else "queueing" if queue is not None else None
    unknown = (
        "no queue figure"
        if known == "prefill"
        else "no prefill estimate"
        if known == "queueing"
        else "no queue or prefill figure"
    )
    load = f" at {fmt(streams)} streams in flight" if streams is not None and streams > 1.0 and queue is None else ""
    if known is not None:
        return (
            f"{head}: about {fmt(remainder, 'ms')} of the {fmt(ttft, 'ms')} TTFT is not {known} ({unknown}"
            f"{load}), likely hidden reasoning tokens{tail}"
        )
    return (
        f"{head}: the {fmt(ttft, 'ms')} TTFT likely includes hidden reasoning tokens ({unknown} to "
        f"subtract{load}){tail}"
    )
