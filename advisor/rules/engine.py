"""Evaluate the rules on a :class:`RunContext`, rank the findings and decide the verdict.

Ranking (DESIGN §5): severity, then an actionable fix before a "cannot judge, add X" finding
(a rule that ``asks_for_context``), then score = severity × size of the expected gain × confidence,
then rule ID, so the same run always gives the same order. Silence is a feature: findings below
``low`` are dropped (and listed in ``findings_suppressed``), and every severity is damped by the
size of its own expected gain, so a healthy run shows nothing above ``low``.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from advisor.rules.base import ACTIONS, FIX_KEYS, Evidence, Finding, Gain, Rule, Status, fast_frozen_init
from advisor.rules.context import MissingField, RunContext
from advisor.rules.damping import (
    BARE,
    CONTEXT_SEVERITY_CAP,
    SLO_METRICS,
    dropping_below,
    ranked_severity,
    stop_dropping,
)
from advisor.rules.registry import docs_url, get_rules
from advisor.rules.severity import Severity

if TYPE_CHECKING:
    from advisor.ml.expectations import Expectations

__all__ = [
    "CONTEXT_SEVERITY_CAP",
    "Advice",
    "Recommendation",
    "SloCheck",
    "Suppressed",
    "Verdict",
    "VerdictReason",
    "advise",
    "check_slos",
    "score",
]

logger = logging.getLogger(__name__)

Verdict = Literal["pass", "warn", "fail"]

#: A gain of ×4 (or ÷4) counts as the largest size in the score; bigger ones do not rank higher.
_FULL_GAIN = math.log(4.0)
#: Size assumed for findings that predict no number (measurement quality, missing fields).
_UNKNOWN_GAIN_SIZE = 0.5


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class Recommendation:
    """A ranked finding in the public shape of DESIGN §4."""

    rule_id: str
    name: str
    action: str
    phase: str
    severity: Severity
    score: float
    title: str
    evidence: tuple[Evidence, ...]
    fix: Mapping[str, str]
    fix_for_runtime: str | None
    runtime: str | None
    expected_gain: Gain | None
    confidence: float
    docs: str
    rule_status: str
    details: Mapping[str, Any] = field(default_factory=dict)
    #: The rule asks for missing context ("cannot judge, add X"): at equal severity it ranks below
    #: every finding that changes the setup. Not part of the public shape.
    asks_for_context: bool = False

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "rule_id": self.rule_id,
            "name": self.name,
            "action": self.action,
            "phase": self.phase,
            "severity": self.severity.label,
            "score": self.score,
            "title": self.title,
            "evidence": [e.to_dict() for e in self.evidence],
            "fix": dict(self.fix),
            "fix_for_runtime": self.fix_for_runtime,
            "runtime": self.runtime,
            "expected_gain": self.expected_gain.to_dict() if self.expected_gain else None,
            "confidence": round(self.confidence, 2),
            "docs": self.docs,
            "rule_status": self.rule_status,
        }
        if self.details:
            out["details"] = dict(self.details)
        return out


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class Suppressed:
    """A finding that was evaluated but not recommended, and why."""

    rule_id: str
    severity: Severity
    reason: str

    def to_dict(self) -> dict[str, str]:
        return {"rule_id": self.rule_id, "severity": self.severity.label, "reason": self.reason}


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class SloCheck:
    """One objective of the deployment against the run. ``met`` is None when not measured."""

    objective: str
    metric: str
    target: float
    found: float | None
    met: bool | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "objective": self.objective,
            "metric": self.metric,
            "target": self.target,
            "found": self.found,
            "met": self.met,
        }


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class VerdictReason:
    """Why the verdict is what it is: a breached objective (``kind="slo"``: ``name`` is the
    objective, ``limit`` its target, ``found`` the measured value) or a finding (``kind="finding"``:
    ``name`` is the rule ID, ``limit`` the severity that moves the verdict, ``found`` the finding's)."""

    kind: Literal["slo", "finding"]
    name: str
    limit: float | str
    found: float | str | None
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "limit": self.limit, "found": self.found, "text": self.text}


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class Advice:
    """What :func:`advise` returns; :meth:`to_dict` is the API's ``{verdict, recommendations,
    expectations}`` plus the reasons for the verdict, the SLO checks and the missing fields."""

    verdict: Verdict
    recommendations: tuple[Recommendation, ...]
    expectations: Expectations | None
    findings_suppressed: tuple[Suppressed, ...] = ()
    verdict_reasons: tuple[VerdictReason, ...] = ()
    slo: tuple[SloCheck, ...] = ()
    missing: tuple[MissingField, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "recommendations": [r.to_dict() for r in self.recommendations],
            "expectations": _expectations_dict(self.expectations),
            "verdict_reasons": [r.to_dict() for r in self.verdict_reasons],
            "slo": [s.to_dict() for s in self.slo],
            "missing": [m.to_dict() for m in self.missing],
        }


