"""Recommendations of stored runs: read (analysing lazily when a bulk-loaded run has none yet) and
mark applied or dismissed, so that reports can measure what the advice was worth."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from advisor.db.models import Recommendation
from advisor.errors import InvalidInput, NotFound

__all__ = ["STATUSES", "RecommendationService"]

STATUSES = ("open", "applied", "dismissed")


class RecommendationService:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def for_run(self, run_id: int) -> list[dict[str, Any]]:
        from advisor.domain.runs.ingestion import IngestionService, _rec_dict

        ingestion = IngestionService(self.session)
        row = await ingestion.runs.get_run(run_id)
        recs = await ingestion.runs.recommendations(run_id)
        if not recs and not row.analysis:
            # Bulk-loaded runs are analysed on first read; the result is stored like any other.
            await ingestion.analyse_stored(row)
            recs = await ingestion.runs.recommendations(run_id)
        return [_rec_dict(r) for r in recs]

    async def set_status(self, rec_id: int, status: str, note: str | None) -> dict[str, Any]:
        from advisor.domain.runs.ingestion import _rec_dict

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
        out = _rec_dict(rec)
        out["status_changed_at"] = rec.status_changed_at
        out["run_id"] = rec.run_id
        return out
