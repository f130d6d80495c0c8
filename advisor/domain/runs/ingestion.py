"""Ingestion: parsed submission → resolved runs → analysis → one transaction.

Idempotent: a run's content hash (and an optional Idempotency-Key) finds an earlier submission, which
is returned with 200 instead of a second row. Transactional: the raw payload, the deployment, every
run and every recommendation of a submission are committed together or not at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from typing import Any, TypeVar

import msgspec
from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from advisor.canonical import RUNTIMES, SLO, CanonicalRun, validate_slo
from advisor.db.config import database_key, sqlite_writer
from advisor.db.models import Deployment, Recommendation, Run
from advisor.domain.catalog.services import CatalogService
from advisor.domain.deployments.services import DeploymentService, slo_dict, validate_deployment_name
from advisor.domain.models.provider import expectations_fn_for
from advisor.domain.runs.analysis import Analysis, analyse
from advisor.domain.runs.baselines import CELL_ROWS, BaselineCache, cell_key
from advisor.domain.runs.baselines import invalidate as invalidate_baselines
from advisor.domain.runs.committer import GroupCommitter
from advisor.domain.runs.schemas import BulkResult, RunResult
from advisor.domain.runs.services import (
    RawPayloadService,
    RunService,
    is_integrity_error,
    recommendation_values,
    run_columns,
    run_out,
    run_to_canonical,
    run_to_out,
)
from advisor.domain.runs.submission import (
    ParsedSubmission,
    ResolvedRun,
    content_hash,
    normalise_run,
)
from advisor.domain.runs.writes import NewDeployment, WritePlan, Written, read_batch, write_plan
from advisor.errors import AdvisorError, Conflict, InvalidInput
from advisor.rules.context import BaselinePoint, ExpectationsFn

T = TypeVar("T")

__all__ = ["IngestionService", "PreparedRun", "Submission", "submit", "writer_lock"]

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


@dataclass
class Submission:
    """One request's parsed file, waiting for the group committer."""

    parsed: ParsedSubmission
    idempotency_key: str | None
    submitted_by: str | None
    prepared: list[PreparedRun] = field(default_factory=list)  # filled in by the batch


async def submit(
    engine: AsyncEngine,
    parsed: ParsedSubmission,
    *,
    idempotency_key: str | None = None,
    submitted_by: str | None = None,
) -> list[RunResult]:
    """Store and analyse a submission's runs; answer with the earlier rows for a resubmission.

    The request only parses the file; resolving, analysing and storing happen in the process's
    group committer, which handles the submissions that arrive together in one batch
    (:meth:`IngestionService.write_batch`) and one commit, and needs no session of the request.
    """
    return await _committer(engine).submit(Submission(parsed, idempotency_key, submitted_by))


