"""The runs pipeline: one submission from the HTTP edge to the stored, analysed run.

    SubmissionRequest (submission.py: the request's body, context layers, Idempotency-Key)
      → ParsedSubmission   advisor.ingest.submission: wrapper, format, merged context
      → ResolvedRun        resolution.py: names → catalog specs, content hash
      → RunAnalysis        analysis.py: physics, expectations, ranked findings (pure)
      → WritePlan          store.py: the one writer (runs, raw payload, deployments, recommendations)

Submissions go through the process's group committer (:class:`advisor.db.batching.GroupCommitter`):
the submissions that arrive together are resolved, analysed and written in one batch and one
commit. Idempotent: a run's content hash (and an optional Idempotency-Key) finds an earlier
submission, which is answered with 200 and its stored analysis instead of a second row.
Transactional: a batch's raw payloads, deployments, runs and recommendations are committed together
or not at all. Bulk loads store their runs unanalysed and analyse them in the background; a read of
a run that is still unanalysed analyses it first, so every stored run has its recommendations.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import itertools
import logging
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from typing import Any, NamedTuple, Protocol

import msgspec
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession, async_sessionmaker

from advisor.canonical import RUNTIMES, SLO, CanonicalRun, Metrics, Setup, Workload, validate_run, validate_slo
from advisor.catalog import Catalog
from advisor.db.batching import GroupCommitter, on_connection, writer_lock
from advisor.db.config import database_key
from advisor.db.models import Run
from advisor.domain.catalog.services import CatalogService
from advisor.domain.deployments.services import DeploymentService, slo_dict, validate_deployment_name
from advisor.domain.models.provider import expectations_fn_for
from advisor.domain.recommendations import RecommendationOut, RecommendationService, recommendation_out
from advisor.domain.runs.analysis import RunAnalysis, analyse_run, answer_fields
from advisor.domain.runs.baselines import CELL_ROWS, BaselineCache, cell_key
from advisor.domain.runs.baselines import invalidate as invalidate_baselines
from advisor.domain.runs.resolution import ResolvedRun, resolve_run, resolve_submission
from advisor.domain.runs.schemas import BulkResult, RunOut, RunPage, RunResult
from advisor.domain.runs.services import (
    RawPayloadService,
    RunFilters,
    RunService,
    is_integrity_error,
    run_out,
    run_to_canonical,
    run_to_out,
)
from advisor.domain.runs.store import (
    COPY_MIN_ROWS,
    NewDeployment,
    RunUpdate,
    WritePlan,
    analysis_values,
    bulk_chunk_prepare,
    copy_run_rows,
    read_batch,
    recommendation_rows,
    run_ids_by_hash,
    run_values,
    write_plan,
)
from advisor.domain.runs.submission import SubmissionRequest, split_bulk
from advisor.errors import AdvisorError, Conflict, InvalidInput, MalformedInput, NotFound
from advisor.ingest.submission import ParsedSubmission, SubmissionContext, merge_contexts
from advisor.rules.context import BaselinePoint, ExpectationsFn, baseline_point
from advisor.server import metrics

__all__ = ["Outcome", "RunPipeline", "drain_background", "submit"]

logger = logging.getLogger(__name__)


class Outcome(NamedTuple):
    """One run's answer, and whether this submission stored it (201) or found it stored (200)."""

    result: RunResult
    created: bool


@dataclass
class Submission:
    """One request's parsed file, waiting for the group committer."""

    parsed: ParsedSubmission
    idempotency_key: str | None
    submitted_by: str | None
    resolved: list[ResolvedRun] = field(default_factory=list)  # filled in by the batch


async def submit(engine: AsyncEngine, submission: Submission) -> list[Outcome]:
    """Store and analyse a submission's runs through the process's group committer (which needs
    no session of the request); a resubmission is answered with the earlier rows."""
    return await _committer(engine).submit(submission)


def _committer(engine: AsyncEngine) -> GroupCommitter[Submission, list[Outcome]]:
    def make() -> GroupCommitter[Submission, list[Outcome]]:
        if engine.dialect.name != "sqlite":
            return _HeldConnection(engine).committer()
        sessions = async_sessionmaker(engine, expire_on_commit=False)

        async def write(jobs: list[Submission]) -> list[list[Outcome] | Exception]:
            async with sessions() as session:
                return await _write_or_answer_race(session, jobs, sessions)

        return GroupCommitter(write)

    return GroupCommitter.shared(engine.sync_engine, make)


async def _write_or_answer_race(
    session: AsyncSession, jobs: list[Submission], sessions: Callable[[], AsyncSession]
) -> list[list[Outcome] | Exception]:
    try:
        return await RunPipeline(session).write_batch(jobs)
    except Exception as exc:
        if len(jobs) > 1 or not is_integrity_error(exc):
            raise
        await session.rollback()
    # A concurrent identical submission (another process) won the race: answer with its rows.
    async with sessions() as again:
        return [await RunPipeline(again).existing_outcomes(jobs[0])]


