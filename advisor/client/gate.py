"""The CI gate: does a result fail ``--fail-on SEVERITY`` or ``--fail-on-verdict VERDICT``?"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from advisor.client.render import reason_text

__all__ = ["SEVERITIES", "VERDICTS", "GateResult", "evaluate_gate", "results_of"]

#: Ascending (DESIGN §4); ``none`` never fails a gate.
SEVERITIES: tuple[str, ...] = ("none", "low", "moderate", "severe", "critical")
VERDICTS: tuple[str, ...] = ("pass", "warn", "fail")


@dataclass(frozen=True)
class GateResult:
    failed: bool
    reasons: tuple[str, ...]


def results_of(answer: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ``{run, verdict, recommendations, expectations}`` items of one answer (a sweep file
    answers ``{"runs": [...]}``)."""
    if "runs" in answer and isinstance(answer["runs"], list):
        return [dict(item) for item in answer["runs"]]
    return [dict(answer)]


def _rank(value: str, order: Sequence[str]) -> int:
    try:
        return order.index(value)
    except ValueError:
        return -1


def evaluate_gate(
    results: Iterable[Mapping[str, Any]], *, fail_on: str | None = None, fail_on_verdict: str | None = None
) -> GateResult:
    """``fail_on``: any recommendation at or above this severity fails. ``fail_on_verdict``: a
    verdict at or worse than this (``warn`` also fails on ``fail``) fails."""
    reasons: list[str] = []
    for result in results:
        run = result.get("run") or {}
        label = f"run {run.get('id')}" if run.get("id") is not None else "the run"
        if fail_on is not None:
            limit = _rank(fail_on, SEVERITIES)
            hits = [
                rec
                for rec in result.get("recommendations") or []
                if _rank(str(rec.get("severity")), SEVERITIES) >= limit
            ]
            if hits:
                ids = ", ".join(f"{rec.get('rule_id')} ({rec.get('severity')})" for rec in hits)
                reasons.append(f"{label}: {len(hits)} recommendation(s) at or above {fail_on}: {ids}")
        if fail_on_verdict is not None:
            verdict = str(result.get("verdict"))
            if _rank(verdict, VERDICTS) >= _rank(fail_on_verdict, VERDICTS):
                why = "; ".join(reason_text(r) for r in result.get("verdict_reasons") or [])
                reasons.append(
                    f"{label}: verdict {verdict} (--fail-on-verdict {fail_on_verdict})" + (f": {why}" if why else "")
                )
    return GateResult(bool(reasons), tuple(reasons))