def _expectations_dict(exp: Expectations | None) -> dict[str, Any] | None:
    return exp.to_dict() if exp is not None else None


def score(severity: Severity, gain: Gain | None, confidence: float) -> float:
    """severity (0..1) × size of the expected gain (0..1, ×4 is full size) × confidence."""
    size = min(1.0, gain.size / _FULL_GAIN) if gain is not None else _UNKNOWN_GAIN_SIZE
    return round((int(severity) / 4.0) * size * max(0.0, min(1.0, confidence)), 3)


def check_slos(ctx: RunContext) -> tuple[SloCheck, ...]:
    """Every objective the deployment sets, measured or not."""
    if ctx.slo is None:
        return ()
    checks: list[SloCheck] = []
    for objective, (path, is_max) in SLO_METRICS.items():
        target = getattr(ctx.slo, objective, None)
        if target is None:
            continue
        found = ctx.metric(path)
        met = None if found is None else (found <= target if is_max else found >= target)
        checks.append(SloCheck(objective, path, float(target), found, met))
    return tuple(checks)


def _order_fix(fix: Mapping[str, str], runtime: str | None) -> tuple[dict[str, str], str | None]:
    items, own = _ordered_fix(tuple(fix.items()), runtime)
    return dict(items), own


@functools.lru_cache(maxsize=4096)
def _ordered_fix(
    items: tuple[tuple[str, str], ...], runtime: str | None
) -> tuple[tuple[tuple[str, str], ...], str | None]:
    """The run's runtime first, then :data:`FIX_KEYS` in order, then any other key; and the text
    for the run's runtime. Remembered by the fix's items (a rule's fix texts repeat across the runs
    of a setup; strings hash once), a new dict per finding (:func:`_order_fix`)."""
    fix = dict(items)
    ordered: dict[str, str] = {}
    if runtime and runtime in fix:
        ordered[runtime] = fix[runtime]
    for key in FIX_KEYS:
        if key in fix and key not in ordered:
            ordered[key] = fix[key]
    for key, text in fix.items():  # keys outside the known runtimes keep their place at the end
        ordered.setdefault(key, text)
    own = fix.get(runtime) if runtime else None
    return tuple(ordered.items()), own if own is not None else fix.get("other")


class _RuleFacts(NamedTuple):
    """What every recommendation of a rule class carries, whatever the run (:func:`_facts`)."""

    actions: frozenset[str]
    phase: str
    docs: str
    status: str


def _facts(cls: type[Rule]) -> _RuleFacts:
    """A rule class's declared actions (those in the vocabulary), phase, docs URL and status,
    remembered per class (class attributes, fixed once the rule is registered)."""
    found = _FACTS.get(cls)
    if found is None:
        declared = (cls.action, *(a for a in cls.actions if a != cls.action))
        found = _RuleFacts(
            frozenset(a for a in declared if a in ACTIONS), str(cls.phase), docs_url(cls.id), str(cls.rule_status)
        )
        if len(_FACTS) >= 1024:  # rule classes made on the fly (tests) cannot grow it without bound
            _FACTS.clear()
        _FACTS[cls] = found
    return found


_FACTS: dict[type[Rule], _RuleFacts] = {}


def _recommend(rule: Rule, finding: Finding, severity: Severity, runtime: str | None) -> Recommendation:
    action = finding.action or rule.action
    facts = _facts(type(rule))
    if action not in facts.actions:
        raise ValueError(f"{rule.id} returned action {action!r}, not one it declares ({', '.join(rule.all_actions)})")
    fix, own = _order_fix(finding.fix, runtime)
    confidence = max(0.0, min(1.0, finding.confidence))
    return Recommendation(
        rule_id=rule.id,
        name=rule.name,
        action=action,
        phase=facts.phase,
        severity=severity,
        score=score(severity, finding.expected_gain, confidence),
        title=finding.title,
        evidence=finding.evidence,
        fix=fix,
        fix_for_runtime=own,
        runtime=runtime,
        expected_gain=finding.expected_gain,
        confidence=confidence,
        docs=facts.docs,
        rule_status=facts.status,
        details=finding.details,
        asks_for_context=rule.asks_for_context,
    )


