"""Ingestion: parsed submission → resolved runs → analysis → one transaction.

Idempotent: a run's content hash (and an optional Idempotency-Key) finds an earlier submission, which
is returned with 200 instead of a second row. Transactional: the raw payload, the deployment, every
run and every recommendation of a submission are committed together or not at all.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import msgspec
from sqlalchemy.ext.asyncio import AsyncSession

from advisor.canonical import SLO
from advisor.db.models import Deployment, Run
from advisor.domain.catalog.services import CatalogService
from advisor.domain.deployments.services import DeploymentService
from advisor.domain.models.provider import expectations_fn_for
from advisor.domain.runs.analysis import Analysis, analyse
from advisor.domain.runs.schemas import BulkResult, RunResult
from advisor.domain.runs.services import (
    RawPayloadService,
    RunService,
    is_integrity_error,
    run_columns,
    run_to_canonical,
    run_to_out,
)
from advisor.domain.runs.submission import (
    ParsedSubmission,
    ResolvedRun,
    content_hash,
    normalise_run,
)
from advisor.errors import Conflict, InvalidInput
from advisor.rules.context import ExpectationsFn

__all__ = ["IngestionService", "PreparedRun", "writer_lock"]

_SQLITE_WRITER = asyncio.Lock()


@contextlib.asynccontextmanager
async def writer_lock(session: AsyncSession) -> AsyncIterator[None]:
    """Serialise this process's write transactions on SQLite.

    SQLite admits one writer at a time and makes the others poll with growing sleeps (busy_timeout),
    which wrecks throughput under concurrent requests; queueing writers on an asyncio lock instead
    costs nothing. Postgres has row-level locking and needs no such thing.
    """
    if session.bind.dialect.name != "sqlite":
        yield
        return
    async with _SQLITE_WRITER:
        yield


@dataclass
class PreparedRun:
    resolved: ResolvedRun
    hash: str
    index: int


def _slo_of(deployment: Deployment | None, override: SLO | None) -> SLO | None:
    if override is not None:
        return override
    if deployment is None or not deployment.slo:
        return None
    return msgspec.convert(deployment.slo, SLO, strict=False)


class IngestionService:
    """Orchestrates the services of one request's session."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session
        self.runs = RunService(session=session)
        self.raws = RawPayloadService(session=session)
        self.deployments = DeploymentService(session=session)
        self.catalogs = CatalogService(session=session)
        self._expectations_fn: ExpectationsFn | None = None  # the fitted model in force, or the prior

    async def prepare(self, parsed: ParsedSubmission) -> list[PreparedRun]:
        catalog = await self.catalogs.current()
        from_file = parsed.format_id != "canonical"
        prepared: list[PreparedRun] = []
        for index, run in enumerate(parsed.runs):
            try:
                resolved = normalise_run(run, parsed.context, catalog, from_file=from_file)
            except InvalidInput as exc:
                if len(parsed.runs) > 1:
                    exc.field = f"runs[{index}].{exc.field}" if exc.field else f"runs[{index}]"
                raise
            prepared.append(PreparedRun(resolved, content_hash(resolved.run), index))
        return prepared

    async def _analyse(
        self, item: PreparedRun, deployment: Deployment | None, slo: SLO | None, *, exclude: Run | None = None
    ) -> Analysis:
        run = item.resolved.run
        values = {
            "runtime": run.setup.runtime,
            "hardware_id": item.resolved.hardware_id,
            "model_id": item.resolved.model_id,
            "quantization_id": item.resolved.quantization_id,
            "concurrency": run.workload.concurrency,
            "measured_at": run.measured_at,
        }
        baseline = await self.runs.baseline(
            exclude, deployment_id=deployment.id if deployment is not None else None, values=values
        )
        if self._expectations_fn is None:
            self._expectations_fn = await expectations_fn_for(self.session)
        return analyse(
            run,
            slo=_slo_of(deployment, slo),
            baseline=baseline,
            catalog=await self.catalogs.current(),
            expectations_fn=self._expectations_fn,
        )

    async def analyse_stored(self, row: Run, *, commit: bool = True) -> Analysis:
        """Analyse a stored run that has no analysis yet (bulk-loaded) and store the result."""
        run = run_to_canonical(row)
        item = PreparedRun(
            ResolvedRun(run, row.hardware_id, row.model_id, row.quantization_id, {}),
            row.content_hash,
            row.source_index,
        )
        analysis = await self._analyse(item, row.deployment, None, exclude=row)
        row.verdict = analysis.verdict
        row.decode_efficiency = analysis.efficiency.get("decode")
        row.prefill_efficiency = analysis.efficiency.get("prefill")
        row.analysis = analysis.stored()
        kept = {r.rule_id for r in await self.runs.recommendations(row.id)}  # applied/dismissed stay
        await self.runs.add_recommendations(
            row.id, [r for r in analysis.recommendations if r["rule_id"] not in kept], first_rank=len(kept) + 1
        )
        if commit:
            await self.session.commit()
        return analysis

    async def advise(self, parsed: ParsedSubmission) -> list[RunResult]:
        """The same analysis as submit, storing nothing."""
        results = []
        for item in await self.prepare(parsed):
            name = item.resolved.run.deployment
            deployment = await self.deployments.get_by_name(name) if name else None
            analysis = await self._analyse(item, deployment, parsed.slo)
            results.append(
                RunResult(
                    run=msgspec.to_builtins(item.resolved.run),
                    verdict=analysis.verdict,
                    recommendations=analysis.recommendations,
                    expectations=analysis.expectations,
                    created=False,
                )
            )
        return results

    async def submit(
        self,
        parsed: ParsedSubmission,
        *,
        idempotency_key: str | None = None,
        submitted_by: str | None = None,
    ) -> list[RunResult]:
        """Store and analyse the submission's runs; answer with the earlier rows for a resubmission.

        Two phases keep the write transaction short: reads and the analysis (CPU) first, outside any
        lock; then the inserts and the commit, which on SQLite hold the process's writer lock.
        """
        prepared = await self.prepare(parsed)
        if idempotency_key:
            keyed = await self.runs.by_idempotency_keys(_keys(idempotency_key, len(prepared)))
            if keyed:
                if sorted(r.content_hash for r in keyed) != sorted(p.hash for p in prepared):
                    raise Conflict(
                        "this Idempotency-Key was used for a different submission",
                        field="header.idempotency-key",
                    )
                return [await self._result_for(row, created=False) for row in keyed]
        existing = await self.runs.by_hashes([p.hash for p in prepared])
        if all(p.hash in existing for p in prepared):
            if parsed.slo is not None:  # a resubmission may still carry a new SLO
                async with writer_lock(self.session):
                    for name in {p.resolved.run.deployment for p in prepared} - {None}:
                        await self.deployments.ensure(str(name), slo=parsed.slo)
                    await self.session.commit()
            return [await self._result_for(existing[p.hash], created=False) for p in prepared]

        now = datetime.now(UTC)
        known: dict[str, Deployment | None] = {}
        analyses: dict[int, Analysis] = {}
        for item in prepared:
            if item.hash in existing:
                continue
            run = item.resolved.run
            run.measured_at = run.measured_at or now
            name = run.deployment
            if name and name not in known:
                known[name] = await self.deployments.get_by_name(name)
            analyses[item.index] = await self._analyse(item, known.get(name) if name else None, parsed.slo)
        # Deployments that exist and that this submission does not change need no second look.
        known_ids = {name: d.id for name, d in known.items() if d is not None} if parsed.slo is None else {}
        # The reads above ran outside a transaction (SQLite's driver begins one at the first write);
        # end any that was opened so the write phase starts from a fresh snapshot.
        await self.session.rollback()

        async with writer_lock(self.session):
            try:
                results = await self._write(
                    parsed, prepared, existing, analyses, idempotency_key, submitted_by, known_ids
                )
            except Exception as exc:
                await self.session.rollback()
                if not is_integrity_error(exc):
                    raise
                # A concurrent identical submission won the race: answer with its rows.
                return await self._existing_results(prepared, idempotency_key)
            await self.session.commit()
        return results

    async def _existing_results(self, prepared: list[PreparedRun], idempotency_key: str | None) -> list[RunResult]:
        found = await self.runs.by_hashes([p.hash for p in prepared])
        if idempotency_key and len(found) < len(prepared):
            keyed = await self.runs.by_idempotency_keys(_keys(idempotency_key, len(prepared)))
            found.update({row.content_hash: row for row in keyed})
        return [await self._result_for(found[p.hash], created=False) for p in prepared if p.hash in found]

    async def _result_for(self, row: Run, *, created: bool) -> RunResult:
        recs = await self.runs.recommendations(row.id)
        analysis = row.analysis or {}
        return RunResult(
            run=run_to_out(row),
            verdict=row.verdict or analysis.get("verdict", "pass"),
            recommendations=[_rec_dict(r) for r in recs],
            expectations=analysis.get("expectations", {}),
            created=created,
        )

    async def _write(
        self,
        parsed: ParsedSubmission,
        prepared: list[PreparedRun],
        existing: dict[str, Run],
        analyses: dict[int, Analysis],
        idempotency_key: str | None,
        submitted_by: str | None,
        known_ids: dict[str, int],
    ) -> list[RunResult]:
        raw_id = await self.raws.store(
            parsed.raw,
            content_type=parsed.content_type,
            file_name=parsed.file_name,
            format_id=parsed.format_id,
        )
        deployments: dict[str, Deployment] = {}
        results: list[RunResult] = []
        for item in prepared:
            if item.hash in existing:
                results.append(await self._result_for(existing[item.hash], created=False))
                continue
            run = item.resolved.run
            analysis = analyses[item.index]
            deployment = None
            if run.deployment:
                deployment = deployments.get(run.deployment)
                if deployment is None:
                    if run.deployment in known_ids:
                        # A detached stand-in for the response: the row exists and stays as it is.
                        deployment = Deployment(id=known_ids[run.deployment], name=run.deployment)
                    else:
                        deployment = await self.deployments.ensure(
                            run.deployment, runtime=run.setup.runtime, slo=parsed.slo
                        )
                    deployments[run.deployment] = deployment
            values = run_columns(
                run,
                hardware_id=item.resolved.hardware_id,
                model_id=item.resolved.model_id,
                quantization_id=item.resolved.quantization_id,
            )
            values.update(
                deployment_id=deployment.id if deployment is not None else None,
                raw_payload_id=raw_id,
                content_hash=item.hash,
                idempotency_key=f"{idempotency_key}#{item.index}" if idempotency_key else None,
                context=_context_doc(parsed),
                measured_at=run.measured_at,
                submitted_by=submitted_by,
                source_index=item.index,
                verdict=analysis.verdict,
                decode_efficiency=analysis.efficiency.get("decode"),
                prefill_efficiency=analysis.efficiency.get("prefill"),
                analysis=analysis.stored(),
            )
            row = await self.runs.insert_run(values)
            row.deployment = deployment
            stored = await self.runs.add_recommendations(row.id, analysis.recommendations)
            results.append(
                RunResult(
                    run=run_to_out(row),
                    verdict=analysis.verdict,
                    recommendations=[_rec_dict(r) for r in stored],
                    expectations=analysis.expectations,
                    created=True,
                )
            )
        return results

    async def bulk(self, items: list[ParsedSubmission], *, raw: bytes, content_type: str | None) -> BulkResult:
        """Store many runs in one transaction, all or nothing, without per-run analysis: their
        recommendations are computed on the first read of ``/runs/{id}/recommendations``.

        The whole body is kept once as the raw payload; each run records its item index, so that
        ``/runs/{id}/raw`` can give back exactly the item it came from.
        """
        prepared: list[tuple[int, PreparedRun, ParsedSubmission]] = []
        for item_index, parsed in enumerate(items):
            try:
                prepared.extend((item_index, p, parsed) for p in await self.prepare(parsed))
            except InvalidInput as exc:
                exc.field = f"items[{item_index}]" + (f".{exc.field}" if exc.field else "")
                raise
        hashes = [p.hash for _, p, _ in prepared]
        existing = await self.runs.existing_hashes(hashes)
        async with writer_lock(self.session):
            return await self._bulk_insert(prepared, existing, raw, content_type)

    async def _bulk_insert(
        self,
        prepared: list[tuple[int, PreparedRun, ParsedSubmission]],
        existing: set[str],
        raw: bytes,
        content_type: str | None,
    ) -> BulkResult:
        now = datetime.now(UTC)
        rows: list[dict[str, Any]] = []
        seen: set[str] = set()
        deployments: dict[str, int] = {}
        raw_id: int | None = None
        try:
            for item_index, item, parsed in prepared:
                if item.hash in existing or item.hash in seen:
                    continue
                seen.add(item.hash)
                if raw_id is None:
                    raw_id = await self.raws.store(raw, content_type=content_type, file_name=None, format_id="bulk")
                run = item.resolved.run
                deployment_id = None
                if run.deployment:
                    if run.deployment not in deployments:
                        deployment = await self.deployments.ensure(run.deployment, runtime=run.setup.runtime)
                        await self.session.flush()
                        deployments[run.deployment] = deployment.id
                    deployment_id = deployments[run.deployment]
                values = run_columns(
                    run,
                    hardware_id=item.resolved.hardware_id,
                    model_id=item.resolved.model_id,
                    quantization_id=item.resolved.quantization_id,
                )
                values.update(
                    deployment_id=deployment_id,
                    raw_payload_id=raw_id,
                    content_hash=item.hash,
                    measured_at=run.measured_at or now,
                    source_index=item_index,
                    analysis={},
                    context=_context_doc(parsed),
                )
                rows.append(values)
            ids = await self.runs.insert_many(rows)
        except Exception:
            await self.session.rollback()
            raise
        await self.session.commit()
        return BulkResult(received=len(prepared), created=len(ids), existing=len(prepared) - len(ids), run_ids=ids)


def _context_doc(parsed: ParsedSubmission) -> dict[str, Any]:
    doc: dict[str, Any] = msgspec.to_builtins(parsed.context)
    doc["format"] = parsed.format_id
    return doc


def _keys(idempotency_key: str, n: int) -> list[str]:
    return [f"{idempotency_key}#{i}" for i in range(n)]


def _rec_dict(row: Any) -> dict[str, Any]:
    # The rule's own extra fields first, so that the stored columns (status!) always win.
    out = {f"rule_{k}" if k == "status" else k: v for k, v in (row.body or {}).items()}
    out.update(
        id=row.id,
        rank=row.rank,
        rule_id=row.rule_id,
        name=row.name,
        action=row.action,
        phase=row.phase,
        severity=row.severity,
        score=row.score,
        title=row.title,
        evidence=row.evidence,
        fix=row.fix,
        expected_gain=row.expected_gain,
        confidence=row.confidence,
        status=row.status,
        status_note=row.status_note,
    )
    return out