def _committer(engine: AsyncEngine) -> GroupCommitter[Submission, list[RunResult]]:
    def make() -> GroupCommitter[Submission, list[RunResult]]:
        sessions = async_sessionmaker(engine, expire_on_commit=False)

        async def write(jobs: list[Submission]) -> list[list[RunResult] | Exception]:
            async with sessions() as session:
                try:
                    return await IngestionService(session).write_batch(jobs)
                except Exception as exc:
                    if len(jobs) > 1 or not is_integrity_error(exc):
                        raise
            # A concurrent identical submission (another process) won the race: answer with its rows.
            async with sessions() as session:
                return [await IngestionService(session).existing_results(jobs[0])]

        return GroupCommitter(write)

    return GroupCommitter.shared(engine.sync_engine, make)


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
        self._expectations_fn: ExpectationsFn | None = None  # the fitted model in force, or the prior

    # Built on first use: a submission's request needs only the catalog (its writes run in the
    # group committer's own session), and each advanced-alchemy service costs a repository.
    @cached_property
    def runs(self) -> RunService:
        return RunService(session=self.session)

    @cached_property
    def raws(self) -> RawPayloadService:
        return RawPayloadService(session=self.session)

    @cached_property
    def deployments(self) -> DeploymentService:
        return DeploymentService(session=self.session)

    @cached_property
    def _database(self) -> str:
        return database_key(self.session)

    @cached_property
    def catalogs(self) -> CatalogService:
        return CatalogService(session=self.session)

    def _engine(self) -> AsyncEngine:
        bind = self.session.bind
        if not isinstance(bind, AsyncEngine):  # a session bound to a connection: no batching across requests
            raise TypeError("IngestionService.submit needs a session bound to an AsyncEngine")
        return bind

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
        values = _cell_values(item)
        baseline = await self._baseline(deployment.id if deployment is not None else None, values, exclude)
        if self._expectations_fn is None:
            self._expectations_fn = await expectations_fn_for(self.session)
        return analyse(
            run,
            slo=_slo_of(deployment, slo),
            baseline=baseline,
            catalog=await self.catalogs.current(),
            expectations_fn=self._expectations_fn,
        )

    async def _baseline(
        self, deployment_id: int | None, values: dict[str, Any], exclude: Run | None
    ) -> Sequence[CanonicalRun | BaselinePoint]:
        """The deployment's recent comparable runs: from this process's cache when it can tell."""
        if deployment_id is None or exclude is not None:
            return await self.runs.baseline(exclude, deployment_id=deployment_id, values=values)
        key = cell_key(self._database, deployment_id, values)
        measured_at = values["measured_at"]
        if not BaselineCache.holds(key):
            newest = await self.runs.baseline(
                None, deployment_id=deployment_id, values={**values, "measured_at": None}, limit=CELL_ROWS
            )
            BaselineCache.store(key, newest, complete=len(newest) < CELL_ROWS)
        found = BaselineCache.lookup(key, measured_at, RunService.BASELINE_RUNS)
        if found is not None:
            return found
        # Older than every run the cell keeps: ask the database.
        return await self.runs.baseline(None, deployment_id=deployment_id, values=values)

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
        """:func:`submit` to this session's database."""
        return await submit(self._engine(), parsed, idempotency_key=idempotency_key, submitted_by=submitted_by)

    async def _prepare_submission(self, job: Submission) -> None:
        job.prepared = await self.prepare(job.parsed)
        for name in {p.resolved.run.deployment for p in job.prepared} - {None}:
            validate_deployment_name(str(name))
        if job.parsed.slo is not None:
            validate_slo(job.parsed.slo)

    async def write_batch(self, jobs: list[Submission]) -> list[list[RunResult] | Exception]:
        """Store and analyse several submissions in one transaction: one probe for known runs, one
        read of the deployments, and one multi-row insert each for raw payloads, runs and
        recommendations, whatever the number of submissions. Answers per submission, in order: its
        results, or the error that concerns it alone (a reused Idempotency-Key). Raises for an
        error of the batch as a whole (e.g. a concurrent writer won a race), which the committer
        answers by retrying the submissions one by one.
        """
        outcomes: list[list[RunResult] | Exception | None] = [None] * len(jobs)
        for j, job in enumerate(jobs):
            try:
                await self._prepare_submission(job)
            except AdvisorError as exc:  # a bad name or value: that submission's 4xx
                outcomes[j] = exc
        hashes = [p.hash for job in jobs for p in job.prepared]
        named = {p.resolved.run.deployment for job in jobs for p in job.prepared} - {None}
        reads = await self._on_connection(
            functools.partial(read_batch, hashes=hashes, names=sorted(str(n) for n in named))
        )
        # Stored runs are rare (resubmissions): only then are their rows loaded.
        existing = await self.runs.by_hashes(sorted(reads.known_hashes)) if reads.known_hashes else {}
        keys = [k for job in jobs if job.idempotency_key for k in _keys(job.idempotency_key, len(job.prepared))]
        keyed_rows = await self.runs.by_idempotency_keys(keys) if keys else []
        slo_updates: dict[str, SLO] = {}
        fresh: list[tuple[int, PreparedRun]] = []  # (job index, run) of runs to insert
        claimed: set[str] = set()
        for j, job in enumerate(jobs):
            if outcomes[j] is not None:
                continue
            if job.idempotency_key:
                prefix = f"{job.idempotency_key}#"
                keyed = [r for r in keyed_rows if (r.idempotency_key or "").startswith(prefix)]
                if keyed:
                    if sorted(r.content_hash for r in keyed) != sorted(p.hash for p in job.prepared):
                        outcomes[j] = Conflict(
                            "this Idempotency-Key was used for a different submission",
                            field="header.idempotency-key",
                        )
                    else:
                        outcomes[j] = [await self._result_for(row, created=False) for row in keyed]
                    continue
            if job.parsed.slo is not None:  # a resubmission may still carry a new SLO
                for p in job.prepared:
                    if p.resolved.run.deployment:
                        slo_updates[p.resolved.run.deployment] = job.parsed.slo
            for p in job.prepared:
                if p.hash not in existing and p.hash not in claimed:
                    claimed.add(p.hash)
                    fresh.append((j, p))

        # Answers for runs stored earlier, built while their rows are loaded (a failed write's
        # rollback would expire them).
        earlier = {
            p.hash: await self._result_for(existing[p.hash], created=False)
            for j, job in enumerate(jobs)
            if outcomes[j] is None
            for p in job.prepared
            if p.hash in existing
        }
        # Detached stand-ins: the analysis reads their id and SLO, the write phase their id.
        known = {name: Deployment(id=ident, name=name, slo=slo) for name, (ident, slo) in reads.deployments.items()}
        now = datetime.now(UTC)
        analyses: dict[str, Analysis] = {}
        for j, item in fresh:
            run = item.resolved.run
            run.measured_at = run.measured_at or now
            deployment = known.get(run.deployment) if run.deployment else None
            analyses[item.hash] = await self._analyse(item, deployment, jobs[j].parsed.slo)
        # The reads above ran outside a write transaction: SQLite's driver begins one at the first
        # write, Postgres reads committed data statement by statement, so the writes see fresh data.
        async with writer_lock(self.session):
            try:
                written = await self._insert(jobs, fresh, analyses, known, slo_updates)
            except Exception:
                await self.session.rollback()
                raise
            await self.session.commit()
        for _, item in fresh:
            deployment_id = written[item.hash][2]
            if deployment_id is not None:
                BaselineCache.written(cell_key(self._database, deployment_id, _cell_values(item)), item.resolved.run)

        for j, job in enumerate(jobs):
            if outcomes[j] is None:
                results: list[RunResult] = []
                for p in job.prepared:
                    if p.hash in written and written[p.hash][0] == j:
                        results.append(written[p.hash][1])
                    elif p.hash in written:  # the same run twice in one batch: the other one stored it
                        results.append(msgspec.structs.replace(written[p.hash][1], created=False))
                    else:
                        results.append(earlier[p.hash])
                outcomes[j] = results
        return [o if o is not None else [] for o in outcomes]

    async def existing_results(self, job: Submission) -> list[RunResult]:
        """The stored runs of a submission that a concurrent identical one has just written."""
        prepared = job.prepared
        found = await self.runs.by_hashes([p.hash for p in prepared])
        if job.idempotency_key and len(found) < len(prepared):
            keyed = await self.runs.by_idempotency_keys(_keys(job.idempotency_key, len(prepared)))
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

    async def _insert(
        self,
        jobs: list[Submission],
        fresh: list[tuple[int, PreparedRun]],
        analyses: dict[str, Analysis],
        known: dict[str, Deployment],
        slo_updates: dict[str, SLO],
    ) -> dict[str, tuple[int, RunResult, int | None]]:
        """The write phase of :meth:`write_batch`: ``{content hash: (job index, result, deployment id)}``."""
        plan = WritePlan(deployment_ids={name: d.id for name, d in known.items()})
        runtimes = {p.resolved.run.deployment: p.resolved.run.setup.runtime for _, p in reversed(fresh)}
        for name in sorted({n for n in runtimes if n} | set(slo_updates)):
            slo = slo_dict(slo_updates.get(name))
            if name in known:
                if name in slo_updates:  # a given SLO replaces the stored values it names
                    plan.slo_updates[known[name].id] = {**(known[name].slo or {}), **slo}
            else:
                runtime = runtimes.get(name)
                plan.new_deployments.append(NewDeployment(name, runtime if runtime in RUNTIMES else None, slo))
        raw_index: dict[int, int] = {}
        contexts: dict[int, dict[str, Any]] = {}
        for j, item in fresh:
            job = jobs[j]
            if j not in raw_index:
                raw_index[j] = len(plan.raws)
                parsed = job.parsed
                plan.raws.append((parsed.raw, parsed.content_type, parsed.file_name, parsed.format_id))
                contexts[j] = _context_doc(parsed)
            run = item.resolved.run
            analysis = analyses[item.hash]
            values = run_columns(
                run,
                hardware_id=item.resolved.hardware_id,
                model_id=item.resolved.model_id,
                quantization_id=item.resolved.quantization_id,
            )
            values.update(
                content_hash=item.hash,
                idempotency_key=f"{job.idempotency_key}#{item.index}" if job.idempotency_key else None,
                context=contexts[j],
                measured_at=run.measured_at,
                submitted_by=job.submitted_by,
                source_index=item.index,
                verdict=analysis.verdict,
                decode_efficiency=analysis.efficiency.get("decode"),
                prefill_efficiency=analysis.efficiency.get("prefill"),
                analysis=analysis.stored(),
            )
            plan.runs.append(values)
            plan.run_deployments.append(run.deployment)
            plan.run_raws.append(raw_index[j])
            plan.recommendations.append(
                [recommendation_values(rank, rec) for rank, rec in enumerate(analysis.recommendations, start=1)]
            )
        if plan.is_empty():
            return {}
        written = await self._execute(plan)
        out: dict[str, tuple[int, RunResult, int | None]] = {}
        for (j, item), run_id, values, recs, rec_ids in zip(
            fresh, written.run_ids, plan.runs, plan.recommendations, written.recommendation_ids, strict=True
        ):
            analysis = analyses[item.hash]
            out[item.hash] = (
                j,
                RunResult(
                    run=run_out(run_id, item.resolved.run.deployment, values),
                    verdict=analysis.verdict,
                    recommendations=[_rec_out(rec_id, rec) for rec_id, rec in zip(rec_ids, recs, strict=True)],
                    expectations=analysis.expectations,
                    created=True,
                ),
                values["deployment_id"],
            )
        return out

    async def _execute(self, plan: WritePlan) -> Written:
        return await self._on_connection(functools.partial(write_plan, plan=plan))

    async def _on_connection(self, fn: Callable[[Connection], T]) -> T:
        """``fn(connection)``: on SQLite in one hand-off to the writer thread (its own transaction,
        committed), on Postgres in this session's transaction (the caller commits)."""
        engine = self.session.bind
        if (
            isinstance(engine, AsyncEngine)
            and engine.dialect.name == "sqlite"
            and engine.url.database not in (None, "", ":memory:")  # another connection would not see it
        ):
            return await sqlite_writer(engine).run(fn)
        connection = await self.session.connection()
        return await connection.run_sync(fn)

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
        invalidate_baselines()  # the new runs bypassed the baseline cache
        return BulkResult(received=len(prepared), created=len(ids), existing=len(prepared) - len(ids), run_ids=ids)


