from __future__ import annotations

from typing import ClassVar

from advisor.rules.base import Evidence, Finding, Rule
from advisor.rules.budget import ESTIMATE_BAND
from advisor.rules.config import ParamSpec, Spec, ThresholdSpec
from advisor.rules.context import RunContext
from advisor.rules.helpers import compute_is_estimated, fmt
from advisor.rules.severity import Severity, damp


class UnrealisticPrefixCacheHits(Rule):
    """The benchmark hits the prefix cache on (almost) every prompt, so TTFT is not measured.

    ## Why is this bad?
    Prefill is compute-bound: a prompt of N tokens cannot be processed faster than the device's
    tensor throughput allows, which gives a physical TTFT floor. A TTFT below that floor means the
    prompt was not computed: it came from the prefix cache, because the benchmark sends the same
    prompt (or a long identical prefix) again and again. Production traffic with distinct prompts
    will see a far higher TTFT than the run reports.

    When the device's compute is only an estimate (no published dense rate, or one marked
    ``estimated`` in the catalog, such as the DGX Spark's), the floor is a band, not a point: the
    TTFT is judged against the floor at the band's fast end (the estimate × ``ESTIMATE_BAND``).

    The opposite, a benchmark of random prompts that never hits the cache, is noted at ``low``
    when nobody stated that production prompts share nothing.

    ## Fix
    Benchmark with distinct prompts that share only what production shares: ``vllm bench serve
    --dataset-name random`` (with ``--random-prefix-len`` for a realistic system prompt), ShareGPT,
    or your own traces; or disable prefix caching for the benchmark to measure cold prefill.

    ## Example
    3,000-token prompts on an A10G: the physics floor is about 700 ms, but TTFT p50 is 45 ms and
    the prefix-cache hit rate is 0.98: every request reused the previous one's KV.
    """

    id = "MEAS003"
    name = "measurement.unrealistic_prefix_cache_hits"
    action = "improve-measurement"
    thresholds: ClassVar[tuple[Spec, ...]] = (
        ThresholdSpec(
            "ttft_over_floor",
            ascending=False,
            unit="ratio",
            doc="TTFT p50 ÷ the physics floor for the whole prompt; below 1 is cache hits",
        ),
        ThresholdSpec(
            "hit_rate",
            ascending=True,
            unit="ratio",
            doc="prefix-cache hit rate beyond what the workload's shared prefix explains",
        ),
        ParamSpec(
            "min_prompt_tokens",
            unit="tokens",
            doc="shorter prompts have too small a floor to judge",
            minimum=1,
        ),
        ParamSpec(
            "never_hit_min_prompt_tokens",
            unit="tokens",
            doc="prompts at least this long make a never-hit benchmark worth a low note",
            minimum=1,
        ),
    )

    def evaluate(self, ctx: RunContext) -> Finding | None:
        m = ctx.run.metrics
        prompt = ctx.measured.prompt_tokens
        if not prompt or prompt < self.p("min_prompt_tokens"):
            return None
        shared = ctx.run.workload.shared_prefix_tokens or 0.0
        explained = min(shared / prompt, 1.0)
        severity = Severity.NONE
        evidence: list[Evidence] = []
        floor = ctx.roofline.ttft_floor_ms if ctx.roofline is not None else None
        # An estimated compute figure may be off by ESTIMATE_BAND either way: a TTFT is only
        # "faster than physics" below the floor at the band's fast end.
        estimated = compute_is_estimated(ctx)
        if floor and estimated:
            floor /= ESTIMATE_BAND
        ttft = m.ttft_ms.p50
        if floor and ttft and explained < 0.5 and m.cached_prompt_tokens_mean is None:
            ratio = ttft / floor
            level = self.t("ttft_over_floor").severity_of(ratio)
            if level:
                severity = level
                where = (
                    f"physics floor for {fmt(prompt)} tokens at {ESTIMATE_BAND:g}× the device's estimated compute"
                    if estimated
                    else f"physics floor for {fmt(prompt)} tokens"
                )
                evidence.append(Evidence("ttft_ms.p50", ttft, f">= {fmt(floor)} ({where})", "physics"))
        hit = m.prefix_cache_hit_rate
        if hit is not None:
            level = self.t("hit_rate").severity_of(hit - explained)
            if level:
                severity = max(severity, level)
                evidence.append(
                    Evidence(
                        "prefix_cache_hit_rate",
                        hit,
                        f"≈ {explained:.2f} (the workload's shared prefix)",
                        "run",
                    )
                )
        if not evidence:
            return self._never_hits(ctx, prompt)
        # A benchmark artefact is serious when SLOs are judged on it, but it is not an outage.
        severity = damp(severity, Severity.SEVERE)
        return Finding(
            severity=severity,
            title=(
                "The benchmark reuses cached prompts: "
                + ("TTFT is below the physics floor" if floor and ttft and ttft < floor else "the hit rate is near 1")
                + f"; production prompts of {fmt(prompt)} tokens will take longer"
            ),
            evidence=tuple(evidence),
            fix={
                "other": (
                    "Benchmark with distinct prompts that share only what production shares: vllm "
                    "bench serve --dataset-name random "
                    "(--random-prefix-len for a system prompt), ShareGPT or your own traces; or turn "
                    "prefix caching off to measure "
                    "cold prefill."
                )
            },
            expected_gain=None,
            confidence=0.8,
        )

    def _never_hits(self, ctx: RunContext, prompt: float) -> Finding | None:
        """The opposite artefact, as a low note: caching is on, nothing ever hits, and nobody said
        the prompts share nothing. Production prompts that share a system prompt will be faster."""
        hit = ctx.run.metrics.prefix_cache_hit_rate
        shared = ctx.run.workload.shared_prefix_tokens
        if hit is None or hit > 0.01 or shared is not None or ctx.engine.prefix_caching.value is not True:
            return None
        if prompt < self.p("never_hit_min_prompt_tokens"):
            return None
        return Finding(
            severity=Severity.LOW,
            title=(
                f"The benchmark never hits the prefix cache (hit rate {hit:.0%}): if production prompts share a "
                "system prompt, their TTFT will be lower than measured"
            ),
            evidence=(
                Evidence("prefix_cache_hit_rate", hit, "the share production prompts have in common", "run"),
                Evidence("workload.shared_prefix_tokens", "unknown", "stated", "run"),
            ),
            fix={
                "other": (
                    "Give the benchmark the shared prefix production has (vllm bench serve "
                    "--random-prefix-len <tokens>, or replay real prompts) and state it as "
                    "workload.shared_prefix_tokens."
                )
            },
            expected_gain=None,
            confidence=0.5,
        )
