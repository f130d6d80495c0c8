"""Re-derive stored runs from their raw payloads with today's parsers (``advisor runs reparse``).

Every run keeps the bytes it came from and the context it was submitted with, so a better parser can
fix old runs. A run whose canonical form changes gets its columns, hash and analysis rewritten; its
open recommendations are replaced, applied or dismissed ones are kept (they record what people did).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.ext.asyncio import AsyncSession

from advisor.db.models import RawPayload, Recommendation, Run
from advisor.domain.runs.baselines import invalidate as invalidate_baselines
from advisor.domain.runs.ingestion import IngestionService
from advisor.domain.runs.services import RawPayloadService, run_columns
from advisor.domain.runs.submission import CONTEXT_FIELDS, parse_submission, split_bulk
from advisor.errors import AdvisorError

__all__ = ["ReparseReport", "ReparseService"]


@dataclass
class ReparseReport:
    checked: int = 0
    changed: list[int] = field(default_factory=list)
    unchanged: int = 0
    duplicates: list[int] = field(default_factory=list)
    failed: dict[int, str] = field(default_factory=dict)


def _query_context(context: dict[str, Any]) -> dict[str, Any]:
    keep = {*CONTEXT_FIELDS, "engine_args", "labels", "slo", "submitted_by"}
    return {k: v for k, v in context.items() if k in keep and v not in (None, {}, [])}


class ReparseService:
    def __init__(self, session: AsyncSession) -> None:
        self.session = session
        self.ingestion = IngestionService(session)

    async def reparse(
        self, *, run_ids: list[int] | None = None, format_id: str | None = None, dry_run: bool = False
    ) -> ReparseReport:
        stmt = select(Run).where(Run.raw_payload_id.is_not(None)).order_by(Run.id)
        if run_ids:
            stmt = stmt.where(Run.id.in_(run_ids))
        if format_id:
            stmt = stmt.where(Run.source_format == format_id)
        groups: dict[int, list[Run]] = defaultdict(list)
        for row in (await self.session.execute(stmt)).scalars():
            groups[int(row.raw_payload_id or 0)].append(row)
        report = ReparseReport()
        for payload_id, rows in groups.items():
            payload = await self.session.get(RawPayload, payload_id)
            if payload is None:
                continue
            data = RawPayloadService.decompress(payload)
            for row in rows:
                report.checked += 1
                try:
                    await self._reparse_one(row, payload, data, report, dry_run=dry_run)
                except AdvisorError as exc:
                    report.failed[row.id] = str(exc)
            if dry_run:
                await self.session.rollback()
            else:
                await self.session.commit()
                invalidate_baselines()  # the stored documents changed
        return report

    async def _reparse_one(
        self, row: Run, payload: RawPayload, data: bytes, report: ReparseReport, *, dry_run: bool
    ) -> None:
        context = dict(row.context or {})
        body = split_bulk(data, None)[row.source_index] if payload.format == "bulk" else data
        stored_format = context.get("format") or payload.format or "auto"
        parsed = parse_submission(
            body,
            content_type=payload.content_type,
            format_id="auto" if payload.format == "bulk" else stored_format,
            query_context=_query_context(context),
            header_context={},
            file_name=payload.file_name,
        )
        prepared = await self.ingestion.prepare(parsed)
        index = 0 if payload.format == "bulk" else row.source_index
        if index >= len(prepared):
            report.failed[row.id] = f"the file now yields {len(prepared)} runs; this was run #{index}"
            return
        item = prepared[index]
        if item.hash == row.content_hash:
            report.unchanged += 1
            return
        clash = (await self.session.execute(select(Run.id).where(Run.content_hash == item.hash))).scalar()
        if clash is not None:
            report.duplicates.append(row.id)
            return
        report.changed.append(row.id)
        if dry_run:
            return
        run = item.resolved.run
        run.measured_at = run.measured_at or row.measured_at
        values = run_columns(
            run,
            hardware_id=item.resolved.hardware_id,
            model_id=item.resolved.model_id,
            quantization_id=item.resolved.quantization_id,
        )
        for key, value in values.items():
            setattr(row, key, value)
        row.content_hash = item.hash
        row.measured_at = run.measured_at
        await self.session.execute(
            delete(Recommendation).where(Recommendation.run_id == row.id, Recommendation.status == "open")
        )
        row.analysis = {}
        await self.session.flush()
        await self.ingestion.analyse_stored(row, commit=False)
