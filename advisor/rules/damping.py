""" "Does it matter" severities shared by the rules (Dr. Elephant's damping).

A rule's raw severity says how far a value is from healthy; these caps say whether anyone would
feel it. The finding's severity is the ``min`` of both (:func:`advisor.rules.severity.damp`).
The limits live in the ``[common]`` section of ``rules/thresholds.toml``.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar, Token
from types import MappingProxyType
from typing import Any

from advisor.rules.base import Gain, Rule
from advisor.rules.config import RuleConfig, ThresholdSpec
from advisor.rules.context import RunContext
from advisor.rules.severity import Severity

__all__ = [
    "BARE",
    "COMMON_SPECS",
    "CONTEXT_SEVERITY_CAP",
    "FLOOR",
    "SLO_METRICS",
    "dropping_below",
    "floor",
    "gain_cap",
    "ranked_severity",
    "sample_cap",
    "slo_cap",
    "slo_ratio",
    "stop_dropping",
]

#: Missing context is information, not failure: a rule that asks for a field (``asks_for_context``)
#: is never above this, so it never trips ``--fail-on severe`` and never fails the verdict.
CONTEXT_SEVERITY_CAP = Severity.MODERATE

#: The severity below which the engine drops findings while it evaluates the rules (``advise``'s
#: ``min_severity``). Outside :func:`dropping_below` it is ``none``: every finding is built in full.
#: Read it through :func:`floor`; :func:`advisor.rules.helpers.dropped` reads it directly (hot).
FLOOR: ContextVar[Severity] = ContextVar("advisor_rules_floor", default=Severity.NONE)

COMMON_SPECS: tuple[ThresholdSpec, ...] = (
    ThresholdSpec(
        "gain_relative",
        ascending=True,
        unit="ratio",
        doc="|relative| size of a finding's expected gain; caps its severity (a 3 % gap is never critical)",
    ),
    ThresholdSpec(
        "tail_samples",
        ascending=False,
        unit="requests",
        doc="requests behind a p99; fewer is a less reliable tail, which caps tail-based findings",
    ),
    ThresholdSpec(
        "slo_ratio",
        ascending=True,
        unit="ratio",
        doc=(
            "found ÷ objective (objective ÷ found for minimums); caps findings on that metric (met comfortably → low)"
        ),
    ),
)

#: SLO field → (metric path, True when the objective is a maximum).
SLO_METRICS: dict[str, tuple[str, bool]] = {
    "ttft_p50_ms": ("ttft_ms.p50", True),
    "ttft_p99_ms": ("ttft_ms.p99", True),
    "itl_p50_ms": ("itl_ms.p50", True),
    "itl_p99_ms": ("itl_ms.p99", True),
    "tpot_p99_ms": ("tpot_ms.p99", True),
    "e2e_p99_ms": ("e2e_ms.p99", True),
    "decode_tok_s_min": ("decode_tok_s", False),
    "output_throughput_tok_s_min": ("output_throughput_tok_s", False),
}


def gain_cap(common: RuleConfig, gain: Gain | None) -> Severity | None:
    """Cap by the size of the expected gain; None (no cap) when the finding predicts none."""
    if gain is None:
        return None
    return common.t("gain_relative").severity_of(abs(gain.relative))


def ranked_severity(rule: Rule, severity: Severity, gain: Gain | None) -> Severity:
    """The severity the engine ranks ``rule``'s finding at: damped by the size of its expected gain
    (unless the rule opts out, ``damp_by_gain``), and at most :data:`CONTEXT_SEVERITY_CAP` for a
    rule that asks for missing context."""
    # damp() spelled out: the engine asks this of every finding, and a rule of each it may drop.
    if gain is not None and rule.damp_by_gain:
        relative = gain.relative
        cap = rule.common.t("gain_relative").severity_of(relative if relative >= 0 else -relative)  # gain_cap()
        if cap < severity:  # noqa: PLR1730  (min() without a call: the engine asks per finding)
            severity = cap
    if rule.asks_for_context and severity > CONTEXT_SEVERITY_CAP:
        return CONTEXT_SEVERITY_CAP
    return severity


#: The ``details`` of a bare finding (:func:`advisor.rules.helpers.dropped`): its ``severity`` is
#: already the ranked one, below the floor, so the engine lists it as suppressed without ranking
#: it again (ranking is idempotent: the same damping twice gives the same severity).
BARE: Mapping[str, Any] = MappingProxyType({})


def floor() -> Severity:
    """The severity below which the current evaluation drops findings (``none`` outside ``advise``)."""
    return FLOOR.get()


def dropping_below(min_severity: Severity) -> Token[Severity]:
    """While the engine evaluates the rules: findings ranked below ``min_severity`` are dropped, so
    a rule may skip building their texts (:func:`advisor.rules.helpers.dropped`). Hand the token
    back to :func:`stop_dropping` when done (a ``try``/``finally``: cheaper than a context manager,
    which the engine would enter on every run)."""
    return FLOOR.set(min_severity)


def stop_dropping(token: Token[Severity]) -> None:
    """The floor as it was before :func:`dropping_below` gave ``token``."""
    FLOOR.reset(token)


def sample_cap(common: RuleConfig, n: int | None) -> Severity:
    """Cap for a finding that rests on a tail percentile measured over ``n`` requests.

    ``tail_samples`` grades how thin the sample is (descending: fewer is worse); the cap is the
    complement, so 20 requests (severe thinness) allow at most ``low``. Unknown ``n`` allows
    ``moderate``: a tail of unknown support is not evidence for a severe finding.
    """
    if n is None:
        return Severity.MODERATE
    thin = common.t("tail_samples").severity_of(float(n))
    return _BY_VALUE[Severity.CRITICAL - thin]  # Severity(...) by table: Enum's call is slow


#: Every severity by its value (``_BY_VALUE[2] is Severity.MODERATE``).
_BY_VALUE: tuple[Severity, ...] = tuple(sorted(Severity))


def slo_ratio(ctx: RunContext, objective: str) -> float | None:
    """found ÷ target for a maximum objective, target ÷ found for a minimum; None when either is
    absent (no SLO set, or the metric was not measured)."""
    if ctx.slo is None:
        return None
    target: float | None = getattr(ctx.slo, objective, None)
    path, is_max = SLO_METRICS[objective]
    found = ctx.metric(path)
    if target is None or found is None or target <= 0 or found <= 0:
        return None
    return found / target if is_max else target / found


def slo_cap(ctx: RunContext, common: RuleConfig, *objectives: str) -> Severity | None:
    """Cap from the deployment's SLOs on the metric a finding would improve.

    With no SLO on any of ``objectives``: None (the rule's own absolute limits apply). Otherwise
    the worst ratio's grade, but at least ``low``: an SLO met comfortably leaves a finding as a
    low-severity note, a breached one lets it through.
    """
    if ctx.slo is None:  # most runs: no objective, so no ratio (slo_ratio says None for each)
        return None
    ratios = [r for o in objectives if (r := slo_ratio(ctx, o)) is not None]
    if not ratios:
        return None
    return max(Severity.LOW, common.t("slo_ratio").severity_of(max(ratios)))