class _HeldConnection:
    """Postgres: the group committer's batches share one pooled connection for as long as
    submissions keep coming (it goes back to the pool when the queue runs empty), each batch in a
    transaction of its own on it.

    Why: a batch checked a connection out of the pool and returned it, and the pool's pre-ping
    sent a ``SELECT 1`` round trip at every checkout, one statement in seven of a batch
    (docs/benchmarks.md, "Request path, session 7"). A connection that fails a batch is dropped,
    so the batch's retries, one submission at a time, check out a fresh (pinged) one."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.connection: AsyncConnection | None = None

    def committer(self) -> GroupCommitter[Submission, list[Outcome]]:
        return GroupCommitter(self.write, on_idle=self.release)

    def _session(self) -> AsyncSession:
        return AsyncSession(bind=self.connection, expire_on_commit=False)

    async def write(self, jobs: list[Submission]) -> list[list[Outcome] | Exception]:
        if self.connection is None:
            self.connection = await self.engine.connect()
        try:
            async with self._session() as session:
                return await _write_or_answer_race(session, jobs, self._session)
        except Exception:
            await self.release(invalidate=True)
            raise

    async def release(self, *, invalidate: bool = False) -> None:
        connection, self.connection = self.connection, None
        if connection is None:
            return
        if invalidate:
            with contextlib.suppress(Exception):
                await connection.invalidate()
        await connection.close()


# Background work of this process (bulk analysis, model refits): referenced until done, because
# asyncio holds tasks weakly; cancelled and awaited at shutdown.
_BACKGROUND: set[asyncio.Task[Any]] = set()
_PENDING_ANALYSIS: dict[object, asyncio.Task[Any]] = {}


@dataclass
class _Foreground:
    """The bulk requests this event loop is serving. The background analysis of earlier bulk loads
    waits between its batches while there are any: a client's load is answered first, and the
    analysis (which reads catch up on anyway) follows when the worker is free."""

    bulks: int = 0
    idle: asyncio.Event = field(default_factory=asyncio.Event)

    @classmethod
    def here(cls) -> _Foreground:
        loop = asyncio.get_running_loop()
        state = _FOREGROUND.get(loop)
        if state is None:
            state = _FOREGROUND[loop] = cls()
            state.idle.set()
        return state

    def enter(self) -> None:
        self.bulks += 1
        self.idle.clear()

    def leave(self) -> None:
        self.bulks -= 1
        if self.bulks == 0:
            self.idle.set()


_FOREGROUND: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Foreground] = weakref.WeakKeyDictionary()

#: Bulk loads in this process holding the cyclic garbage collector off, and whether they turned it off.
_GC_PAUSE = {"holders": 0, "disabled": False}


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off while bulk loads run (process-wide: the last one out turns
    it back on, unless it was off before).

    A bulk load builds about a million objects that live until it ends (decoded runs, their
    column values and JSON documents) and makes no cycles of its own, yet they trigger dozens of
    collections, each walking all of them: about 14 % of the CPU of resolving and writing a
    5,000-run array, with the server's thresholds (``advisor.server.asgi``; docs/benchmarks.md,
    session 5). Reference counting frees everything as before; what other requests leave in
    cycles meanwhile waits for the next collection, seconds later.
    """
    if _GC_PAUSE["holders"] == 0 and gc.isenabled():
        gc.disable()
        _GC_PAUSE["disabled"] = True
    _GC_PAUSE["holders"] += 1
    try:
        yield
    finally:
        _GC_PAUSE["holders"] -= 1
        if _GC_PAUSE["holders"] == 0 and _GC_PAUSE["disabled"]:
            _GC_PAUSE["disabled"] = False
            gc.enable()


def _keep(task: asyncio.Task[Any]) -> None:
    _BACKGROUND.add(task)
    task.add_done_callback(_BACKGROUND.discard)


async def drain_background() -> None:
    """Cancel this process's background work and wait for it (the app's shutdown hook)."""
    tasks = list(_BACKGROUND)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


class DeploymentRef(Protocol):
    """What the analysis reads of a deployment: its id (the baseline's cell) and stored SLO. A
    stored row (:class:`Deployment`) is one; so is a batch's :class:`_Known` stand-in."""

    @property
    def id(self) -> int: ...

    @property
    def slo(self) -> dict[str, Any]: ...


class _Known(NamedTuple):
    """A deployment a batch read (id and stored SLO): cheaper than a detached ORM object, which
    cost about 1 % of ``POST /runs``'s CPU to build per batch (session 5)."""

    id: int
    name: str
    slo: dict[str, Any]


def _slo_of(deployment: DeploymentRef | None, override: SLO | None) -> SLO | None:
    if override is not None:
        return override
    if deployment is None or not deployment.slo:
        return None
    return msgspec.convert(deployment.slo, SLO, strict=False)


def _cell_values(resolved: ResolvedRun) -> dict[str, Any]:
    """What makes runs of one deployment comparable, as the baseline query filters them."""
    run = resolved.run
    return {
        "deployment": run.deployment,
        "runtime": run.setup.runtime,
        "hardware_id": resolved.hardware_id,
        "model_id": resolved.model_id,
        "quantization_id": resolved.quantization_id,
        "concurrency": run.workload.concurrency,
        "measured_at": run.measured_at,
    }


def _context_doc(parsed: ParsedSubmission) -> dict[str, Any]:
    doc: dict[str, Any] = msgspec.to_builtins(parsed.context)
    doc["format"] = parsed.format_id
    return doc


#: The most runs of one cell a batch's baselines read at once (else that cell is read per run).
_WINDOW_ROWS = 2_000
_NO_SETUP, _NO_WORKLOAD, _NO_METRICS = Setup(), Workload(), Metrics()
_BULK_ARRAY = msgspec.json.Decoder(list[CanonicalRun], strict=False)
_BULK_LINE = msgspec.json.Decoder(CanonicalRun, strict=False)
#: A streamed bulk load (Postgres) resolves and sends its runs in chunks of this many; it yields
#: to the event loop every :data:`_YIELD_EVERY` runs, so that the COPY in flight keeps Postgres fed.
BULK_CHUNK_RUNS = 1_000
_FIRST_CHUNK_RUNS = 250
_YIELD_EVERY = 10


