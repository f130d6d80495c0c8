from __future__ import annotations

from typing import ClassVar

from advisor.rules.base import Evidence, Finding, Gain, Rule
from advisor.rules.config import Spec, ThresholdSpec
from advisor.rules.context import RunContext
from advisor.rules.helpers import (
    fmt,
    matter_cap,
    prefill_advice_applies,
    prefill_ms,
    prefill_work_ratio,
    ttft_typical,
)
from advisor.rules.limits import PREFIX_TOKENS, TTFT_MS, TTFT_OBJECTIVES
from advisor.rules.severity import Severity, damp


class SharedPrefixMissesCache(Rule):
    """Prefix caching is on, but the shared prefix rarely hits it.

    ## Why is this bad?
    A prefix cache matches token by token from the start of the prompt. One token that differs
    early (a timestamp, the user's name, a request id, retrieved documents placed before the
    instructions) ends the match, and everything after it is prefilled again. The engine then pays
    for caching without the benefit: the hit rate sits far below the share of the prompt that is
    actually the same for every request. Under memory pressure, evicted prefixes miss too.

    ## Fix
    Order every prompt from most static to most dynamic: system prompt, tool definitions and
    few-shot examples first, then per-user and per-request content. Keep the static part
    byte-identical (same whitespace, same template). If the KV pool is saturated, also give it more
    room so shared blocks are not evicted (CAP001).

    ## Example
    A 2,000-token system prompt on 2,500-token requests with caching on, but the prompt starts
    with "Today is <date>, user <id>": hit rate 0.03 instead of about 0.8.
    """

    id = "PRE003"
    name = "prefill.shared_prefix_misses_cache"
    action = "reorder-prompt-prefix"
    thresholds: ClassVar[tuple[Spec, ...]] = (
        ThresholdSpec(
            "missed_share",
            ascending=True,
            unit="ratio",
            doc="part of the shareable prefix that misses: 1 − hit rate ÷ shared share",
        ),
        PREFIX_TOKENS,
        TTFT_MS,
    )

    def evaluate(self, ctx: RunContext) -> Finding | None:
        if not prefill_advice_applies(ctx):
            return None  # an engine test, or a TTFT that is mostly queue or remainder, not prefill
        w, m = ctx.run.workload, ctx.measured
        shared = w.shared_prefix_tokens
        hit = ctx.run.metrics.prefix_cache_hit_rate
        ttft = ttft_typical(ctx)
        if (
            not shared
            or not m.prompt_tokens
            or hit is None
            or ttft is None
            or ctx.engine.prefix_caching.value is not True
        ):
            return None
        share = min(shared / m.prompt_tokens, 1.0)
        if share <= 0:
            return None  # a sub-token prefix on a long prompt: the share underflows to 0
        missed = max(0.0, 1.0 - hit / share)
        ttft_value, ttft_path = ttft
        severity = damp(
            self.t("missed_share").severity_of(missed),
            self.t("prefix_tokens").severity_of(shared),
            matter_cap(ctx, self.common, TTFT_OBJECTIVES, self.t("ttft_ms"), ttft_value),
        )
        evicting = (ctx.run.metrics.kv_cache_usage_max or 0.0) >= 0.95
        if evicting:
            severity = damp(severity, Severity.MODERATE)  # misses may be evictions, not the prompt order
        depth = w.kv_depth_tokens or 0.0
        now_tokens = m.prompt_tokens * (1.0 - hit)
        after = max(m.prompt_tokens - shared, 1.0)
        ratio = prefill_work_ratio(ctx, after, depth + shared, now_tokens, depth + m.prompt_tokens * hit)
        estimate = prefill_ms(ctx, now_tokens)
        part = min(ttft_value, estimate) if estimate is not None else ttft_value
        to = max(ttft_value - part * (1.0 - ratio), 1.0)
        evidence = (
            Evidence("prefix_cache_hit_rate", hit, f"≈ {share:.2f} (shared prefix ÷ prompt)", "physics"),
            Evidence("workload.shared_prefix_tokens", shared, "cached after the first request", "run"),
            Evidence(ttft_path, ttft_value, f"≈ {fmt(to)} when the prefix hits", "physics"),
        )
        cause = (
            "the KV pool is full, so shared blocks may be evicted"
            if evicting
            else "something before or inside it differs per request"
        )
        return Finding(
            severity=severity,
            title=(f"Prefix caching is on but hits {hit:.0%} of prompt tokens while {share:.0%} is shared: {cause}"),
            evidence=evidence,
            fix={
                "other": (
                    "Put the static part first and keep it byte-identical: system prompt, tools and "
                    "few-shot examples, then "
                    "per-user and per-request content (dates, names, ids, retrieved documents) at the end."
                ),
                "ollama": (
                    "Put the static part first and byte-identical; with OLLAMA_NUM_PARALLEL > 1 each "
                    "slot caches its own "
                    "prefix, so expect one miss per slot."
                ),
            },
            expected_gain=Gain(ttft_path, ttft_value, to),
            confidence=0.45 if evicting else 0.6,
        )
