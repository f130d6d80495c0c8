from __future__ import annotations

import math
from typing import ClassVar

from advisor.rules import fixes
from advisor.rules.base import Evidence, Finding, Gain, Rule
from advisor.rules.budget import BUDGET_RUNTIMES, BUDGET_SPECS, BudgetPlan, budget_plan, limits_of
from advisor.rules.config import ParamSpec, Spec, ThresholdSpec
from advisor.rules.context import RunContext
from advisor.rules.damping import slo_ratio
from advisor.rules.helpers import annotate_fix, dropped, fmt, matter_cap, prefill_rate, ttft_typical
from advisor.rules.knobs import knob_name
from advisor.rules.limits import TTFT_MS, TTFT_OBJECTIVES
from advisor.rules.severity import Severity, damp


class BatchedTokensBudgetSmall(Rule):
    """The per-step token budget splits every prompt into many small chunks.

    ## Why is this bad?
    With chunked prefill, each scheduler step processes at most ``max-num-batched-tokens`` tokens.
    In vLLM, TGI and TensorRT-LLM running decodes take their share of that budget first; SGLang
    does not mix decodes into a prefill chunk unless ``--enable-mixed-chunk`` is set, so there the
    whole budget goes to the prompt. A prompt larger than what is left is prefilled over several
    steps, and every step also pays for one pass over the weights and the decode batch. The prompt's
    compute is the same however it is cut, so each extra step costs one more decode step. vLLM's
    guidance: larger values give better TTFT, smaller ones better ITL. The budget is set in one
    place (``advisor/rules/budget.py``, shared with SCH001), so a run is never told both ways; when
    the dial cannot meet both the TTFT and ITL objectives this rule says so instead.

    ## Fix
    Raise the budget (vLLM ``--max-num-batched-tokens``, SGLang ``--chunked-prefill-size``, TGI
    ``--max-batch-prefill-tokens``, TensorRT-LLM ``--max_num_tokens``) towards 8192, or to the
    prompt size, held to what keeps one chunk's stall within the ITL p99 objective. When no budget
    meets both objectives: cache the shared prefix (PRE002), add capacity, or at scale disaggregate
    prefill from decode.

    ## Example
    vLLM on an H100 with ``--max-num-batched-tokens 512``, 64 streams decoding and 4,000-token
    prompts: each step leaves 448 tokens for prefill, so a prompt needs 9 steps. At 8192 it needs
    one.
    """

    id = "PRE004"
    name = "prefill.batched_tokens_budget_small"
    action = "raise-batched-tokens"
    actions: ClassVar[tuple[str, ...]] = ("enable-prefix-caching", "add-capacity")
    thresholds: ClassVar[tuple[Spec, ...]] = (
        ThresholdSpec(
            "chunks",
            ascending=True,
            unit="steps",
            doc="scheduler steps one prompt needs at the current budget",
        ),
        TTFT_MS,
        ParamSpec(
            "itl_tail_ratio",
            unit="ratio",
            doc="ITL p99 ÷ p50 at or above which a larger budget is not advised",
            minimum=1,
        ),
        *BUDGET_SPECS,
    )

    def evaluate(self, ctx: RunContext) -> Finding | None:
        plan = budget_plan(ctx, self)
        ttft = ttft_typical(ctx)
        if plan is None or ttft is None:
            return None
        if plan.direction == "conflict":
            return self._conflict(ctx, plan, ttft)
        if plan.direction != "raise":
            return None
        budget = ctx.engine.batched_tokens
        uncached = plan.uncached
        target = plan.target
        running = min(ctx.measured.concurrency or 1.0, float(plan.current) * 0.75)
        step_ms = plan.step_ms

        def chunk(b: float) -> float:
            return plan.chunk(b, running)

        steps_now, steps_new = plan.steps_now, plan.steps_target
        # Linear step-cost model (as in Sarathi-Serve): a step costs the decode step (weights,
        # KV reads, overheads) plus its prefill tokens' compute. The compute is the same however
        # the prompt is cut, so every extra step costs one decode step.
        saved = (steps_now - steps_new) * step_ms
        ttft_value, ttft_path = ttft
        if saved <= 0:
            return None
        to = max(ttft_value - min(saved, ttft_value * 0.9), 1.0)
        # With arrivals known, also check the budget caps prefill *throughput* below the load:
        # then prompts queue for budget and TTFT grows far beyond one prompt's steps.
        load = self._load(ctx, uncached, step_ms, chunk(plan.current), chunk(target))
        saturated = load is not None and load[0] >= 0.9 > load[1]
        if saturated and load is not None:
            rate = prefill_rate(ctx)
            service = steps_new * step_ms + (uncached / rate[0] * 1000.0 if rate else 0.0)
            to = min(to, service / (1.0 - load[1]))  # M/M/1-style inflation at the new utilisation
        tails = self._tail_cap(ctx)
        severity = damp(
            max(self.t("chunks").severity_of(float(steps_now)), Severity.SEVERE if saturated else Severity.NONE),
            matter_cap(ctx, self.common, TTFT_OBJECTIVES, self.t("ttft_ms"), ttft_value),
            tails,
        )
        gain = Gain(ttft_path, ttft_value, to)
        if (bare := dropped(self, severity, gain)) is not None:
            return bare
        stall = (
            Evidence(
                "predicted_chunk_ms",
                plan.chunk_ms_target,
                f"ITL p99 ≈ {fmt(plan.predicted_itl_p99_ms)} at {fmt(target)} (p50 + one chunk)",
                "physics",
            ),
        )
        return Finding(
            severity=severity,
            title=(
                f"A {fmt(plan.current)}-token step budget splits each {fmt(uncached)}-token prompt "
                f"into {steps_now} steps; "
                f"{fmt(target)} would need {steps_new}"
                + (
                    f"; prefill cannot keep up: the load needs {load[0]:.1f}× what this budget lets through"
                    if saturated and load
                    else ""
                )
            ),
            evidence=(
                Evidence(
                    knob_name("batched_tokens", ctx.runtime, budget),
                    budget.describe(),
                    f">= {fmt(target)}",
                    "physics",
                ),
                Evidence(
                    "workload.prompt_tokens_mean (uncached)",
                    uncached,
                    f"<= {fmt(plan.current)} per step",
                    "run",
                ),
                Evidence("prefill_steps_per_prompt", float(steps_now), f"{steps_new} at {fmt(target)}", "physics"),
                Evidence(ttft_path, ttft_value, f"≈ {fmt(to)}", "physics"),
                *stall,
            ),
            fix=annotate_fix(
                fixes.merge(
                    fixes.batched_tokens(target),
                    {k: "(watch ITL p99: larger budgets lengthen the steps decodes wait on)" for k in BUDGET_RUNTIMES},
                ),
                ctx.runtime,
                ctx.run.setup.runtime_version,
            ),
            expected_gain=gain,
            confidence=0.4 if tails is not None or saturated else 0.55,
        )

    def _conflict(self, ctx: RunContext, plan: BudgetPlan, ttft: tuple[float, str]) -> Finding:
        """The dial cannot meet both objectives: say so, and name what can."""
        prefix_off = ctx.engine.prefix_caching.value is False
        name = knob_name("batched_tokens", ctx.runtime, ctx.engine.batched_tokens)
        alternatives = (
            "The prefill budget cannot meet both the TTFT and the ITL objective here "
            f"({plan.reason}). What can: cache the shared prompt prefix so less is prefilled"
            + (" (prefix caching is off)" if prefix_off else "")
            + ", add capacity (replicas) so fewer prompts share a GPU's steps, or at scale disaggregate "
            "prefill from decode."
        )
        fix: dict[str, str] = {k: alternatives for k in (*BUDGET_RUNTIMES, "other")}
        if prefix_off:  # name the switch only where it is off; on, the shared prefix is cached already
            fix = fixes.merge(fix, fixes.prefix_caching())
        # The stall a larger budget would bring: the chunk at the budget a raise would propose
        # (the plan's own target stays at the current budget when it is a conflict).
        limits = limits_of(self)
        larger = int(min(limits.raise_max, max(limits.raise_min, 2 ** math.ceil(math.log2(max(plan.uncached, 1.0))))))
        running = min(ctx.measured.concurrency or 1.0, float(plan.current) * 0.75)
        larger_ms = (
            min(plan.chunk(larger, running), plan.uncached) / plan.rate_tok_s * 1000.0
            if larger > plan.current
            else plan.chunk_ms_now
        )
        return Finding(
            severity=Severity.LOW,
            title=(
                f"{name} {fmt(plan.current)} cannot meet both objectives: {fmt(plan.uncached)}-token prompts take "
                f"{plan.steps_now} steps, and a larger chunk would stall streams for ≈ {fmt(larger_ms, 'ms')}"
            ),
            evidence=(
                Evidence(name, ctx.engine.batched_tokens.describe(), "no value meets both objectives", "physics"),
                Evidence(ttft[1], ttft[0], "lower with a larger budget", "run"),
                Evidence("prefill_chunk_ms", plan.chunk_ms_now, f"≈ {fmt(larger_ms)} at {fmt(larger)}", "physics"),
            ),
            fix=annotate_fix(fix, ctx.runtime, ctx.run.setup.runtime_version),
            action="enable-prefix-caching" if prefix_off else "add-capacity",
            confidence=0.4,
        )

    @staticmethod
    def _load(
        ctx: RunContext, uncached: float, step_ms: float, chunk_now: float, chunk_new: float
    ) -> tuple[float, float] | None:
        """Prefill utilisation (required prompt tokens/s ÷ what the budget lets through), now and
        at the target budget; None without an arrival rate or a prefill rate."""
        m, w = ctx.run.metrics, ctx.run.workload
        arrivals = m.request_throughput_rps or w.request_rate
        rate = prefill_rate(ctx)
        if not arrivals or rate is None:
            return None
        required = arrivals * uncached
        if min(chunk_now, chunk_new, rate[0]) <= 0.0:
            return None

        def utilisation(c: float) -> float:
            # required ÷ capacity, where capacity = c ÷ (step + c ÷ rate): written as a product so
            # a degenerate prefill rate gives inf (no answer below), never a division by zero.
            return required * (step_ms / 1000.0 + c / rate[0]) / c

        now, new = utilisation(chunk_now), utilisation(chunk_new)
        return (now, new) if math.isfinite(now) and math.isfinite(new) else None

    def _tail_cap(self, ctx: RunContext) -> Severity | None:
        """LOW when ITL tails are near or over their objective, or already stretched."""
        for objective in ("itl_p99_ms", "tpot_p99_ms"):
            r = slo_ratio(ctx, objective)
            if r is not None and r >= 0.9:
                return Severity.LOW
        itl = ctx.run.metrics.itl_ms
        if itl.p99 and itl.p50 and itl.p99 / itl.p50 >= self.p("itl_tail_ratio"):
            return Severity.LOW
        return None
