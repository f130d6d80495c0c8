"""Fitted-model versions and fit jobs: training data from SQL, fitting off the event loop,
storing skops artifacts, activation and rollback.

* Training data: the fleet's runs aggregated in SQL per setup and workload
  (:func:`fleet_cells`, one GROUP BY over typed columns; no ORM objects), plus the shipped
  published runs.
* A fit is a :class:`advisor.db.models.Job` (kind ``model.fit``) that clients poll; it runs in a
  worker thread (:func:`run_fit_job`) and writes its progress to the job row every second.
* Every activation and rollback is recorded as a ``model.activate`` job naming the version it
  replaced, so a rollback restores exactly the version that was active before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from advisor.catalog import Catalog

import asyncio
import itertools
import math
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
from advanced_alchemy.repository import SQLAlchemyAsyncRepository
from advanced_alchemy.service import SQLAlchemyAsyncRepositoryService
from sqlalchemy import ColumnElement, case, func, null, or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import defer

from advisor.db.models import FittedModel, Job, Run
from advisor.domain.models import provider
from advisor.domain.models.schemas import ActiveModelOut, FitIn, JobOut, ModelVersionOut
from advisor.errors import Conflict, NotFound
from advisor.ml.dataset import FleetCell

__all__ = [
    "ACTIVATE_JOB",
    "FIT_JOB",
    "FIT_STALE_AFTER",
    "FittedModelService",
    "JobService",
    "StateConflict",
    "fleet_cells",
    "refit_due",
    "run_fit_job",
    "schedule_refit_if_due",
    "start_fit",
]

FIT_JOB = "model.fit"
ACTIVATE_JOB = "model.activate"
#: A queued or running fit older than this is taken as abandoned (its worker died).
FIT_STALE_AFTER = timedelta(minutes=30)
#: Prefix-cache hit rates above this make TTFT a measure of the cache, not of prefill.
_CACHED_TTFT_HIT_RATE = 0.05

Progress = Callable[[str, int, int], None]
#: An ``async_sessionmaker`` (or anything that makes an AsyncSession).
SessionMaker = Callable[[], AsyncSession]


class StateConflict(Conflict):
    """The request is fine but the models' state forbids it: a fit already running, nothing to roll
    back, a version that cannot be served here. HTTP 409 (advisor.errors.Conflict, 422, is for
    contradicting input)."""

    status = 409
    title = "Conflict with the current state"
    type_slug = "state-conflict"


def _now() -> datetime:
    return datetime.now(UTC)


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


# ------------------------------------------------------------------ jobs


class JobService(SQLAlchemyAsyncRepositoryService[Job]):
    """Background jobs."""

    class Repo(SQLAlchemyAsyncRepository[Job]):
        model_type = Job

    repository_type = Repo

    async def start_fit(self, params: FitIn, *, trigger: str) -> Job:
        """Queue a fit (one at a time: :func:`start_fit`)."""
        return await start_fit(self.repository.session, params, trigger=trigger)

    async def get_job(self, job_id: int) -> Job:
        job = await self.get_one_or_none(Job.id == job_id)
        if job is None:
            raise NotFound(f"no job with id {job_id}", field="id")
        return job

    @staticmethod
    def to_out(job: Job) -> JobOut:
        return JobOut(
            id=job.id,
            kind=job.kind,
            status=job.status,
            params=dict(job.params or {}),
            result=dict(job.result) if job.result is not None else None,
            error=job.error,
            created_at=job.created_at,
            started_at=job.started_at,
            finished_at=job.finished_at,
        )


async def _open_fit(session: AsyncSession) -> Job | None:
    """The queued or running fit, if any; older ones are marked failed as abandoned."""
    rows = (
        (
            await session.execute(
                select(Job).where(Job.kind == FIT_JOB, Job.status.in_(("queued", "running"))).order_by(Job.id)
            )
        )
        .scalars()
        .all()
    )
    cutoff = _now() - FIT_STALE_AFTER
    live: Job | None = None
    for job in rows:
        if _aware(job.started_at or job.created_at) < cutoff:
            job.status, job.finished_at = "failed", _now()
            job.error = f"abandoned: no result after {int(FIT_STALE_AFTER.total_seconds() // 60)} minutes"
        else:
            live = job
    return live


async def start_fit(session: AsyncSession, params: FitIn, *, trigger: str) -> Job:
    """Queue a fit job (committed, so a background task can pick it up). :class:`Conflict` when a
    fit is already queued or running."""
    running = await _open_fit(session)
    if running is not None:
        await session.commit()
        raise StateConflict(f"a fit is already {running.status} (job {running.id})", field="job")
    job = Job(kind=FIT_JOB, status="queued", params={**msgspec.to_builtins(params), "trigger": trigger})
    session.add(job)
    await session.commit()
    return job


# ------------------------------------------------------------------ training data


def _decode_expr() -> ColumnElement[Any]:
    """Per-sequence decode as the rules derive it (decode_tok_s, else 1000 / TPOT, else
    1000 / ITL), and only for runs whose concurrency is known (the ceiling depends on it)."""
    rate = func.coalesce(
        Run.decode_tok_s,
        1000.0 / func.nullif(Run.tpot_mean_ms, 0),
        1000.0 / func.nullif(Run.tpot_p50_ms, 0),
        1000.0 / func.nullif(Run.itl_mean_ms, 0),
        1000.0 / func.nullif(Run.itl_p50_ms, 0),
    )
    known = or_(Run.running_mean.is_not(None), Run.concurrency.is_not(None), Run.num_requests == 1)
    return case((known, rate), else_=None)


def _uncached(column: Any) -> ColumnElement[Any]:
    return case((func.coalesce(Run.prefix_cache_hit_rate, 0.0) <= _CACHED_TTFT_HIT_RATE, column), else_=None)


def _bucket(column: Any) -> ColumnElement[Any]:
    """A workload mean's bucket: itself rounded below 16, then the nearest of eight evenly spaced
    points per doubling (2048, 2304, 2560, …: neighbours within 12.5 %). The points include every
    power of two, so means either side of one (2047.6 and 2051.2 prompt tokens, as benchmarks
    report them run to run) share a bucket. Runs that differ by so little are one workload."""
    whens: list[tuple[Any, Any]] = [(column.is_(None), null()), (column < 16, func.round(column))]
    for k in range(4, 31):
        low, step = 2**k, 2 ** (k - 3)
        whens.append((column < 2 * low, low + func.round((column - low) / step) * step))
    return case(*whens, else_=column)


async def fleet_cells(session: AsyncSession) -> list[FleetCell]:
    """The fleet's runs averaged per setup, workload bucket and deployment, in one SQL aggregate.

    A cell's workload is the mean of its runs' (prompt, output, KV depth, concurrency) within
    buckets of :func:`_bucket`. Runs whose hardware, model or quantization did not resolve to a
    catalog id, and runs spread over more GPUs than their tensor-parallel degree (pipeline or
    layer split: no single ceiling fits them), are left out. TTFT and prefill of runs that hit the
    prefix cache are left out too.
    """
    setup = (
        Run.runtime,
        Run.hardware_id,
        Run.model_id,
        Run.quantization_id,
        Run.tensor_parallel,
        Run.kv_cache_dtype,
        Run.deployment_id,
    )
    workload = tuple(
        _bucket(column).label(f"b_{column.key}")
        for column in (Run.prompt_tokens_mean, Run.output_tokens_mean, Run.kv_depth_tokens, Run.concurrency)
    )
    query = (
        select(
            *setup,
            *workload,
            func.avg(Run.prompt_tokens_mean).label("prompt"),
            func.avg(Run.output_tokens_mean).label("output"),
            func.avg(Run.kv_depth_tokens).label("depth"),
            func.avg(Run.concurrency).label("concurrency"),
            func.count(Run.id).label("runs"),
            func.avg(Run.running_mean).label("running"),
            func.avg(_decode_expr()).label("decode"),
            func.avg(_uncached(Run.prefill_tok_s)).label("prefill"),
            func.avg(_uncached(Run.ttft_p50_ms)).label("ttft_p50"),
            func.avg(_uncached(Run.ttft_p99_ms)).label("ttft_p99"),
            func.avg(Run.itl_p99_ms).label("itl_p99"),
        )
        .where(
            Run.hardware_id.is_not(None),
            Run.model_id.is_not(None),
            Run.quantization_id.is_not(None),
            or_(Run.gpu_count.is_(None), Run.gpu_count <= func.coalesce(Run.tensor_parallel, 1)),
        )
        .group_by(*setup, *workload)
        .order_by(*setup, *workload)
    )
    cells: list[FleetCell] = []
    # Streamed in chunks rather than ``.all()``: a worst-case fleet has one cell per run, and a
    # list of every result row beside the cells doubled the fit's peak memory. Labels are interned
    # (a few hundred distinct ids and deployments over 100,000 cells).
    labels: dict[Any, Any] = {}

    def label(value: Any) -> Any:
        return labels.setdefault(value, value)

    result = await session.stream(query.execution_options(yield_per=_FETCH_ROWS))
    # A chunk at a time: each step of an async result is a trip through the driver's greenlet,
    # which per row cost more than building the cells (docs/benchmarks.md, session 7).
    async for chunk in result.partitions():
        _add_cells(cells, chunk, label)
    return cells


def _add_cells(cells: list[FleetCell], rows: Sequence[Any], label: Callable[[Any], Any]) -> None:
    """Append one :class:`FleetCell` per aggregate row of :func:`fleet_cells`."""
    for row in rows:
        concurrency = row.running if row.running is not None else row.concurrency
        cells.append(
            FleetCell(
                runtime=label(row.runtime),
                hardware_id=label(row.hardware_id),
                model_id=label(row.model_id),
                quantization_id=label(row.quantization_id),
                tensor_parallel=row.tensor_parallel,
                kv_cache_dtype=label(row.kv_cache_dtype),
                prompt_tokens=_float(row.prompt),
                output_tokens=_float(row.output),
                kv_depth_tokens=_float(row.depth),
                concurrency=_float(concurrency),
                source=label(f"deployment:{row.deployment_id}" if row.deployment_id is not None else "fleet"),
                runs=int(row.runs),
                decode_tok_s=_float(row.decode),
                prefill_tok_s=_float(row.prefill),
                ttft_p50_ms=_float(row.ttft_p50),
                ttft_p99_ms=_float(row.ttft_p99),
                itl_p99_ms=_float(row.itl_p99),
            )
        )


#: Result rows fetched per round trip while streaming the fit's aggregate.
_FETCH_ROWS = 5_000


def _float(value: Any) -> float | None:
    if value is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def train_model(
    cells: Sequence[FleetCell], catalog: Catalog, *, include_public: bool, cv: bool, progress: Progress | None
) -> tuple[Any, dict[str, Any]]:
    """Observations and a fit, in the calling thread (CPU-bound: run it off the event loop).

    ``cells`` is consumed: a list is emptied once its observations are in the training sets.
    """
    from advisor.ml.dataset import iter_fleet_observations, public_dataset
    from advisor.ml.train import build_training_sets, fit

    info: dict[str, Any] = {
        "fleet_cells": len(cells),
        "fleet_runs": sum(c.runs for c in cells),
        "public": include_public,
    }
    skipped: list[FleetCell] = []
    fleet = iter_fleet_observations(cells, catalog, on_skip=skipped.append)
    # Streamed: only the training arrays are kept, never every cell's roofline at once.
    sets = build_training_sets(itertools.chain(public_dataset(catalog) if include_public else [], fleet))
    info["fleet_cells_skipped"] = len(skipped)
    if isinstance(cells, list):
        cells.clear()  # consumed: the fit's peak can reuse their memory
    return fit(sets, cv=cv, progress=progress), info


# ------------------------------------------------------------------ versions


def _summary(cv_metrics: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for target, metrics in (cv_metrics.get("targets") or {}).items():
        out[target] = {
            scheme: {
                "mdape": values.get("mdape"),
                "coverage": values.get("coverage"),
                "beats_baselines": values.get("beats_baselines"),
            }
            for scheme, values in (metrics.get("schemes") or {}).items()
        }
    return out


def _version_name(data_hash: str) -> str:
    return f"{_now():%Y%m%d-%H%M%S}-{data_hash[:8]}"


class FittedModelService(SQLAlchemyAsyncRepositoryService[FittedModel]):
    """Fitted-model versions: store, list, activate, roll back."""

    class Repo(SQLAlchemyAsyncRepository[FittedModel]):
        model_type = FittedModel

    repository_type = Repo

    @property
    def session(self) -> AsyncSession:
        session: AsyncSession = self.repository.session
        return session

    async def versions(self) -> list[ModelVersionOut]:
        """Every version, newest first (artifact bytes are not loaded)."""
        rows = (
            await self.session.execute(
                select(FittedModel, func.length(FittedModel.artifact))
                .options(defer(FittedModel.artifact))
                .order_by(FittedModel.created_at.desc(), FittedModel.id.desc())
            )
        ).all()
        return [self.to_out(row, int(size or 0)) for row, size in rows]

    async def get_version(self, version: str) -> ModelVersionOut:
        row = (
            await self.session.execute(
                select(FittedModel, func.length(FittedModel.artifact))
                .options(defer(FittedModel.artifact))
                .where(FittedModel.version == version)
            )
        ).first()
        if row is None:
            raise NotFound(f"no fitted model version {version!r}", field="version")
        return self.to_out(row[0], int(row[1] or 0), full=True)

    @staticmethod
    def to_out(row: FittedModel, size: int, *, full: bool = False) -> ModelVersionOut:
        from advisor.ml.store import version_mismatch

        return ModelVersionOut(
            version=row.version,
            is_active=row.is_active,
            created_at=row.created_at,
            n_train=row.n_train,
            data_hash=row.data_hash,
            artifact_sha256=row.artifact_sha256,
            artifact_bytes=size,
            library_versions=dict(row.library_versions or {}),
            loadable=version_mismatch(row.library_versions or {}) is None,
            summary=_summary(row.cv_metrics or {}),
            notes=row.notes,
            cv_metrics=dict(row.cv_metrics or {}) if full else None,
        )

    async def save(self, result: Any, *, notes: str | None, params: dict[str, Any]) -> FittedModel:
        """Store a :class:`advisor.ml.train.FitResult` as a new, inactive version."""
        from advisor.ml.store import dumps, library_versions, sha256

        version = _version_name(result.data_hash)
        suffix = 1
        while await self.session.scalar(select(FittedModel.id).where(FittedModel.version == version)):
            suffix += 1
            version = f"{_version_name(result.data_hash)}-{suffix}"
        meta = {
            "data_hash": result.data_hash,
            "created_at": _now().isoformat(),
            "counts": result.counts,
            "params": params,
            "cv_metrics": result.cv_metrics,
        }
        # Serialising ~100 trees per head takes a moment of CPU: off the event loop.
        artifact = await asyncio.to_thread(dumps, result.model, version=version, meta=meta)
        row = FittedModel(
            version=version,
            is_active=False,
            artifact=artifact,
            artifact_sha256=sha256(artifact),
            data_hash=result.data_hash,
            n_train=result.n_train,
            library_versions=library_versions(),
            cv_metrics=result.cv_metrics,
            notes=notes,
        )
        self.session.add(row)
        await self.session.flush()
        return row

    async def _active_version(self) -> str | None:
        version: str | None = await self.session.scalar(
            select(FittedModel.version)
            .where(FittedModel.is_active.is_(True))
            .order_by(FittedModel.updated_at.desc())
            .limit(1)
        )
        return version

    async def _check_loadable(self, version: str) -> None:
        from advisor.ml.store import ArtifactError, loads

        row = (
            await self.session.execute(
                select(FittedModel.artifact, FittedModel.artifact_sha256, FittedModel.library_versions).where(
                    FittedModel.version == version
                )
            )
        ).first()
        if row is None:
            raise NotFound(f"no fitted model version {version!r}", field="version")
        try:
            await asyncio.to_thread(
                loads, row.artifact, expected_sha256=row.artifact_sha256, recorded_versions=row.library_versions
            )
        except ArtifactError as exc:
            raise StateConflict(f"version {version} cannot be served: {exc}", field="version") from exc

    async def _switch(self, version: str | None, *, rollback: bool) -> ActiveModelOut:
        previous = await self._active_version()
        now = _now()
        await self.session.execute(
            update(FittedModel).where(FittedModel.is_active.is_(True)).values(is_active=False, updated_at=now)
        )
        if version is not None:
            await self.session.execute(
                update(FittedModel).where(FittedModel.version == version).values(is_active=True, updated_at=now)
            )
        self.session.add(
            Job(
                kind=ACTIVATE_JOB,
                status="succeeded",
                params={"version": version, "previous": previous, "rollback": rollback},
                result={"active": version},
                started_at=now,
                finished_at=now,
            )
        )
        await self.session.commit()
        provider.invalidate()
        return ActiveModelOut(active=version, previous=previous)

    async def activate(self, version: str) -> ActiveModelOut:
        """Make ``version`` the one every worker serves. :class:`NotFound` for an unknown version,
        :class:`Conflict` for one that cannot be loaded here (library mismatch, corrupt)."""
        await self._check_loadable(version)
        return await self._switch(version, rollback=False)

    async def rollback(self) -> ActiveModelOut:
        """Restore the version that was active before the last activation (None: the physics
        prior). :class:`Conflict` when nothing was ever activated."""
        last = await self.session.scalar(
            select(Job).where(Job.kind == ACTIVATE_JOB, Job.status == "succeeded").order_by(Job.id.desc()).limit(1)
        )
        if last is None:
            raise StateConflict("nothing to roll back: no version was ever activated", field="version")
        target = (last.params or {}).get("previous")
        if target is not None:
            await self._check_loadable(str(target))
        return await self._switch(str(target) if target is not None else None, rollback=True)


# ------------------------------------------------------------------ running a fit


async def run_fit_job(
    session_maker: SessionMaker,
    job_id: int,
    *,
    progress: Progress | None = None,
    poll_seconds: float = 1.0,
) -> Job:
    """Run a queued fit job to the end and return it (succeeded or failed; never raises for a
    failed fit: the job records the error)."""
    from advisor.domain.catalog.services import CatalogService

    async with session_maker() as session:
        job = await JobService(session=session).get_job(job_id)
        params = msgspec.convert({k: v for k, v in (job.params or {}).items() if k != "trigger"}, FitIn)
        job.status, job.started_at = "running", _now()
        job.result = {"progress": {"step": "reading runs", "done": 0, "total": 0}}
        await session.commit()
        started = time.monotonic()
        state: dict[str, Any] = {"step": "reading runs", "done": 0, "total": 0}

        def report(step: str, done: int, total: int) -> None:
            state.update(step=step, done=done, total=total)
            if progress is not None:
                progress(step, done, total)

        try:
            catalog = await CatalogService(session=session).current()
            cells = await fleet_cells(session)
            report(f"{len(cells)} fleet cells read", 0, 0)
            work = asyncio.ensure_future(
                asyncio.to_thread(
                    train_model, cells, catalog, include_public=params.include_public, cv=params.cv, progress=report
                )
            )
            while True:
                done, _ = await asyncio.wait({work}, timeout=poll_seconds)
                if done:
                    break
                job.result = {"progress": dict(state)}
                await session.commit()
            result, info = work.result()
            models = FittedModelService(session=session)
            row = await models.save(result, notes=params.notes, params={**msgspec.to_builtins(params), **info})
            await session.commit()
            version = row.version
            summary = _summary(result.cv_metrics)
            from advisor.ml.train import losing_groupings  # the ML stack loads only to fit

            losing = losing_groupings(result.cv_metrics)
            activated = params.activate and (params.force or not losing)
            if activated:
                await models.activate(version)
            job = await JobService(session=session).get_job(job_id)
            job.status, job.finished_at = "succeeded", _now()
            job.result = {
                "version": version,
                "activated": activated,
                **(
                    {"activation_refused": f"loses to a baseline: {'; '.join(losing)} (--force activates it)"}
                    if params.activate and not activated
                    else {}
                ),
                "loses_to_baseline": losing,
                "n_train": result.n_train,
                "seconds": round(time.monotonic() - started, 2),
                "beats_baselines": result.cv_metrics.get("beats_baselines"),
                "summary": summary,
                **info,
            }
            await session.commit()
        except Exception as exc:  # the job must say why; the caller decides whether to raise
            await session.rollback()
            job = await JobService(session=session).get_job(job_id)
            job.status, job.finished_at = "failed", _now()
            job.error = f"{type(exc).__name__}: {exc}"
            await session.commit()
        return job


# ------------------------------------------------------------------ automatic refits


async def refit_due(session: AsyncSession, threshold: int) -> bool:
    """Whether ``threshold`` runs have been stored since the last fit started (and no fit is
    queued or running). ``threshold`` 0 disables automatic refits."""
    if threshold <= 0 or await _open_fit(session) is not None:
        return False
    last = await session.scalar(select(func.max(Job.created_at)).where(Job.kind == FIT_JOB))
    query = select(func.count(Run.id))
    if last is not None:
        query = query.where(Run.created_at > last)
    return int(await session.scalar(query) or 0) >= threshold


async def schedule_refit_if_due(session_maker: SessionMaker, threshold: int) -> asyncio.Task[Job] | None:
    """Queue and start a background refit when :func:`refit_due`; never blocks or fails the
    caller (call it after ingestion commits). Returns the task, or None when nothing was due."""
    try:
        async with session_maker() as session:
            if not await refit_due(session, threshold):
                return None
            job = await start_fit(session, FitIn(), trigger="auto")
    except Conflict:
        return None  # another worker queued it first
    return asyncio.create_task(run_fit_job(session_maker, job.id))
