"""The group committer's connection (issue #19, session 7): on Postgres its batches share one pooled
connection while submissions keep coming, and give it back when the queue runs empty; a batch that
fails drops it, and the retries get a fresh one. On SQLite the batches keep their own sessions (the
writes go through the writer thread)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import event

from advisor.domain.runs import pipeline as runs_pipeline
from advisor.domain.runs.pipeline import _committer, _HeldConnection
from advisor.server import create_app
from advisor.settings import Settings
from tests.integration.test_runs_batching import _client, _post_all, _run


def _count_checkouts(engine: Any) -> list[int]:
    checkouts: list[int] = []
    event.listen(engine.sync_engine, "checkout", lambda *_: checkouts.append(1))
    return checkouts


async def test_busy_batches_share_one_connection_and_give_it_back(settings: Settings) -> None:
    app = create_app(settings)
    async with _client(app) as client:
        engine = app.state.sqlalchemy_config.get_engine()
        await client.post("/api/v1/runs", content=_run(100))  # catalog, model and pool warmed up
        checkouts = _count_checkouts(engine)
        committer = _committer(engine)
        batches = committer.batches
        responses = await _post_all(client, [_run(i) for i in range(40)])
        assert [r.status_code for r in responses] == [201] * 40
        written = committer.batches - batches
        assert written > 1  # the 40 were written in several batches
        if engine.dialect.name == "postgresql":
            # One checkout per run of the queue, not one per batch.
            assert len(checkouts) < written
        else:  # SQLite: the writes go through the writer thread; a batch's session holds nothing
            assert committer._on_idle is None
        assert engine.pool.checkedout() == 0  # nothing held once the queue is empty


@pytest.mark.postgres_only  # the held connection is Postgres's
async def test_a_failed_batch_drops_its_connection_and_the_retries_succeed(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = create_app(settings)
    async with _client(app) as client:
        engine = app.state.sqlalchemy_config.get_engine()
        await client.post("/api/v1/runs", content=_run(200))
        real = runs_pipeline.RunPipeline.write_batch
        failed: list[int] = []

        async def fail_first_batch(self: Any, jobs: list[Any]) -> Any:
            if not failed and len(jobs) > 1:
                failed.append(len(jobs))
                raise ConnectionResetError("the server went away mid-batch")
            return await real(self, jobs)

        monkeypatch.setattr(runs_pipeline.RunPipeline, "write_batch", fail_first_batch)
        invalidated: list[int] = []
        event.listen(engine.sync_engine, "invalidate", lambda *_: invalidated.append(1))
        responses = await _post_all(client, [_run(i) for i in range(12)])
        assert failed, "no batch of several submissions was written"
        # Each submission of the failed batch was retried alone, on a fresh connection, and stored.
        assert [r.status_code for r in responses] == [201] * 12
        assert invalidated  # the connection of the failed batch was not given back for reuse
        assert engine.pool.checkedout() == 0


@pytest.mark.postgres_only  # the held connection is Postgres's
async def test_release_when_idle_and_reconnect(settings: Settings) -> None:
    app = create_app(settings)
    async with app.lifespan():
        engine = app.state.sqlalchemy_config.get_engine()
        held = _HeldConnection(engine)
        await held.release()  # nothing held: nothing to do
        assert held.committer()._on_idle == held.release
        held.connection = await engine.connect()
        assert engine.pool.checkedout() == 1
        await held.release()
        assert held.connection is None and engine.pool.checkedout() == 0
