from __future__ import annotations

from typing import ClassVar

from advisor.rules import fixes
from advisor.rules.base import Evidence, Finding, Gain, Rule
from advisor.rules.config import Spec, ThresholdSpec
from advisor.rules.context import RunContext
from advisor.rules.helpers import (
    annotate_fix,
    fmt,
    matter_cap,
    prefill_advice_applies,
    prefill_ms,
    prefill_work_ratio,
    ttft_typical,
)
from advisor.rules.limits import PREFIX_TOKENS, TTFT_MS, TTFT_OBJECTIVES
from advisor.rules.severity import Severity, damp


class RepeatedPrefixNotCached(Rule):
    """A prefix shared by every request is prefilled again for each one.

    ## Why is this bad?
    When requests start with the same system prompt, tool definitions or few-shot block, the KV
    cache of that prefix is identical for all of them. Without prefix caching the engine recomputes
    it on every request, so TTFT pays for the whole shared prefix every time. With caching, only
    the part after the prefix is prefilled (and it attends to the cached prefix).

    ## Fix
    Turn prefix caching on (vLLM ``--enable-prefix-caching``, SGLang without
    ``--disable-radix-cache``, TensorRT-LLM ``enable_block_reuse``, llama.cpp ``cache_prompt``)
    and keep the shared part first and byte-identical across requests.

    ## Example
    A 3,000-token system prompt on 3,500-token requests, prefix caching off: TTFT p50 900 ms.
    With the prefix cached, only 500 tokens are prefilled: about 140 ms.
    """

    id = "PRE002"
    name = "prefill.repeated_prefix_not_cached"
    action = "enable-prefix-caching"
    thresholds: ClassVar[tuple[Spec, ...]] = (
        ThresholdSpec("prefix_share", ascending=True, unit="ratio", doc="shared prefix ÷ prompt tokens"),
        PREFIX_TOKENS,
        TTFT_MS,
        ThresholdSpec(
            "hit_rate",
            ascending=False,
            unit="ratio",
            doc="measured hit rate ÷ the shared share; low means not cached",
        ),
    )

    def evaluate(self, ctx: RunContext) -> Finding | None:
        if not prefill_advice_applies(ctx):
            return None  # an engine test, or a TTFT that is mostly queue or remainder, not prefill
        w, m = ctx.run.workload, ctx.measured
        shared = w.shared_prefix_tokens
        ttft = ttft_typical(ctx)
        if not shared or not m.prompt_tokens or ttft is None:
            return None
        share = min(shared / m.prompt_tokens, 1.0)
        if share <= 0:
            return None  # a sub-token prefix on a long prompt: the share underflows to 0
        caching = ctx.engine.prefix_caching
        hit = ctx.run.metrics.prefix_cache_hit_rate
        if caching.value is True and caching.explicit is False and hit is None:
            return None  # on by default and nothing says it misses
        if caching.value is True and hit is not None:
            return None  # on, and measured: a low hit rate is PRE003's (reorder the prompt)
        # Off explicitly, or unknown: then a hit rate far below the shareable part says "not cached",
        # and how far below caps the severity (a half-working cache leaves less to gain).
        not_cached = Severity.CRITICAL
        if caching.value is not False:
            if hit is None:
                return None
            not_cached = self.t("hit_rate").severity_of(hit / share)
            if not not_cached:
                return None
        ttft_value, ttft_path = ttft
        severity = damp(
            self.t("prefix_share").severity_of(share),
            self.t("prefix_tokens").severity_of(shared),
            not_cached,
            matter_cap(ctx, self.common, TTFT_OBJECTIVES, self.t("ttft_ms"), ttft_value),
        )
        depth = w.kv_depth_tokens or 0.0
        now_tokens = m.uncached_prompt_tokens if m.uncached_prompt_tokens is not None else m.prompt_tokens
        after = max(m.prompt_tokens - shared, 1.0)
        ratio = prefill_work_ratio(ctx, after, depth + shared, now_tokens, depth + (m.prompt_tokens - now_tokens))
        estimate = prefill_ms(ctx, now_tokens)
        part = min(ttft_value, estimate) if estimate is not None else ttft_value
        to = max(ttft_value - part * (1.0 - ratio), 1.0)
        state = "off" if caching.value is False else "not hitting"
        evidence = [
            Evidence(
                "workload.shared_prefix_tokens",
                shared,
                f"< {fmt(self.t('prefix_tokens').low)} or cached",
                "run",
            ),
            Evidence("prefix_caching", caching.describe() if caching.known else "unknown", "on", "run"),
            Evidence(ttft_path, ttft_value, f"≈ {fmt(to)} with the prefix cached", "physics"),
        ]
        if hit is not None:
            evidence.insert(2, Evidence("prefix_cache_hit_rate", hit, f"≈ {share:.2f} (the shared share)", "physics"))
        return Finding(
            severity=severity,
            title=(
                f"A {fmt(shared)}-token shared prefix ({share:.0%} of each prompt) is prefilled on "
                "every request: "
                f"prefix caching is {state}"
            ),
            evidence=tuple(evidence),
            fix=annotate_fix(fixes.prefix_caching(), ctx.runtime, ctx.run.setup.runtime_version),
            expected_gain=Gain(ttft_path, ttft_value, to),
            confidence=0.85 if caching.value is False and caching.explicit else 0.6,
        )