def _canonical_bulk(body: bytes, max_runs: int, *, validate: bool = True) -> list[CanonicalRun] | None:
    """A bulk body of canonical runs, decoded in one pass into typed runs (and validated); None
    when any item is something else (a native file, a wrapper) or is refused, which the
    item-by-item path then parses, sniffs and names (``items[i].field``) exactly as before.
    ``validate=False``: the caller checks each run with :func:`_checked` before it uses it (a
    streamed bulk load, which validates chunk by chunk).

    What it spares is per item: a stdlib JSON decode of the whole array, a re-encode per item,
    format sniffing (another decode), and the context merge of every item.
    """
    stripped = body.strip()
    try:
        if stripped[:1] == b"[":
            runs = _BULK_ARRAY.decode(stripped)
        else:
            runs = [_BULK_LINE.decode(line) for line in stripped.splitlines() if line.strip()]
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, ValueError):
        return None
    if not runs or len(runs) > max_runs:
        return None
    for run in runs:
        # The careful path sniffs a canonical run by its sections; an item with none of them is
        # not one (or not only one), so it decides.
        if run.setup == _NO_SETUP and run.workload == _NO_WORKLOAD and run.metrics == _NO_METRICS:
            return None
        if validate and not _checked(run):
            return None
    return runs


def _checked(run: CanonicalRun) -> bool:
    """A decoded canonical run validated (and its source format set); False when it is refused."""
    try:
        validate_run(run)
    except InvalidInput:
        return False
    run.source.format = run.source.format or "canonical"
    return True


def _keys(idempotency_key: str, n: int) -> list[str]:
    return [f"{idempotency_key}#{i}" for i in range(n)]


