"""Re-derive stored runs from their raw payloads with today's parsers (``advisor runs reparse``).

Every run keeps the bytes it came from and the context it was submitted with, so a better parser can
fix old runs. A run whose canonical form changes gets its columns, hash and analysis rewritten; its
open recommendations are replaced, applied or dismissed ones are kept (they record what people did).
"""

from __future__ import annotations

import functools
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from advisor.db.batching import on_connection, writer_lock
from advisor.db.models import RawPayload, Run
from advisor.domain.runs.baselines import invalidate as invalidate_baselines
from advisor.domain.runs.pipeline import RunPipeline
from advisor.domain.runs.services import RawPayloadService
from advisor.domain.runs.store import RunUpdate, WritePlan, analysis_values, recommendation_rows, run_values, write_plan
from advisor.domain.runs.submission import split_bulk
from advisor.errors import AdvisorError
from advisor.ingest.submission import CONTEXT_FIELDS, context_layer, parse_submission

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
        self.pipeline = RunPipeline(session)

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
            plan = WritePlan(deployment_ids={})
            for row in rows:
                report.checked += 1
                try:
                    await self._reparse_one(row, payload, data, report, plan)
                except AdvisorError as exc:
                    report.failed[row.id] = str(exc)
            if dry_run or not plan.updates:
                continue
            async with writer_lock(self.session):
                await on_connection(self.session, functools.partial(write_plan, plan=plan))
                await self.session.commit()
            invalidate_baselines()  # the stored documents changed
        return report

    async def _reparse_one(
        self, row: Run, payload: RawPayload, data: bytes, report: ReparseReport, plan: WritePlan
    ) -> None:
        context = dict(row.context or {})
        body = split_bulk(data, None)[row.source_index] if payload.format == "bulk" else data
        stored_format = context.get("format") or payload.format or "auto"
        parsed = parse_submission(
            body,
            content_type=payload.content_type,
            format_id="auto" if payload.format == "bulk" else stored_format,
            layers=[context_layer(_query_context(context), "query")],
            file_name=payload.file_name,
        )
        resolved = await self.pipeline.resolve(parsed)
        index = 0 if payload.format == "bulk" else row.source_index
        if index >= len(resolved):
            report.failed[row.id] = f"the file now yields {len(resolved)} runs; this was run #{index}"
            return
        item = resolved[index]
        if item.hash == row.content_hash:
            report.unchanged += 1
            return
        clash = (await self.session.execute(select(Run.id).where(Run.content_hash == item.hash))).scalar()
        if clash is not None:
            report.duplicates.append(row.id)
            return
        report.changed.append(row.id)
        run = item.run
        run.measured_at = run.measured_at or row.measured_at
        deployment = row.deployment
        analysis = await self.pipeline.analyse(item, deployment, None, exclude=row.id)
        values = run_values(item) | analysis_values(analysis)
        plan.updates.append(RunUpdate(row.id, values, recommendation_rows(analysis)))