def _cell_values(item: PreparedRun) -> dict[str, Any]:
    """What makes runs of one deployment comparable, as the baseline query filters them."""
    run = item.resolved.run
    return {
        "deployment": run.deployment,
        "runtime": run.setup.runtime,
        "hardware_id": item.resolved.hardware_id,
        "model_id": item.resolved.model_id,
        "quantization_id": item.resolved.quantization_id,
        "concurrency": run.workload.concurrency,
        "measured_at": run.measured_at,
    }


def _context_doc(parsed: ParsedSubmission) -> dict[str, Any]:
    doc: dict[str, Any] = msgspec.to_builtins(parsed.context)
    doc["format"] = parsed.format_id
    return doc


def _keys(idempotency_key: str, n: int) -> list[str]:
    return [f"{idempotency_key}#{i}" for i in range(n)]


def _rec_dict(row: Recommendation) -> dict[str, Any]:
    return _rec_out(row.id, {c: getattr(row, c) for c in _REC_FIELDS})


_REC_FIELDS = (
    "rank", "rule_id", "name", "action", "phase", "severity", "score", "title", "evidence", "fix",
    "expected_gain", "confidence", "status", "status_note", "body",
)  # fmt: skip


def _rec_out(rec_id: int, values: dict[str, Any]) -> dict[str, Any]:
    """A stored recommendation as the API shows it (DESIGN §4)."""
    # The rule's own extra fields first, so that the stored columns (status!) always win.
    out = {f"rule_{k}" if k == "status" else k: v for k, v in (values.get("body") or {}).items()}
    out["id"] = rec_id
    out.update({k: values.get(k) for k in _REC_FIELDS if k != "body"})
    return out
