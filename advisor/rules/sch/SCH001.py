from __future__ import annotations

from typing import ClassVar

from advisor.rules import fixes
from advisor.rules.base import Evidence, Finding, Gain, Rule
from advisor.rules.budget import BUDGET_RUNTIMES, BUDGET_SPECS, budget_plan
from advisor.rules.config import Spec, ThresholdSpec
from advisor.rules.context import RunContext
from advisor.rules.damping import sample_cap
from advisor.rules.helpers import annotate_fix, fmt, latency_label, matter_cap, prefill_rate
from advisor.rules.knobs import knob_name
from advisor.rules.limits import TAIL_OBJECTIVES, TAIL_RATIO


class PrefillInterference(Rule):
    """Long prefill chunks stall every stream: ITL p99 is inflated by prompts arriving mid-stream.

    ## Why is this bad?
    Prefill and decode share the GPU. When a long prompt arrives, the step that prefills its chunk
    takes as long as that chunk's compute, and every stream that is decoding waits for it: users
    see a mid-sentence stall. The bigger the per-step token budget, the bigger the chunk and the
    longer the stall. ITL p50 looks fine; ITL p99 does not.

    ## Fix
    Lower the per-step budget so prompts are cut into smaller chunks that interleave with decode
    (the budget is chosen in one place, ``advisor/rules/budget.py``, shared with PRE004):
    vLLM ``--max-num-batched-tokens 2048`` (vLLM: "smaller values (e.g., 2048) achieve better
    inter-token latency"), SGLang ``--chunked-prefill-size 2048``, TGI ``--max-batch-prefill-tokens``.
    TTFT rises a little. If chunked prefill is off, CFG002 says how to turn it on. The rule stays
    quiet when the tail is not the chunks': with speculative decoding (accepted drafts arrive in
    bursts), with ``--stream-interval`` above 1, and when one chunk's predicted compute is too
    short to explain the measured p99.

    ## Example
    vLLM on an H100, 32 streams, 6,000-token prompts, ``--max-num-batched-tokens 16384``: ITL p50
    12 ms, p99 240 ms. With 2048-token chunks the stall shrinks to about a third: p99 about 85 ms.
    """

    id = "SCH001"
    name = "scheduling.prefill_interference"
    action = "lower-batched-tokens"
    supersedes: ClassVar[tuple[str, ...]] = ("SCH002",)
    thresholds: ClassVar[tuple[Spec, ...]] = (
        TAIL_RATIO,
        ThresholdSpec("p99_ms", ascending=True, unit="ms", doc="ITL p99 that users feel as a stall (no ITL SLO)"),
        *BUDGET_SPECS,
    )

    def evaluate(self, ctx: RunContext) -> Finding | None:
        if ctx.runtime not in BUDGET_RUNTIMES or ctx.engine.chunked_prefill.value is False:
            return None
        plan = budget_plan(ctx, self)
        picked = self._tail(ctx)
        if plan is None or plan.direction != "lower" or picked is None:
            return None
        path, p50, p99 = picked
        target = plan.target
        stall = p99 - p50
        t_now, t_new = plan.chunk_ms_now, plan.chunk_ms_target
        to = p50 + stall * min(1.0, t_new / t_now)
        rate_source = prefill_rate(ctx)
        severity = min(
            self.t("tail_ratio").severity_of(p99 / p50),
            matter_cap(ctx, self.common, TAIL_OBJECTIVES, self.t("p99_ms"), p99),
            sample_cap(self.common, ctx.measured.n_requests),
        )
        chunk_now = min(
            plan.chunk(plan.current, min(ctx.measured.concurrency or 1.0, plan.current * 0.75)), plan.uncached
        )
        return Finding(
            severity=severity,
            title=(
                f"Prefill chunks of up to {fmt(chunk_now)} tokens (≈ {fmt(t_now, 'ms')} each) stall "
                "every stream: "
                f"{latency_label(path)} p99 is {fmt(p99, 'ms')} against a p50 of {fmt(p50, 'ms')}"
            ),
            evidence=(
                Evidence(f"{path}.p99", p99, f"≈ {fmt(to)} with {target}-token chunks", "physics"),
                Evidence(f"{path}.p50", p50, "", "run"),
                Evidence(
                    knob_name("batched_tokens", ctx.runtime, ctx.engine.batched_tokens),
                    ctx.engine.batched_tokens.describe(),
                    f"<= {target}",
                    "run",
                ),
                Evidence(
                    "prefill_chunk_ms",
                    t_now,
                    f"≈ {fmt(t_new)} at {target}; explains ≥ {self.p('budget_min_explained'):.0%} of the "
                    f"{fmt(stall, 'ms')} p99-p50 gap",
                    rate_source[1] if rate_source else "physics",
                ),
            ),
            fix=annotate_fix(
                fixes.merge(
                    {k: v for k, v in fixes.batched_tokens(target).items() if k in (*BUDGET_RUNTIMES, "other")},
                    {
                        k: "(TTFT rises slightly: each prompt takes more, shorter steps)"
                        for k in (*BUDGET_RUNTIMES, "other")
                    },
                ),
                ctx.runtime,
                ctx.run.setup.runtime_version,
            ),
            expected_gain=Gain(f"{path}.p99", p99, to),
            confidence=0.65,
        )

    @staticmethod
    def _tail(ctx: RunContext) -> tuple[str, float, float] | None:
        for path in ("itl_ms", "tpot_ms"):
            p = getattr(ctx.run.metrics, path)
            if p.p99 and p.p50:
                return path, p.p50, p.p99
        return None
