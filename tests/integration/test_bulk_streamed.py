"""A large bulk load of canonical runs on Postgres is written in chunks whose COPY overlaps the
resolution of the next chunk (``RunPipeline._bulk_streamed``). It must store exactly what the
general path stores, answer the same, and stay one transaction: a refused run, an invalid
deployment name or a failed COPY in a later chunk leaves nothing behind. On SQLite the same tests
run the general path (the answers are the same on both databases)."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker

from advisor.db.models import Deployment, RawPayload, Run
from advisor.domain.runs import pipeline as pipeline_module
from advisor.domain.runs.pipeline import RunPipeline
from advisor.domain.runs.schemas import BulkResult
from advisor.domain.runs.submission import SubmissionRequest
from advisor.errors import InvalidInput
from bench._common import canonical_run

#: Spans the streamed path's first chunk (250), a full one (1,000) and a short last one.
N = 1_320
#: Columns that differ between two loads of the same runs under other deployment names.
_IDENTITY = {"id", "content_hash", "deployment_id", "raw_payload_id", "created_at", "updated_at"}


def _runs(prefix: str, seed: int = 5) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    runs = []
    for i in range(N):
        run = canonical_run(i, rng)
        run["deployment"] = f"{prefix}-{i % 4}"
        run["labels"]["load"] = prefix  # so that even the run of no deployment differs between loads
        runs.append(run)
    runs[900] = dict(runs[300])  # a duplicate within the body, in another chunk
    runs[1_100].pop("deployment")  # a run of no deployment
    return runs


async def _bulk(engine: AsyncEngine, runs: list[dict[str, Any]]) -> BulkResult:
    async with async_sessionmaker(engine, expire_on_commit=False)() as session:
        pipeline = RunPipeline(session)
        pipeline.schedule_pending_analysis = lambda: None  # type: ignore[method-assign]
        body = json.dumps(runs).encode()
        return await pipeline.bulk(SubmissionRequest(body, "application/json", "auto", ()), max_runs=10_000)


async def _stored(engine: AsyncEngine, prefix: str) -> tuple[list[dict[str, Any]], dict[str, str | None]]:
    """The runs of ``prefix``'s deployments (and of none) by source index, without the columns that
    name their identity; the deployments' runtimes by name without the prefix."""
    async with async_sessionmaker(engine)() as session:
        deployments = {
            d.id: d for d in (await session.execute(select(Deployment))).scalars() if d.name.startswith(prefix)
        }
        rows = []
        for run in (await session.execute(select(Run).order_by(Run.source_index, Run.id))).scalars():
            if run.deployment_id is not None and run.deployment_id not in deployments:
                continue
            assert run.raw_payload_id is not None  # every run names the body it came from
            values = {c.key: getattr(run, c.key) for c in Run.__table__.columns if c.key not in _IDENTITY}
            if values["labels"].pop("load") != prefix.rstrip("-"):
                continue
            values["deployment"] = deployments[run.deployment_id].name.split("-", 1)[1] if run.deployment_id else None
            rows.append(values)
    return rows, {d.name.split("-", 1)[1]: d.runtime for d in deployments.values()}


def _general_path(monkeypatch: pytest.MonkeyPatch) -> None:
    async def no_copy(self: RunPipeline) -> None:
        return None

    monkeypatch.setattr(RunPipeline, "_copy_driver", no_copy)


async def test_a_streamed_load_stores_and_answers_what_the_general_path_does(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    streamed, general = _runs("s"), _runs("g")
    # Some runs are stored already (a small load: the general path on both databases).
    assert (await _bulk(engine, streamed[400:500])).created == 100
    assert (await _bulk(engine, general[400:500])).created == 100
    chunks: list[int] = []
    copy = pipeline_module.copy_run_rows

    async def counted(driver: Any, dialect: Any, rows: list[dict[str, Any]]) -> None:
        chunks.append(len(rows))
        await copy(driver, dialect, rows)

    monkeypatch.setattr(pipeline_module, "copy_run_rows", counted)
    fast = await _bulk(engine, streamed)
    if engine.dialect.name == "postgresql":
        assert len(chunks) >= 3 and sum(chunks) == fast.created  # streamed, in chunks
    else:
        assert chunks == []
    _general_path(monkeypatch)
    slow = await _bulk(engine, general)
    assert (fast.received, fast.created, fast.existing) == (N, N - 101, 101)
    assert (slow.received, slow.created, slow.existing) == (fast.received, fast.created, fast.existing)
    async with async_sessionmaker(engine)() as session:
        index_of = dict((await session.execute(select(Run.id, Run.source_index))).tuples().all())
    # The ids answered in the same order: by the body's items.
    assert [index_of[i] for i in fast.run_ids] == [index_of[i] for i in slow.run_ids]
    assert [index_of[i] for i in fast.run_ids] == [i for i in range(N) if not 400 <= i < 500 and i != 900]
    fast_rows, fast_deployments = await _stored(engine, "s-")
    slow_rows, slow_deployments = await _stored(engine, "g-")
    assert len(fast_rows) == N - 1 and sum(r["deployment"] is None for r in fast_rows) == 1
    assert fast_rows == slow_rows
    assert fast_deployments == slow_deployments == {"0": "vllm", "1": "vllm", "2": "vllm", "3": "vllm"}
    async with async_sessionmaker(engine)() as session:
        raws = (await session.execute(select(RawPayload.format, func.count()).group_by(RawPayload.format))).all()
    assert dict(raws) == {"bulk": 4}  # each body stored once, the large ones included


async def _nothing_stored(engine: AsyncEngine) -> None:
    async with async_sessionmaker(engine)() as session:
        assert (await session.execute(select(func.count()).select_from(Run))).scalar_one() == 0
        assert (await session.execute(select(func.count()).select_from(RawPayload))).scalar_one() == 0
        assert (await session.execute(select(func.count()).select_from(Deployment))).scalar_one() == 0


async def test_a_refused_run_in_a_later_chunk_is_named_and_nothing_is_stored(engine: AsyncEngine) -> None:
    runs = _runs("r")
    runs[1_250]["metrics"]["ttft_ms"]["p99"] = -1.0  # decodes, but validation refuses it
    with pytest.raises(InvalidInput) as refused:
        await _bulk(engine, runs)
    assert refused.value.field == "items[1250].metrics.ttft_ms.p99"
    await _nothing_stored(engine)


async def test_an_invalid_deployment_name_in_a_later_chunk_stores_nothing(engine: AsyncEngine) -> None:
    runs = _runs("n")
    runs[700]["deployment"] = "no spaces allowed"
    with pytest.raises(InvalidInput) as refused:
        await _bulk(engine, runs)
    assert refused.value.field == "deployment"
    await _nothing_stored(engine)


@pytest.mark.postgres_only  # the COPY of a streamed load is Postgres's
async def test_a_failed_copy_rolls_the_whole_load_back(engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    copy = pipeline_module.copy_run_rows

    async def fail_second(driver: Any, dialect: Any, rows: list[dict[str, Any]]) -> None:
        calls.append(len(rows))
        if len(calls) == 2:
            raise RuntimeError("the database went away")
        await copy(driver, dialect, rows)

    monkeypatch.setattr(pipeline_module, "copy_run_rows", fail_second)
    with pytest.raises(RuntimeError, match="went away"):
        await _bulk(engine, _runs("f"))
    await _nothing_stored(engine)
    assert (await _bulk(engine, _runs("f")[:300])).created == 300  # the session and connection still work
