from __future__ import annotations

from typing import ClassVar

from advisor.rules.base import Evidence, Finding, Gain, Rule
from advisor.rules.config import ParamSpec, Spec, ThresholdSpec
from advisor.rules.context import RunContext
from advisor.rules.helpers import (
    dropped,
    fmt,
    matter_cap,
    prefill_advice_applies,
    prefill_ms,
    prefill_work_ratio,
    ttft_typical,
)
from advisor.rules.limits import TTFT_OBJECTIVES
from advisor.rules.severity import Severity, damp


class LongPrompt(Rule):
    """Long prompts dominate the time to first token.

    ## Why is this bad?
    Prefill reads the whole prompt in one compute-bound pass, so its cost grows at least linearly
    with prompt length (the matmuls) plus quadratically (attention): doubling the prompt at least
    doubles the TTFT. Every request pays for every token it sends that is not already cached, so a
    long system prompt, a pile of few-shot examples or an untrimmed conversation history is felt on
    every single request, while decode speed barely changes.

    ## Fix
    Send fewer uncached tokens: shorten the system prompt, drop few-shot examples the model no
    longer needs, cap retrieved context, summarise old turns. Repeated parts are better cached than
    resent (see PRE002). The expected gain assumes the uncached prompt is halved.

    ## Example
    Llama-3.1-8B on an A10G with 6,000-token prompts: TTFT p50 1.6 s, most of it prefill. Halving
    the prompt to 3,000 tokens brings it to about 0.7 s.
    """

    id = "PRE001"
    name = "prefill.long_prompt"
    action = "shorten-prompt"
    thresholds: ClassVar[tuple[Spec, ...]] = (
        ThresholdSpec("prompt_tokens", ascending=True, unit="tokens", doc="uncached prompt tokens per request"),
        ThresholdSpec(
            "ttft_ms", ascending=True, unit="ms", doc="TTFT p50 that makes a long prompt matter (no TTFT SLO)"
        ),
        ParamSpec(
            "trim_fraction",
            unit="ratio",
            doc="fraction of the uncached prompt kept in the what-if",
            minimum=0.05,
            maximum=0.95,
        ),
    )

    def evaluate(self, ctx: RunContext) -> Finding | None:
        if not prefill_advice_applies(ctx):
            return None  # an engine test, or a TTFT that is mostly queue or remainder, not prefill
        m = ctx.measured
        ttft = ttft_typical(ctx)
        if m.prompt_tokens is None or m.uncached_prompt_tokens is None or ttft is None:
            return None
        uncached = m.uncached_prompt_tokens
        ttft_value, ttft_path = ttft
        estimate = prefill_ms(ctx, uncached)
        # Without a prefill rate the TTFT cannot be split: at more than one stream in flight it may
        # be queueing behind the others' prefills (a closed loop at 32 or 2,048 streams), so the
        # finding stays a low note rather than telling the user to trim what may not be the cause.
        unsplit_under_load = estimate is None and (m.concurrency is None or m.concurrency > 1.0)
        severity = damp(
            self.t("prompt_tokens").severity_of(uncached),
            matter_cap(ctx, self.common, TTFT_OBJECTIVES, self.t("ttft_ms"), ttft_value),
            Severity.LOW if unsplit_under_load else None,
        )
        if severity is Severity.NONE and (bare := dropped(self, severity)) is not None:
            return bare  # no gain lifts it above none: the prefill what-if is not needed to drop it
        depth = (ctx.run.workload.kv_depth_tokens or 0.0) + (m.prompt_tokens - uncached)
        part = min(ttft_value, estimate) if estimate is not None else ttft_value
        kept = uncached * self.p("trim_fraction")
        ratio = prefill_work_ratio(ctx, kept, depth, uncached, depth)
        to = max(ttft_value - part * (1.0 - ratio), 1.0)
        gain = Gain(ttft_path, ttft_value, to)
        if (bare := dropped(self, severity, gain)) is not None:
            return bare
        shared = ctx.run.workload.shared_prefix_tokens
        share_note = f" ({shared / m.prompt_tokens:.0%} of it a shared prefix)" if shared and m.prompt_tokens else ""
        evidence = [
            Evidence("workload.prompt_tokens_mean", m.prompt_tokens, f"< {fmt(self.t('prompt_tokens').low)}", "run"),
            Evidence(ttft_path, ttft_value, f"< {fmt(self.t('ttft_ms').low)}", "run"),
        ]
        if uncached < m.prompt_tokens:
            evidence.append(
                Evidence("uncached_prompt_tokens", uncached, f"< {fmt(self.t('prompt_tokens').low)}", "run")
            )
        if estimate is not None:
            evidence.append(Evidence("prefill_ms_estimate", estimate, f"≈ {fmt(part)} of the TTFT", "physics"))
        return Finding(
            severity=severity,
            title=(
                f"Prompts average {fmt(m.prompt_tokens)} tokens{share_note}"
                + (f" ({fmt(uncached)} uncached)" if uncached < m.prompt_tokens else "")
                + (
                    f": prefill is about {fmt(part, 'ms')} of the {fmt(ttft_value, 'ms')} TTFT"
                    if estimate is not None
                    else (
                        f", the TTFT is {fmt(ttft_value, 'ms')}: how much of it is prefill cannot be told "
                        "without the hardware"
                        + (f" (and {fmt(m.concurrency)} streams in flight may queue)" if unsplit_under_load else "")
                    )
                )
            ),
            evidence=tuple(evidence),
            fix={
                "other": (
                    "Send fewer uncached tokens: trim the system prompt, few-shot examples, retrieved "
                    "context and "
                    f"old turns. Keeping {fmt(kept)} of {fmt(uncached)} tokens cuts prefill work to "
                    f"{ratio:.0%}."
                )
            },
            expected_gain=gain,
            confidence=0.7 if estimate is not None else 0.5,
        )