class RunPipeline:
    """The runs domain's operations on one session: submit, advise, bulk, (re-)analysis, reads."""

    def __init__(
        self, session: AsyncSession | None = None, *, engine: AsyncEngine | None = None, refit_after_runs: int = 0
    ) -> None:
        """``session`` for everything but :meth:`submit`, which needs only the ``engine`` (its writes
        run in the group committer's sessions; a request session would be pure overhead)."""
        self._session = session
        self._engine = engine
        self.refit_after_runs = refit_after_runs  # ADVISOR_MODEL_REFIT_AFTER_RUNS; 0: never
        self._expectations_fn: ExpectationsFn | None = None  # the fitted model in force, or the prior
        self._batch_catalog: Catalog | None = None  # the catalog of the batch being written

    @property
    def session(self) -> AsyncSession:
        if self._session is None:
            raise TypeError("this RunPipeline was built without a session (submit only)")
        return self._session

    @property
    def engine(self) -> AsyncEngine:
        engine = self._engine if self._engine is not None else self.session.bind
        if not isinstance(engine, AsyncEngine):  # a session bound to a connection: no batching across requests
            raise TypeError("RunPipeline.submit needs an AsyncEngine")
        return engine

    # Built on first use: a submission's request needs none of them (its writes run in the group
    # committer's own session), and each advanced-alchemy service costs a repository.
    @cached_property
    def runs(self) -> RunService:
        return RunService(session=self.session)

    @cached_property
    def deployments(self) -> DeploymentService:
        return DeploymentService(session=self.session)

    @cached_property
    def _database(self) -> str:
        return database_key(self.session)

    async def catalog(self) -> Catalog:
        if self._batch_catalog is not None:
            return self._batch_catalog
        return await CatalogService(session=self.session).current()

    # ------------------------------------------------------------------ stages

    async def resolve(self, parsed: ParsedSubmission) -> list[ResolvedRun]:
        return resolve_submission(parsed, await self.catalog())

    async def analyse(
        self,
        resolved: ResolvedRun,
        deployment: DeploymentRef | None,
        slo: SLO | None,
        *,
        exclude: int | None = None,
        baseline: Sequence[CanonicalRun | BaselinePoint] | None = None,
    ) -> RunAnalysis:
        """``baseline``: the comparable earlier runs when the caller has them (a batch read them
        together); else they are read here."""
        if baseline is None:
            baseline = await self._baseline(deployment.id if deployment is not None else None, resolved, exclude)
        if self._expectations_fn is None:
            self._expectations_fn = await expectations_fn_for(self.session)
        return analyse_run(
            resolved,
            slo=_slo_of(deployment, slo),
            baseline=baseline,
            catalog=await self.catalog(),
            expectations_fn=self._expectations_fn,
        )

    async def _baseline(
        self, deployment_id: int | None, resolved: ResolvedRun, exclude: int | None
    ) -> Sequence[CanonicalRun | BaselinePoint]:
        """The deployment's recent comparable runs: from this process's cache when it can tell."""
        values = _cell_values(resolved)
        if deployment_id is None or exclude is not None:
            return await self.runs.baseline(exclude, deployment_id=deployment_id, values=values)
        key = cell_key(self._database, deployment_id, values)
        if not BaselineCache.holds(key):
            newest = await self.runs.baseline(
                None, deployment_id=deployment_id, values={**values, "measured_at": None}, limit=CELL_ROWS
            )
            BaselineCache.store(key, newest, complete=len(newest) < CELL_ROWS)
        found = BaselineCache.lookup(key, values["measured_at"], RunService.BASELINE_RUNS)
        if found is not None:
            return found
        # Older than every run the cell keeps: ask the database.
        return await self.runs.baseline(None, deployment_id=deployment_id, values=values)

    # ------------------------------------------------------------------ submit

    async def submit(self, request: SubmissionRequest) -> list[Outcome]:
        """Parse the request here, then store and analyse through the group committer."""
        parsed = request.parse()
        engine = self.engine
        submitted_by = parsed.context.submitted_by or request.token_name
        outcomes = await submit(engine, Submission(parsed, request.idempotency_key, submitted_by))
        if self.refit_after_runs > 0 and any(o.created for o in outcomes):
            await self._maybe_refit(engine)
        return outcomes

    async def _maybe_refit(self, engine: AsyncEngine) -> None:
        """Start a background refit after enough new runs. Never blocks or fails the submission."""
        from advisor.domain.models.services import schedule_refit_if_due

        task = await schedule_refit_if_due(async_sessionmaker(engine, expire_on_commit=False), self.refit_after_runs)
        if task is not None:
            _keep(task)

    async def _prepare(self, job: Submission) -> None:
        job.resolved = await self.resolve(job.parsed)
        for name in {r.run.deployment for r in job.resolved} - {None}:
            validate_deployment_name(str(name))
        if job.parsed.slo is not None:
            validate_slo(job.parsed.slo)

    async def write_batch(self, jobs: list[Submission]) -> list[list[Outcome] | Exception]:
        """Store and analyse several submissions in one transaction: one read of known hashes and
        deployments, and one multi-row insert each for raw payloads, runs and recommendations,
        whatever the number of submissions. Answers per submission, in order: its outcomes, or the
        error that concerns it alone (a bad name, a reused Idempotency-Key). Raises for an error of
        the batch as a whole (e.g. a concurrent writer won a race), which the committer answers by
        retrying the submissions one by one.
        """
        # One catalog for the whole batch (resolution and every analysis): asking the catalog
        # service per run cost a service object and its cache lookup each time.
        self._batch_catalog = await self.catalog()
        try:
            return await self._write_batch(jobs)
        finally:
            self._batch_catalog = None

    async def _write_batch(self, jobs: list[Submission]) -> list[list[Outcome] | Exception]:
        outcomes: list[list[Outcome] | Exception | None] = [None] * len(jobs)
        for j, job in enumerate(jobs):
            try:
                await self._prepare(job)
            except AdvisorError as exc:
                outcomes[j] = exc
        hashes = [r.hash for job in jobs for r in job.resolved]
        named = sorted({str(r.run.deployment) for job in jobs for r in job.resolved if r.run.deployment})
        reads = await on_connection(self.session, functools.partial(read_batch, hashes=hashes, names=named))
        # Stored runs are rare (resubmissions): only then are their rows loaded.
        existing = await self.runs.by_hashes(sorted(reads.known_hashes)) if reads.known_hashes else {}
        keys = [k for job in jobs if job.idempotency_key for k in _keys(job.idempotency_key, len(job.resolved))]
        keyed_rows = await self.runs.by_idempotency_keys(keys) if keys else []
        if any(row.verdict is None for row in [*existing.values(), *keyed_rows]):
            # Bulk-loaded runs not analysed yet: analyse them now, so they answer their analysis.
            await self.analyse_rows([row for row in {*existing.values(), *keyed_rows} if row.verdict is None])
            existing = await self.runs.by_hashes(sorted(existing))
            keyed_rows = await self.runs.by_idempotency_keys(keys) if keys else []

        slo_updates: dict[str, SLO] = {}
        fresh: list[tuple[int, ResolvedRun]] = []  # (job index, run) of runs to insert
        claimed: set[str] = set()
        for j, job in enumerate(jobs):
            if outcomes[j] is not None:
                continue
            if job.idempotency_key:
                prefix = f"{job.idempotency_key}#"
                keyed = [r for r in keyed_rows if (r.idempotency_key or "").startswith(prefix)]
                if keyed:
                    if sorted(r.content_hash for r in keyed) != sorted(r.hash for r in job.resolved):
                        outcomes[j] = Conflict(
                            "this Idempotency-Key was used for a different submission",
                            field="header.idempotency-key",
                        )
                    else:
                        outcomes[j] = [await self._outcome_of(row) for row in keyed]
                    continue
            if job.parsed.slo is not None:  # a resubmission may still carry a new SLO
                for r in job.resolved:
                    if r.run.deployment:
                        slo_updates[r.run.deployment] = job.parsed.slo
            for r in job.resolved:
                if r.hash not in existing and r.hash not in claimed:
                    claimed.add(r.hash)
                    fresh.append((j, r))

        # Answers for runs stored earlier, built while their rows are loaded (a failed write's
        # rollback would expire them).
        earlier = {
            r.hash: await self._outcome_of(existing[r.hash])
            for j, job in enumerate(jobs)
            if outcomes[j] is None
            for r in job.resolved
            if r.hash in existing
        }
        # Stand-ins: the analysis reads their id and SLO, the write phase their id.
        known = {name: _Known(ident, name, slo) for name, (ident, slo) in reads.deployments.items()}
        now = datetime.now(UTC)
        analyses: dict[str, RunAnalysis] = {}
        for j, item in fresh:
            run = item.run
            run.measured_at = run.measured_at or now
            deployment = known.get(run.deployment) if run.deployment else None
            analyses[item.hash] = await self.analyse(item, deployment, jobs[j].parsed.slo)
        # The reads above ran outside a write transaction: SQLite's driver begins one at the first
        # write, Postgres reads committed data statement by statement, so the writes see fresh data.
        async with writer_lock(self.session):
            try:
                written = await self._insert(jobs, fresh, analyses, known, slo_updates)
            except Exception:
                await self.session.rollback()
                raise
            # On SQLite the writes were committed by the writer thread; a session that read
            # nothing either (the baselines came from the cache) has no transaction to commit.
            if self.session.in_transaction():
                await self.session.commit()
        for j, item in fresh:
            deployment_id = written[item.hash][2]
            if deployment_id is not None:
                BaselineCache.written(cell_key(self._database, deployment_id, _cell_values(item)), item.run)
            analysis = analyses[item.hash]
            metrics.record_ingested(jobs[j].parsed.format_id, item.run.setup.runtime)
            metrics.record_analysis(analysis.verdict, [(r.action, r.severity.label) for r in analysis.recommendations])

        for j, job in enumerate(jobs):
            if outcomes[j] is None:
                answers: list[Outcome] = []
                for r in job.resolved:
                    if r.hash in written and written[r.hash][0] == j:
                        answers.append(Outcome(written[r.hash][1], True))
                    elif r.hash in written:  # the same run twice in one batch: the other one stored it
                        answers.append(Outcome(written[r.hash][1], False))
                    else:
                        answers.append(earlier[r.hash])
                outcomes[j] = answers
        return [o if o is not None else [] for o in outcomes]

    async def _insert(
        self,
        jobs: list[Submission],
        fresh: list[tuple[int, ResolvedRun]],
        analyses: dict[str, RunAnalysis],
        known: dict[str, _Known],
        slo_updates: dict[str, SLO],
    ) -> dict[str, tuple[int, RunResult, int | None]]:
        """The write phase of :meth:`write_batch`: ``{content hash: (job index, result, deployment id)}``."""
        plan = WritePlan(deployment_ids={name: d.id for name, d in known.items()})
        runtimes = {r.run.deployment: r.run.setup.runtime for _, r in reversed(fresh)}
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
            analysis = analyses[item.hash]
            values = run_values(item) | analysis_values(analysis)
            values.update(
                idempotency_key=f"{job.idempotency_key}#{item.index}" if job.idempotency_key else None,
                context=contexts[j],
                submitted_by=job.submitted_by,
                source_index=item.index,
            )
            plan.runs.append(values)
            plan.run_deployments.append(item.run.deployment)
            plan.run_raws.append(raw_index[j])
            plan.recommendations.append(recommendation_rows(analysis))
        if plan.is_empty():
            return {}
        written = await on_connection(self.session, functools.partial(write_plan, plan=plan))
        out: dict[str, tuple[int, RunResult, int | None]] = {}
        for (j, item), run_id, values, recs, rec_ids in zip(
            fresh, written.run_ids, plan.runs, plan.recommendations, written.recommendation_ids, strict=True
        ):
            analysis = analyses[item.hash]
            result = RunResult(
                run=run_out(run_id, item.run.deployment, values),
                verdict=analysis.verdict,
                recommendations=[recommendation_out(rec, rec_id=i) for i, rec in zip(rec_ids, recs, strict=True)],
                expectations=analysis.expectations,
                **answer_fields(values["analysis"]),  # analysis.stored(), as the row keeps it
            )
            out[item.hash] = (j, result, values["deployment_id"])
        return out

    async def existing_outcomes(self, job: Submission) -> list[Outcome]:
        """The stored runs of a submission that a concurrent identical one has just written.

        Never an acknowledgement without the runs: when a concurrent submission took this one's
        Idempotency-Key with a different body, this one is a :class:`Conflict`; when the runs are
        not all stored, the race is reported rather than answered with fewer runs.
        """
        found = await self.runs.by_hashes([r.hash for r in job.resolved])
        if job.idempotency_key:
            keyed = await self.runs.by_idempotency_keys(_keys(job.idempotency_key, len(job.resolved)))
            if keyed and sorted(row.content_hash for row in keyed) != sorted(r.hash for r in job.resolved):
                raise Conflict(
                    "this Idempotency-Key was used for a different submission", field="header.idempotency-key"
                )
            found.update({row.content_hash: row for row in keyed})
        if any(r.hash not in found for r in job.resolved):
            raise Conflict("a concurrent submission conflicted with this one; send it again", field="body")
        return [await self._outcome_of(found[r.hash]) for r in job.resolved]

    async def _outcome_of(self, row: Run) -> Outcome:
        return Outcome(await self.result_of(row), False)

    async def result_of(self, row: Run) -> RunResult:
        """A stored (and analysed) run's answer, as ``POST /runs`` gave it."""
        analysis = row.analysis or {}
        return RunResult(
            run=run_to_out(row),
            verdict=row.verdict,
            recommendations=await RecommendationService(self.session).for_run(row.id),
            expectations=analysis.get("expectations", {}),
            **answer_fields(analysis),
        )

    # ------------------------------------------------------------------ advise

    async def advise(self, request: SubmissionRequest) -> list[RunResult]:
        """The same analysis as submit, storing nothing."""
        parsed = request.parse()
        results = []
        for item in await self.resolve(parsed):
            name = item.run.deployment
            deployment = await self.deployments.get_by_name(name) if name else None
            analysis = await self.analyse(item, deployment, parsed.slo)
            values = run_values(item) | analysis_values(analysis)
            results.append(
                RunResult(
                    run=run_out(None, name, values),
                    verdict=analysis.verdict,
                    recommendations=[
                        recommendation_out(rec, rank=rank) for rank, rec in enumerate(analysis.recommendations, 1)
                    ],
                    expectations=analysis.expectations,
                    **answer_fields(analysis.stored()),
                )
            )
        return results

    # ------------------------------------------------------------------ bulk

    async def bulk(self, request: SubmissionRequest, *, max_runs: int) -> BulkResult:
        """Store many runs in one transaction, all or nothing (see :meth:`_bulk`)."""
        foreground = _Foreground.here()
        foreground.enter()
        try:
            with _collector_paused():
                return await self._bulk(request, max_runs=max_runs)
        finally:
            foreground.leave()

    async def _bulk(self, request: SubmissionRequest, *, max_runs: int) -> BulkResult:
        """Store many runs in one transaction, all or nothing. Their analysis follows in the
        background (and on first read), in order of measurement, so each sees its baseline.

        The whole body is kept once as the raw payload; each run records its item index, so that
        ``/runs/{id}/raw`` can give back exactly the item it came from.
        """
        resolved: list[tuple[int, ResolvedRun, ParsedSubmission]] = []
        canonical = _canonical_bulk(request.body, max_runs, validate=False)
        if canonical is not None and len(canonical) >= COPY_MIN_ROWS:
            driver = await self._copy_driver()
            if driver is not None:
                merged = merge_contexts(*request.layers)
                streamed = await self._bulk_streamed(request, canonical, merged, await self.catalog(), driver)
                if streamed is not None:
                    return streamed
                canonical = None  # a run was refused: the item-by-item path names it
        if canonical is not None and not all(_checked(run) for run in canonical):
            canonical = None
        items = request.bulk_items(max_runs) if canonical is None else None
        catalog = await self.catalog()
        context = merge_contexts(*request.layers) if canonical is not None else None
        for index in range(len(canonical) if canonical is not None else len(items or ())):
            try:
                if canonical is not None and context is not None:
                    run = canonical[index]
                    parsed = ParsedSubmission("canonical", [run], b"", "application/json", None, context, run.slo)
                else:
                    parsed = (items or [])[index].parse()
                resolved.extend((index, r, parsed) for r in resolve_submission(parsed, catalog))
            except InvalidInput as exc:
                exc.field = f"items[{index}]" + (f".{exc.field}" if exc.field and exc.field != "body" else "")
                raise
            except MalformedInput as exc:
                exc.field = f"items[{index}]"
                raise
        names = sorted({str(r.run.deployment) for _, r, _ in resolved if r.run.deployment})
        for name in names:
            validate_deployment_name(name)
        reads = await on_connection(
            self.session, functools.partial(read_batch, hashes=[r.hash for _, r, _ in resolved], names=names)
        )
        plan = WritePlan(deployment_ids={name: ident for name, (ident, _) in reads.deployments.items()})
        now = datetime.now(UTC)
        seen: set[str] = set(reads.known_hashes)
        runtimes: dict[str, str | None] = {}
        contexts: dict[int, dict[str, Any]] = {}  # one document per distinct context (one, usually)
        for index, item, parsed in resolved:
            if item.hash in seen:
                continue
            seen.add(item.hash)
            run = item.run
            run.measured_at = run.measured_at or now
            if run.deployment and run.deployment not in plan.deployment_ids:
                runtimes.setdefault(run.deployment, run.setup.runtime)
            values = run_values(item) | analysis_values(None)
            doc = contexts.get(id(parsed.context))
            if doc is None:
                doc = contexts[id(parsed.context)] = _context_doc(parsed)
            values.update(source_index=index, context=doc)
            plan.runs.append(values)
            plan.run_deployments.append(run.deployment)
            plan.run_raws.append(0)
            plan.recommendations.append([])
        if plan.runs:
            plan.raws.append((request.body, request.content_type, None, "bulk"))
        plan.new_deployments = [
            NewDeployment(name, runtime if runtime in RUNTIMES else None, {}) for name, runtime in runtimes.items()
        ]
        async with writer_lock(self.session):
            try:
                written = await on_connection(self.session, functools.partial(write_plan, plan=plan))
            except Exception:
                await self.session.rollback()
                raise
            await self.session.commit()
        invalidate_baselines()  # the new runs bypassed the baseline cache
        for values in plan.runs:
            metrics.record_ingested("bulk", values["runtime"])
        if written.run_ids:
            self.schedule_pending_analysis()
        return BulkResult(
            received=len(resolved),
            created=len(written.run_ids),
            existing=len(resolved) - len(written.run_ids),
            run_ids=written.run_ids,
        )

    async def _copy_driver(self) -> Any | None:
        """The asyncpg connection of this session's transaction, for a streamed bulk load; None on
        SQLite or another driver (the general path then writes the plan in one go)."""
        if self.session.bind.dialect.name != "postgresql":
            return None
        raw = await (await self.session.connection()).get_raw_connection()
        driver = raw.driver_connection
        return driver if hasattr(driver, "copy_records_to_table") else None

    async def _bulk_streamed(
        self,
        request: SubmissionRequest,
        canonical: list[CanonicalRun],
        context: SubmissionContext,
        catalog: Catalog,
        driver: Any,
    ) -> BulkResult | None:
        """:meth:`_bulk` of a body of canonical runs on Postgres: the same rows, answer and single
        transaction, but written in chunks of :data:`BULK_CHUNK_RUNS` whose ``COPY`` Postgres takes
        in while this process resolves the next chunk (two processes on two cores instead of one
        after the other: session 5 measured the ``COPY`` of a 5,000-run array at 0.20-0.25 s wall
        against 0.35-0.39 s of this process's CPU; docs/benchmarks.md, session 6).

        Same answers as the general path, in the same order of precedence: each run is validated
        just before it is resolved, and a refused one rolls the load back and returns None (the
        caller's item-by-item path then names it, as it would have from the start); a run that
        fails to resolve is named (``items[i]...``) even when an earlier chunk named an invalid
        deployment (nothing more is written once one is seen, and its error is raised after every
        item resolved); any error rolls the whole load back. Nothing is committed before every row
        is in.
        """
        now = datetime.now(UTC)
        dialect = self.session.bind.dialect
        seen: set[str] = set()
        checked: set[str] = set()  # deployment names validated
        bad_name: InvalidInput | None = None
        deployment_ids: dict[str, int] = {}
        raw_id: int | None = None
        doc = _context_doc(ParsedSubmission("canonical", [], b"", "application/json", None, context, None))
        created: list[tuple[str, str | None]] = []  # (hash, runtime) of the new runs, in order
        received = 0
        refused = False
        # One set of "not analysed yet" columns for every row: its empty analysis document is then
        # one object, encoded once per chunk (:meth:`_DriverRows.tuples`); the rows are only written.
        unanalysed = analysis_values(None)
        copying: asyncio.Task[None] | None = None
        # A small first chunk: Postgres starts on its COPY sooner.
        bounds = [0, *range(_FIRST_CHUNK_RUNS, len(canonical), BULK_CHUNK_RUNS), len(canonical)]
        try:
            for start, end in itertools.pairwise(bounds):
                rows: list[dict[str, Any]] = []
                candidates: list[tuple[str, str | None, str | None]] = []
                for index in range(start, end):
                    if index % _YIELD_EVERY == 0:
                        await asyncio.sleep(0)  # the COPY in flight sends on, other requests run
                    run = canonical[index]
                    if not _checked(run):
                        refused = True
                        break
                    try:
                        # What resolve_submission does for a submission of this one run (no
                        # sweep of one run; its errors are named below), without building one.
                        items = [resolve_run(run, context, catalog, from_file=False)]
                    except InvalidInput as exc:
                        exc.field = f"items[{index}]" + (f".{exc.field}" if exc.field and exc.field != "body" else "")
                        raise
                    except MalformedInput as exc:
                        exc.field = f"items[{index}]"
                        raise
                    received += len(items)
                    for item in items:
                        name = item.run.deployment
                        if name and name not in checked:
                            try:
                                validate_deployment_name(str(name))
                            except InvalidInput as exc:
                                bad_name = bad_name or exc
                            checked.add(name)
                        if bad_name is not None or item.hash in seen:
                            continue
                        seen.add(item.hash)
                        item.run.measured_at = item.run.measured_at or now
                        values = run_values(item) | unanalysed
                        values.update(source_index=index, context=doc, created_at=now, updated_at=now)
                        rows.append(values)
                        runtime = item.run.setup.runtime
                        candidates.append((item.hash, name, runtime if runtime in RUNTIMES else None))
                if copying is not None:
                    await copying
                    copying = None
                if refused:
                    await self.session.rollback()
                    return None
                if bad_name is not None or not rows:
                    continue
                raw = (request.body, request.content_type, None, "bulk") if raw_id is None else None
                chunk = await on_connection(
                    self.session,
                    functools.partial(
                        bulk_chunk_prepare, candidates=candidates, deployment_ids=deployment_ids, raw=raw
                    ),
                )
                deployment_ids = chunk.deployment_ids
                raw_id = chunk.raw_id if chunk.raw_id is not None else raw_id
                fresh = []
                for values, (digest, name, _) in zip(rows, candidates, strict=True):
                    if digest in chunk.known_hashes:
                        continue
                    values["deployment_id"] = deployment_ids[name] if name else None
                    values["raw_payload_id"] = raw_id
                    fresh.append(values)
                    created.append((digest, values["runtime"]))
                if fresh:
                    if not driver.is_in_transaction():  # never a COPY that commits on its own
                        raise RuntimeError("a streamed bulk load's COPY outside its transaction")
                    copying = asyncio.get_running_loop().create_task(copy_run_rows(driver, dialect, fresh))
                    await asyncio.sleep(0)  # let it start sending before the next chunk's CPU work
            if copying is not None:
                await copying
                copying = None
            if bad_name is not None:
                raise bad_name
            hashes = [digest for digest, _ in created]
            run_ids = await on_connection(self.session, functools.partial(run_ids_by_hash, hashes=hashes))
            await self.session.commit()
        except BaseException as exc:
            if copying is not None:
                copying.cancel()
                with contextlib.suppress(BaseException):
                    await copying
            if isinstance(exc, Exception):
                await self.session.rollback()
            raise
        if run_ids:
            invalidate_baselines()  # the new runs bypassed the baseline cache
            for _, runtime in created:
                metrics.record_ingested("bulk", runtime)
            self.schedule_pending_analysis()
        return BulkResult(received=received, created=len(run_ids), existing=received - len(run_ids), run_ids=run_ids)

    # ------------------------------------------------------------------ (re-)analysis of stored runs

    async def _resolved_row(self, row: Run) -> ResolvedRun:
        run = run_to_canonical(row)
        specs = (await self.catalog()).resolve_setup(run.setup)
        return ResolvedRun(
            run, specs, row.content_hash, row.hardware_id, row.model_id, row.quantization_id, row.source_index
        )

    async def analysis_update(
        self,
        row: Run,
        *,
        only_unanalysed: bool,
        resolved: ResolvedRun | None = None,
        baseline: Sequence[CanonicalRun | BaselinePoint] | None = None,
    ) -> RunUpdate:
        """A stored run analysed anew (its deployment's SLO and baseline as they stand)."""
        resolved = resolved if resolved is not None else await self._resolved_row(row)
        analysis = await self.analyse(resolved, row.deployment, None, exclude=row.id, baseline=baseline)
        return RunUpdate(row.id, analysis_values(analysis), recommendation_rows(analysis), only_unanalysed)

    async def batch_baselines(self, items: Sequence[tuple[Run, ResolvedRun]]) -> dict[int, list[BaselinePoint]]:
        """The baselines of several stored runs, by run id, read per cell in two queries (the
        cell's runs within the batch's time span, and the newest :data:`RunService.BASELINE_RUNS`
        before it) instead of one query per run. Each run's is then what :meth:`RunService.baseline`
        would read for it: the newest comparable runs measured before it, itself excluded. A cell
        whose span holds more than :data:`_WINDOW_ROWS` runs is left out (read per run)."""
        cells: dict[tuple[Any, ...], list[tuple[Run, ResolvedRun]]] = {}
        for row, resolved in items:
            if row.deployment_id is not None and row.measured_at is not None:
                cells.setdefault(cell_key("", row.deployment_id, _cell_values(resolved)), []).append((row, resolved))
        out: dict[int, list[BaselinePoint]] = {}
        limit = RunService.BASELINE_RUNS
        for members in cells.values():
            first, resolved = members[0]
            assert first.deployment_id is not None
            values = _cell_values(resolved)
            stamps = [row.measured_at for row, _ in members]
            since, until = min(stamps), max(stamps)
            window = await self.runs.cell_runs(
                deployment_id=first.deployment_id, values=values, since=since, until=until, limit=_WINDOW_ROWS + 1
            )
            if len(window) > _WINDOW_ROWS:
                continue
            older = await self.runs.cell_runs(
                deployment_id=first.deployment_id, values=values, since=None, until=since, limit=limit
            )
            points = [(ident, baseline_point(run)) for ident, run in [*window, *older]]  # newest first
            for row, _ in members:
                out[row.id] = [
                    p
                    for ident, p in points
                    if ident != row.id and p.measured_at is not None and p.measured_at < row.measured_at
                ][:limit]
        return out

    async def analyse_rows(self, rows: Sequence[Run], *, yield_to_bulk: bool = False) -> int:
        """Analyse stored runs that have no analysis yet and store it; how many this call stored
        (another worker may have been first). ``yield_to_bulk`` (the background analysis): wait
        between runs while this worker serves a bulk request."""
        if not rows:
            return 0
        plan = WritePlan(deployment_ids={})
        ordered = sorted(rows, key=lambda r: (r.measured_at, r.id))
        foreground = _Foreground.here()
        prepared = []
        for row in ordered:
            if yield_to_bulk and foreground.bulks:
                await foreground.idle.wait()
            prepared.append((row, await self._resolved_row(row)))
        if yield_to_bulk and foreground.bulks:
            await foreground.idle.wait()
        baselines = await self.batch_baselines(prepared) if len(prepared) > 1 else {}
        for row, resolved in prepared:
            if yield_to_bulk and foreground.bulks:
                await foreground.idle.wait()
            plan.updates.append(
                await self.analysis_update(row, only_unanalysed=True, resolved=resolved, baseline=baselines.get(row.id))
            )
        if yield_to_bulk and foreground.bulks:
            await foreground.idle.wait()  # the write too: a streamed bulk load yields to the loop often
        async with writer_lock(self.session):
            written = await on_connection(self.session, functools.partial(write_plan, plan=plan))
            await self.session.commit()
        for update, stored in zip(plan.updates, written.updated, strict=True):
            if stored:
                recommendations = [(r["action"], r["severity"]) for r in update.recommendations]
                metrics.record_analysis(str(update.values["verdict"]), recommendations)
        for row in rows:  # their columns changed behind the ORM's back
            self.session.expire(row)
        return sum(written.updated)

    async def analyse_pending(
        self, *, batch: int = 200, since: datetime | None = None, until: datetime | None = None
    ) -> int:
        """Analyse every stored run still without an analysis (bulk loads), oldest first; only those
        measured in ``[since, until)`` when given (a report's week)."""
        done = 0
        pending = select(Run).where(Run.verdict.is_(None))
        if since is not None:
            pending = pending.where(Run.measured_at >= since)
        if until is not None:
            pending = pending.where(Run.measured_at < until)
        while True:
            await _Foreground.here().idle.wait()
            rows = list((await self.session.execute(pending.order_by(Run.measured_at, Run.id).limit(batch))).scalars())
            if not rows:
                return done
            done += await self.analyse_rows(rows, yield_to_bulk=True)
            self.session.expunge_all()

    def schedule_pending_analysis(self) -> None:
        """Analyse the unanalysed runs in the background, one task per database at a time."""
        engine = self.session.bind
        if not isinstance(engine, AsyncEngine):
            return
        key = engine.sync_engine
        running = _PENDING_ANALYSIS.get(key)
        if running is not None and not running.done():
            running.add_done_callback(lambda _: self.schedule_pending_analysis())  # catch what came since
            return

        async def work() -> None:
            try:
                async with async_sessionmaker(engine, expire_on_commit=False)() as session:
                    await RunPipeline(session).analyse_pending()
            except asyncio.CancelledError:
                raise
            except Exception:  # the reads analyse what is left; never crash the loop
                logger.exception("background analysis of bulk-loaded runs failed")

        task = asyncio.get_running_loop().create_task(work())
        _PENDING_ANALYSIS[key] = task
        _keep(task)

    async def _analysed(self, row: Run) -> Run:
        if row.verdict is None:
            await self.analyse_rows([row])
            await self.session.refresh(row)
        return row

    # ------------------------------------------------------------------ reads

    async def get(self, run_id: int) -> RunOut:
        return run_to_out(await self._analysed(await self.runs.get_run(run_id)))

    async def recommendations(self, run_id: int) -> list[RecommendationOut]:
        row = await self._analysed(await self.runs.get_run(run_id))
        return await RecommendationService(self.session).for_run(row.id)

    async def page(self, filters: RunFilters, *, limit: int, cursor: str | None) -> RunPage:
        """Newest first. Filters accept the same names as submissions: aliases resolve to catalog ids."""
        if filters.hardware or filters.model or filters.quantization:
            catalog = await self.catalog()
            filters = RunFilters(
                filters.deployment,
                filters.runtime,
                catalog.resolve_hardware(filters.hardware, field_prefix="query.hardware").id
                if filters.hardware
                else None,
                catalog.resolve_model(filters.model, field_prefix="query.model")[0].id if filters.model else None,
                catalog.resolve_quantization(filters.quantization, field_prefix="query.quantization").id
                if filters.quantization
                else None,
                filters.since,
                filters.until,
                filters.verdict,
            )
        items, total, next_cursor = await self.runs.page(filters, limit=limit, cursor=cursor)
        return RunPage(items=items, total=total, limit=limit, next_cursor=next_cursor)

    async def raw(self, run_id: int) -> tuple[bytes, str, str | None]:
        """The bytes a run was parsed from: ``(data, media type, file name)``."""
        row = await self.runs.get_run(run_id)
        if row.raw_payload_id is None:
            raise NotFound("this run has no stored raw payload", field="id")
        raws = RawPayloadService(session=self.session)
        payload = await raws.get(row.raw_payload_id)
        data = raws.decompress(payload)
        if payload.format == "bulk":
            return split_bulk(data, None)[row.source_index], "application/json", None
        return data, payload.content_type or "application/octet-stream", payload.file_name