def advise(
    ctx: RunContext,
    *,
    rules: Sequence[Rule] | None = None,
    min_severity: Severity = Severity.LOW,
    strict: bool = False,
) -> Advice:
    """Run ``rules`` (default: every registered rule) on ``ctx`` and rank what they find.

    ``strict`` re-raises a rule's exception (tests); otherwise a failing rule is logged and listed
    as suppressed, so one bug cannot take the whole analysis down.

    Verdict: ``fail`` when an SLO is breached, or a stable rule fires at or above its declared
    ``fails_verdict_at`` (a regression beyond noise, a benchmark whose requests failed); ``warn``
    when a stable rule's finding is ``moderate`` or worse, or any finding (preview rules too) is
    ``severe`` or worse; ``pass`` otherwise. A rule that asks for missing context is capped at
    ``moderate`` and never fails the verdict. Each cause is one :class:`VerdictReason`.
    """
    active = tuple(rules) if rules is not None else get_rules()
    fired: list[tuple[Rule, Finding, Severity]] = []
    suppressed: list[Suppressed] = []
    # A rule may return a bare finding (no texts) when it will rank below ``min_severity``.
    token = dropping_below(min_severity)
    try:
        for rule in active:
            try:
                finding = rule.evaluate(ctx)
            except Exception as exc:
                if strict:
                    raise
                logger.exception("rule %s failed", rule.id)
                suppressed.append(Suppressed(rule.id, Severity.NONE, f"error: {type(exc).__name__}: {exc}"))
                continue
            if finding is None:
                continue
            if finding.details is BARE:  # dropped by the rule, already ranked below the floor
                suppressed.append(Suppressed(rule.id, finding.severity, "below-threshold"))
                continue
            severity = ranked_severity(rule, finding.severity, finding.expected_gain)
            if severity < min_severity:
                suppressed.append(Suppressed(rule.id, severity, "below-threshold"))
                continue
            fired.append((rule, finding, severity))
    finally:
        stop_dropping(token)

    superseded: dict[str, str] = {}
    for rule, _finding, _severity in fired:
        for victim in rule.supersedes:
            superseded.setdefault(victim, rule.id)
    recommendations: list[Recommendation] = []
    fail_reasons: list[VerdictReason] = []
    for rule, finding, severity in fired:
        if rule.id in superseded:
            suppressed.append(Suppressed(rule.id, severity, f"superseded-by:{superseded[rule.id]}"))
            continue
        try:
            recommendations.append(_recommend(rule, finding, severity, ctx.runtime))
        except ValueError:
            if strict:
                raise
            logger.exception("rule %s returned a malformed finding", rule.id)
            suppressed.append(Suppressed(rule.id, severity, "error: malformed finding"))
            continue
        threshold = rule.fails_verdict_at
        if (
            rule.rule_status == Status.STABLE
            and not rule.asks_for_context
            and threshold is not None
            and severity >= threshold
        ):
            fail_reasons.append(_finding_reason(recommendations[-1], threshold))

    slo = check_slos(ctx)
    slo_reasons = [_slo_reason(check) for check in slo if check.met is False]

    recommendations.sort(key=_rank)
    failing = {r.name for r in fail_reasons}
    warn_reasons = [
        _finding_reason(r, Severity.MODERATE if r.rule_status == Status.STABLE else Severity.SEVERE)
        for r in recommendations
        if r.rule_id not in failing and _warns(r)
    ]
    verdict: Verdict
    if slo_reasons or fail_reasons:
        verdict = "fail"
    elif warn_reasons:
        verdict = "warn"
    else:
        verdict = "pass"
    return Advice(
        verdict=verdict,
        recommendations=tuple(recommendations),
        expectations=ctx.expectations,
        findings_suppressed=tuple(suppressed),
        # The reasons for the verdict given: a fail lists what fails it, a warn what warns.
        verdict_reasons=(*slo_reasons, *fail_reasons) if verdict == "fail" else tuple(warn_reasons),
        slo=slo,
        missing=ctx.missing,
    )


def _rank(rec: Recommendation) -> tuple[int, bool, float, str]:
    """Severity first; at equal severity an actionable fix before a request for missing context
    (whatever its score: knowing what to change beats knowing what to add), then score, then ID."""
    return (-int(rec.severity), rec.asks_for_context, -rec.score, rec.rule_id)


def _warns(rec: Recommendation) -> bool:
    """A stable finding at ``moderate`` or worse, or any finding at ``severe`` or worse (a severe
    finding never leaves the verdict at ``pass``, preview or not)."""
    if rec.severity >= Severity.SEVERE:
        return True
    return rec.rule_status == Status.STABLE and rec.severity >= Severity.MODERATE


def _finding_reason(rec: Recommendation, limit: Severity) -> VerdictReason:
    return VerdictReason(
        kind="finding",
        name=rec.rule_id,
        limit=limit.label,
        found=rec.severity.label,
        text=f"{rec.rule_id} {rec.name} is {rec.severity.label} (limit {limit.label}): {rec.title}",
    )


def _slo_reason(check: SloCheck) -> VerdictReason:
    is_max = SLO_METRICS[check.objective][1]
    verb = "above" if is_max else "below"
    found = check.found if check.found is not None else float("nan")
    return VerdictReason(
        kind="slo",
        name=check.objective,
        limit=check.target,
        found=round(found, 3),
        text=f"SLO {check.objective}: {check.metric} {found:g} is {verb} the objective {check.target:g}",
    )
