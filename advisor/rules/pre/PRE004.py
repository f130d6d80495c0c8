from __future__ import annotations

import math
from typing import ClassVar

from advisor.rules import fixes
from advisor.rules.base import Evidence, Finding, Gain, Rule
from advisor.rules.config import ParamSpec, Spec, ThresholdSpec
from advisor.rules.context import RunContext
from advisor.rules.damping import slo_ratio
from advisor.rules.helpers import fmt, matter_cap, prefill_rate, ttft_typical
from advisor.rules.knobs import knob_name
from advisor.rules.severity import Severity, damp

_RUNTIMES = ("vllm", "sglang", "tgi", "trtllm")


class BatchedTokensBudgetSmall(Rule):
    """The per-step token budget splits every prompt into many small chunks.

    ## Why is this bad?
    With chunked prefill, each scheduler step processes at most ``max-num-batched-tokens`` tokens,
    and running decodes take their share of that budget first. A prompt larger than what is left
    is prefilled over several steps, and every step also pays for one pass over the weights and the
    decode batch. When the budget is small compared with the prompts, TTFT grows by those extra
    steps. The prompt's compute is the same however it is cut, so each extra step costs one more
    decode step. vLLM's guidance: larger values give better TTFT, smaller ones better ITL.

    ## Fix
    Raise the budget (vLLM ``--max-num-batched-tokens``, SGLang ``--chunked-prefill-size``, TGI
    ``--max-batch-prefill-tokens``, TensorRT-LLM ``--max_num_tokens``) towards 8192, or to the
    prompt size, as long as ITL p99 stays within its objective. The rule stays quiet when ITL tails
    are already the problem.

    ## Example
    vLLM on an H100 with ``--max-num-batched-tokens 512``, 64 streams decoding and 4,000-token
    prompts: each step leaves 448 tokens for prefill, so a prompt needs 9 steps. At 8192 it needs
    one.
    """

    id = "PRE004"
    name = "prefill.batched_tokens_budget_small"
    action = "raise-batched-tokens"
    thresholds: ClassVar[tuple[Spec, ...]] = (
        ThresholdSpec(
            "chunks",
            ascending=True,
            unit="steps",
            doc="scheduler steps one prompt needs at the current budget",
        ),
        ThresholdSpec("ttft_ms", ascending=True, unit="ms", doc="TTFT p50 that makes it matter (no TTFT SLO)"),
        ParamSpec(
            "itl_tail_ratio",
            unit="ratio",
            doc="ITL p99 ÷ p50 at or above which a larger budget is not advised",
            minimum=1,
        ),
        ParamSpec("target_min", unit="tokens", doc="smallest budget the fix proposes", minimum=512),
        ParamSpec("target_max", unit="tokens", doc="largest budget the fix proposes", minimum=1024),
    )

    def evaluate(self, ctx: RunContext) -> Finding | None:
        budget = ctx.engine.batched_tokens
        uncached = ctx.measured.uncached_prompt_tokens
        ttft = ttft_typical(ctx)
        if ctx.runtime not in _RUNTIMES or not budget.value or not uncached or ttft is None:
            return None
        target = int(
            min(self.p("target_max"), max(self.p("target_min"), 2 ** math.ceil(math.log2(max(uncached, 1.0)))))
        )
        if target <= budget.value:
            return None
        running = min(ctx.measured.concurrency or 1.0, float(budget.value) * 0.75)
        step_ms = self._step_ms(ctx)
        if step_ms is None:
            return None

        def chunk(b: float) -> float:
            # Running decodes take their tokens of the budget first; the rest goes to the prompt.
            return max(b - running, b * 0.25)

        steps_now, steps_new = math.ceil(uncached / chunk(budget.value)), math.ceil(uncached / chunk(target))
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
        load = self._load(ctx, uncached, step_ms, chunk(budget.value), chunk(target))
        saturated = load is not None and load[0] >= 0.9 > load[1]
        if saturated and load is not None:
            rate = prefill_rate(ctx)
            service = steps_new * step_ms + (uncached / rate[0] * 1000.0 if rate else 0.0)
            to = min(to, service / (1.0 - load[1]))  # M/M/1-style inflation at the new utilisation
        tails = self._tail_cap(ctx)
        severity = damp(
            max(self.t("chunks").severity_of(float(steps_now)), Severity.SEVERE if saturated else Severity.NONE),
            matter_cap(ctx, self.common, ("ttft_p50_ms", "ttft_p99_ms"), self.t("ttft_ms"), ttft_value),
            tails,
        )
        return Finding(
            severity=severity,
            title=(
                f"A {fmt(budget.value)}-token step budget splits each {fmt(uncached)}-token prompt "
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
                    f"<= {fmt(budget.value)} per step",
                    "run",
                ),
                Evidence("prefill_steps_per_prompt", float(steps_now), f"{steps_new} at {fmt(target)}", "physics"),
                Evidence(ttft_path, ttft_value, f"≈ {fmt(to)}", "physics"),
            ),
            fix=fixes.merge(
                fixes.batched_tokens(target),
                {k: "(watch ITL p99: larger budgets lengthen the steps decodes wait on)" for k in _RUNTIMES},
            ),
            expected_gain=Gain(ttft_path, ttft_value, to),
            confidence=0.4 if tails is not None or saturated else 0.55,
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

        def capacity(c: float) -> float:
            return c / ((step_ms + c / rate[0] * 1000.0) / 1000.0)

        return required / capacity(chunk_now), required / capacity(chunk_new)

    @staticmethod
    def _step_ms(ctx: RunContext) -> float | None:
        """One scheduler step under this load: the measured ITL/TPOT p50, else the physics floor."""
        for p in (ctx.run.metrics.itl_ms, ctx.run.metrics.tpot_ms):
            if p.p50:
                return p.p50
        return ctx.roofline.itl_floor_ms if ctx.roofline is not None else None

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
