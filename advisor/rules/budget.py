"""The one place that sets the prefill token budget dial, so no run is told to raise and lower it.

The dial: vLLM ``--max-num-batched-tokens``, SGLang ``--chunked-prefill-size``, TGI
``--max-batch-prefill-tokens``, TensorRT-LLM ``--max_num_tokens``, llama.cpp ``-b``/``-ub``.
PRE004 (raise it for TTFT) and SCH001 (lower it for ITL tails) both ask :func:`plan_budget`
and speak only when the plan goes their way; when the dial cannot meet both objectives the plan
is ``conflict`` and PRE004 says so, naming what can (prefix caching, capacity, disaggregation).

Physics of one scheduler step (Sarathi-Serve's linear cost model): a step costs the decode step
(one read of the weights plus the batch's KV, measured as ITL p50 or the roofline's ITL floor)
plus its prompt chunk's compute, ``chunk / prefill_rate``. Where the engine mixes running decodes
into the chunk's step (vLLM, TGI, TensorRT-LLM; SGLang only with ``--enable-mixed-chunk``) the
decodes take their tokens of the budget first; either way every decoding stream waits for the
chunk, which is the stall seen in ITL p99.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from advisor.rules.base import Rule, fast_frozen_init
from advisor.rules.config import ParamSpec, RuleConfig, Spec, ThresholdSpec
from advisor.rules.context import RunContext, per_run
from advisor.rules.damping import slo_ratio
from advisor.rules.helpers import prefill_rate, ttft_typical

__all__ = [
    "BUDGET_RUNTIMES",
    "BUDGET_SPECS",
    "ESTIMATE_BAND",
    "BudgetLimits",
    "BudgetPlan",
    "budget_plan",
    "itl_guard",
    "limits_of",
    "plan_budget",
]

#: ``isinstance(x, _NUMBER)``: a tuple, since ``int | float`` builds a Union on every call (hot paths).
_NUMBER = (int, float)

#: How far an *estimated* compute figure may be off, either way (specs.py derives it from bandwidth
#: or from an 8-bit rate; published parts of the same class span about 2× around such estimates).
ESTIMATE_BAND: float = 2.0

#: Runtimes whose prefill token budget the plan sets.
BUDGET_RUNTIMES: tuple[str, ...] = ("vllm", "sglang", "tgi", "trtllm")

Direction = Literal["raise", "lower", "conflict"]


@dataclass(frozen=True, slots=True)
class BudgetLimits:
    """The limits the plan weighs (rules/thresholds.toml ``[limits]``, shared by PRE004 and SCH001)."""

    ttft_ms: float  # TTFT p50 that starts to matter without a TTFT SLO
    stall_p99_ms: float  # ITL p99 users feel as a stall without an ITL SLO
    tail_ratio: float  # ITL p99 ÷ p50 that counts as a stretched tail
    min_explained: float  # share of the p99-p50 gap a chunk must take to explain it
    lower_target: int  # the budget a lower move proposes (vLLM's ITL-friendly 2048)
    raise_min: int  # smallest budget a raise proposes
    raise_max: int  # largest budget a raise proposes


#: The keys every rule that asks the plan declares; rules/thresholds.toml points them all at
#: ``[limits]``, so PRE004 and SCH001 weigh the same numbers and reach the same plan.
BUDGET_SPECS: tuple[Spec, ...] = (
    ThresholdSpec("budget_ttft_ms", ascending=True, unit="ms", doc="TTFT p50 that presses for a larger budget"),
    ThresholdSpec("budget_p99_ms", ascending=True, unit="ms", doc="ITL p99 that presses for a smaller budget"),
    ThresholdSpec("budget_tail_ratio", ascending=True, unit="ratio", doc="ITL p99 ÷ p50 that counts as a stall"),
    ParamSpec(
        "budget_min_explained",
        unit="ratio",
        doc="a chunk must take at least this share of the p99-p50 gap to explain it",
        minimum=0,
        maximum=1,
    ),
    ParamSpec("budget_lower", unit="tokens", doc="budget a lower move proposes", minimum=256),
    ParamSpec("budget_raise_min", unit="tokens", doc="smallest budget a raise proposes", minimum=512),
    ParamSpec("budget_raise_max", unit="tokens", doc="largest budget a raise proposes", minimum=1024),
)


def limits_of(rule: Rule) -> BudgetLimits:
    """The plan's limits as ``rule`` declares them (:data:`BUDGET_SPECS`); remembered per rule
    configuration (frozen, one per rule and threshold table), which every run asks again."""
    config = rule.config
    found = _LIMITS.get(id(config))
    if found is not None and found[0] is config:
        return found[1]
    limits = _limits_of(rule)
    if len(_LIMITS) >= 256:  # threshold tables are few; overrides in tests make more
        _LIMITS.clear()
    _LIMITS[id(config)] = (config, limits)
    return limits


_LIMITS: dict[int, tuple[RuleConfig, BudgetLimits]] = {}


def _limits_of(rule: Rule) -> BudgetLimits:
    return BudgetLimits(
        ttft_ms=rule.t("budget_ttft_ms").low,
        stall_p99_ms=rule.t("budget_p99_ms").low,
        tail_ratio=rule.t("budget_tail_ratio").low,
        min_explained=rule.p("budget_min_explained"),
        lower_target=int(rule.p("budget_lower")),
        raise_min=int(rule.p("budget_raise_min")),
        raise_max=int(rule.p("budget_raise_max")),
    )


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class BudgetPlan:
    """What the dial should do for one run and the step physics behind it."""

    direction: Direction
    current: int
    target: int
    uncached: float
    step_ms: float
    rate_tok_s: float
    mixed: bool
    chunk_ms_now: float
    chunk_ms_target: float
    steps_now: int
    steps_target: int
    ttft_pressure: bool
    itl_pressure: bool
    itl_guard: str | None
    predicted_itl_p99_ms: float | None
    reason: str

    def chunk(self, budget: float, running: float) -> float:
        """Prompt tokens one step takes at ``budget`` (decodes first when they share the step)."""
        return max(budget - running, budget * 0.25) if self.mixed else budget


def _tail(ctx: RunContext) -> tuple[str, float, float] | None:
    for path in ("itl_ms", "tpot_ms"):
        p = getattr(ctx.run.metrics, path)
        if p.p99 and p.p50:
            return path, float(p.p50), float(p.p99)
    return None


def _step_ms(ctx: RunContext) -> float | None:
    for p in (ctx.run.metrics.itl_ms, ctx.run.metrics.tpot_ms):
        if p.p50:
            return float(p.p50)
    return ctx.roofline.itl_floor_ms if ctx.roofline is not None else None


def itl_guard(ctx: RunContext) -> str | None:
    """Why ITL tails say nothing about the dial on this run, or None: speculative decoding
    (accepted drafts arrive in bursts), bursty streaming (``--stream-interval`` above 1)."""
    if ctx.engine.speculative.value:
        return "speculative decoding emits accepted drafts in bursts"
    interval = ctx.engine.stream_interval.value
    if interval is not None and interval > 1:
        return f"--stream-interval {interval} streams tokens in bursts of {interval}"
    return None


def _matters(ctx: RunContext, objectives: tuple[str, ...], value: float, limit: float) -> tuple[bool, bool]:
    """(matters, breached): judged by the SLO when one is set (>= 0.9 of it), else by ``limit``."""
    ratios = [r for r in (slo_ratio(ctx, o) for o in objectives) if r is not None]
    if ratios:
        worst = max(ratios)
        return worst >= 0.9, worst >= 1.0
    return value >= limit, False


def _slo(ctx: RunContext, objective: str) -> float | None:
    slo = ctx.slo
    value = getattr(slo, objective, None) if slo is not None else None
    return float(value) if isinstance(value, _NUMBER) and value > 0 else None


def budget_plan(ctx: RunContext, rule: Rule) -> BudgetPlan | None:
    """:func:`plan_budget` with ``rule``'s limits, once per run and limits (PRE004 and SCH001 ask
    for the same plan)."""
    limits = limits_of(rule)
    return per_run(ctx, ("plan_budget", limits), lambda c: plan_budget(c, limits))


def plan_budget(ctx: RunContext, limits: BudgetLimits) -> BudgetPlan | None:
    """Raise, lower, or "the dial cannot meet both" for this run; None when the dial is not the
    question (another runtime, no budget, no prompt or TTFT, or nothing presses on it).

    * TTFT pressure: a prompt needs more than one step at the current budget, and TTFT matters
      (its SLO, else ``limits.ttft_ms``).
    * ITL pressure: the budget is above ``lower_target``, several streams decode, the ITL tail is
      stretched and matters, and the predicted chunk time explains at least ``min_explained`` of
      the p99-p50 gap, unless :func:`itl_guard` says the tail is not the dial's.
    * A raise is held to the largest budget whose predicted stall (p50 + chunk time) keeps ITL p99
      within its SLO; if that is not above the current budget, the plan is ``conflict``.
    * Both pressures: the objective whose SLO is breached wins; with neither or both breached the
      plan is ``conflict``.
    """
    budget = ctx.engine.batched_tokens.value
    uncached = ctx.measured.uncached_prompt_tokens
    ttft = ttft_typical(ctx)
    rate = prefill_rate(ctx)
    step = _step_ms(ctx)
    if ctx.runtime not in BUDGET_RUNTIMES or not budget or not uncached or rate is None or step is None:
        return None
    mixed = ctx.engine.mixed_chunk.value is not False
    running = min(ctx.measured.concurrency or 1.0, float(budget) * 0.75)

    def chunk(b: float) -> float:
        return max(b - running, b * 0.25) if mixed else b

    def chunk_ms(b: float) -> float:
        return min(chunk(b), uncached) / rate[0] * 1000.0

    raise_to = int(min(limits.raise_max, max(limits.raise_min, 2 ** math.ceil(math.log2(max(uncached, 1.0))))))
    steps_now = math.ceil(uncached / chunk(budget))
    ttft_pressure = False
    ttft_breached = False
    if ttft is not None and raise_to > budget and steps_now > math.ceil(uncached / chunk(raise_to)):
        ttft_pressure, ttft_breached = _matters(ctx, ("ttft_p50_ms", "ttft_p99_ms"), ttft[0], limits.ttft_ms)

    guard = itl_guard(ctx)
    tail = _tail(ctx)
    itl_pressure = itl_breached = False
    conc = ctx.measured.concurrency
    if guard is None and tail is not None and conc is not None and conc >= 2 and budget > limits.lower_target:
        _path, p50, p99 = tail
        stall = p99 - p50
        # An estimated compute figure (no published TFLOPS) is a band, not a point: the chunk must
        # explain the tail even at the band's fast end.
        fast = (
            ESTIMATE_BAND
            if rate[1] == "physics" and ctx.roofline is not None and ctx.roofline.prefill_tflops_estimated
            else 1.0
        )
        explained = stall > 0 and chunk_ms(budget) / fast >= limits.min_explained * stall
        stretched = p99 / p50 >= limits.tail_ratio
        if explained and min(budget, uncached) > limits.lower_target:
            matters, itl_breached = _matters(ctx, ("itl_p99_ms", "tpot_p99_ms"), p99, limits.stall_p99_ms)
            itl_pressure = matters and (stretched or itl_breached)

    itl_slo = (_slo(ctx, "itl_p99_ms") or _slo(ctx, "tpot_p99_ms")) if ctx.slo is not None else None
    p50_now = tail[1] if tail is not None else step
    direction: Direction | None = None
    target = budget
    reason = ""
    if ttft_pressure and itl_pressure:
        if itl_breached and not ttft_breached:
            direction, target = "lower", limits.lower_target
            reason = "the ITL objective is breached and the TTFT one is not"
        elif ttft_breached and not itl_breached:
            direction, target = "raise", raise_to
            reason = "the TTFT objective is breached and the ITL one is not"
        else:
            direction = "conflict"
            reason = "a larger budget shortens TTFT but lengthens the stall behind ITL p99, and both matter"
    elif itl_pressure:
        direction, target = "lower", limits.lower_target
        reason = "prompt chunks explain the ITL tail"
    elif ttft_pressure:
        direction, target = "raise", raise_to
        reason = "prompts need several steps at this budget"
    if direction is None:
        return None
    if direction == "raise" and itl_slo is not None:
        # Hold the raise to what the ITL objective allows: p50 + one chunk's compute <= SLO.
        allowed = target
        while allowed > budget and p50_now + chunk_ms(allowed) > itl_slo:
            allowed //= 2
        if allowed <= budget:
            direction, target = "conflict", budget
            reason = (
                f"a larger budget's chunk ({chunk_ms(raise_to):.0f} ms) would push ITL p99 past its {itl_slo:g} ms "
                "objective"
            )
        else:
            target = allowed
    predicted = p50_now + chunk_ms(target) if direction != "conflict" else None
    return BudgetPlan(
        direction=direction,
        current=budget,
        target=target,
        uncached=uncached,
        step_ms=step,
        rate_tok_s=rate[0],
        mixed=mixed,
        chunk_ms_now=chunk_ms(budget),
        chunk_ms_target=chunk_ms(target),
        steps_now=steps_now,
        steps_target=math.ceil(uncached / chunk(target)),
        ttft_pressure=ttft_pressure,
        itl_pressure=itl_pressure,
        itl_guard=guard,
        predicted_itl_p99_ms=predicted,
        reason=reason,
    )
