"""Recommendations: built from the rules engine's ranked findings or from stored rows, and marked
applied or dismissed, so that reports can measure what the advice was worth."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from advisor.db.models import Recommendation
from advisor.domain.recommendations.schemas import STATUSES, RecommendationOut
from advisor.errors import InvalidInput, NotFound
from advisor.rules.engine import Recommendation as RankedFinding

__all__ = ["RecommendationService", "recommendation_out", "recommendation_values"]

# The rule's fields beyond the typed columns, kept in the row's ``body``.
_BODY_FIELDS = ("fix_for_runtime", "runtime", "docs", "rule_status", "details")


def recommendation_values(rank: int, finding: RankedFinding) -> dict[str, Any]:
    """The column values of a ranked finding (its run id aside)."""
    body: dict[str, Any] = {
        "fix_for_runtime": finding.fix_for_runtime,
        "runtime": finding.runtime,
        "docs": finding.docs,
        "rule_status": finding.rule_status,
    }
    if finding.details:
        body["details"] = dict(finding.details)
    severity = finding.severity
    return {
        "rank": rank,
        "rule_id": finding.rule_id,
        "name": finding.name,
        "action": finding.action,
        "phase": finding.phase,
        "severity": severity.label,
        "severity_level": int(severity),
        "score": finding.score,
        "confidence": round(finding.confidence, 2),
        "title": finding.title,
        "evidence": [e.to_dict() for e in finding.evidence],
        "fix": dict(finding.fix),
        "expected_gain": finding.expected_gain.to_dict() if finding.expected_gain else None,
        "body": body,
        "status": "open",
        "status_note": None,
        "status_changed_at": None,
    }


_ROW_FIELDS = (
    "run_id", "rank", "rule_id", "name", "action", "phase", "severity", "score", "confidence", "title",
    "evidence", "fix", "expected_gain", "body", "status", "status_note", "status_changed_at",
)  # fmt: skip


def recommendation_out(
    source: RankedFinding | Recommendation | Mapping[str, Any], *, rank: int = 1, rec_id: int | None = None
) -> RecommendationOut:
    """The public shape of a recommendation: from the engine's ranked finding (``rank`` its place),
    a stored row, or the column values just inserted (``rec_id`` their new id)."""
    values: Mapping[str, Any]
    if isinstance(source, RankedFinding):
        values = recommendation_values(rank, source)
    elif isinstance(source, Recommendation):
        values = {name: getattr(source, name) for name in _ROW_FIELDS}
        rec_id = source.id
    else:
        values = source
    body = values.get("body") or {}
    return RecommendationOut(
        id=rec_id,
        run_id=values.get("run_id"),
        rank=values["rank"],
        rule_id=values["rule_id"],
        name=values["name"],
        action=values["action"],
        phase=values.get("phase"),
        severity=values["severity"],
        score=values["score"],
        title=values["title"],
        evidence=values["evidence"],
        fix=values["fix"],
        expected_gain=values.get("expected_gain"),
        confidence=values.get("confidence"),
        fix_for_runtime=body.get("fix_for_runtime"),
        runtime=body.get("runtime"),
        docs=body.get("docs"),
        # Rows stored before 0.2 kept the rule's lifecycle as "status" in the body.
        rule_status=body.get("rule_status", body.get("status")),
        details=body.get("details"),
        status=values.get("status") or "open",
        status_note=values.get("status_note"),
        status_changed_at=values.get("status_changed_at"),
    )


class RecommendationService:
    """Stored recommendations of runs."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def rows_for_run(self, run_id: int) -> list[Recommendation]:
        rows = await self.session.execute(
            select(Recommendation).where(Recommendation.run_id == run_id).order_by(Recommendation.rank)
        )
        return list(rows.scalars())

    async def for_run(self, run_id: int) -> list[RecommendationOut]:
        return [recommendation_out(row) for row in await self.rows_for_run(run_id)]

    async def set_status(self, rec_id: int, status: str, note: str | None) -> RecommendationOut:
        if status not in STATUSES:
            raise InvalidInput(f"must be one of {', '.join(STATUSES)}", field="status")
        rec = (
            await self.session.execute(select(Recommendation).where(Recommendation.id == rec_id))
        ).scalar_one_or_none()
        if rec is None:
            raise NotFound(f"no recommendation with id {rec_id}", field="id")
        rec.status = status
        rec.status_note = note
        rec.status_changed_at = datetime.now(UTC)
        await self.session.commit()
        return recommendation_out(rec)
