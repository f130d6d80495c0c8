"""Concurrent submissions through the group committer, and the baseline cache, on a real database."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from litestar import Litestar

from advisor.domain.runs.pipeline import _committer
from advisor.server import create_app
from advisor.settings import Settings
from tests.integration.test_runs_api import CANONICAL, _counts

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def _run(i: int, *, deployment: str = "chat-prod", decode: float = 32.8, **setup: Any) -> bytes:
    doc = copy.deepcopy(CANONICAL)
    doc["deployment"] = deployment
    doc["measured_at"] = (T0 + timedelta(minutes=i)).isoformat()
    doc["labels"] = {"i": str(i)}
    doc["metrics"]["decode_tok_s"] = decode
    doc["setup"].update(setup)
    return json.dumps(doc).encode()


@contextlib.asynccontextmanager
async def _client(app: Litestar) -> AsyncIterator[httpx.AsyncClient]:
    """The app on this event loop, requests really concurrent (Litestar's test clients run the
    app behind a blocking portal, one request at a time)."""
    async with app.lifespan():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://advisor") as client:
            yield client


async def _post_all(client: httpx.AsyncClient, bodies: list[bytes]) -> list[Any]:
    return list(await asyncio.gather(*(client.post("/api/v1/runs", content=b) for b in bodies)))


async def test_concurrent_submissions_are_batched_and_all_land(settings: Settings) -> None:
    app = create_app(settings)
    async with _client(app) as client:
        responses = await _post_all(client, [_run(i) for i in range(16)])
        assert [r.status_code for r in responses] == [201] * 16
        ids = [r.json()["run"]["id"] for r in responses]
        assert len(set(ids)) == 16
        assert all(r.json()["recommendations"] is not None for r in responses)
        engine = app.state.sqlalchemy_config.get_engine()
        committer = _committer(engine)
        assert committer.items == 16 and committer.batches < 16  # they shared transactions
        for r in responses:  # each answer is its own run, readable afterwards
            run = r.json()["run"]
            stored = (await client.get(f"/api/v1/runs/{run['id']}")).json()
            assert stored["labels"] == run["labels"] and stored["content_hash"] == run["content_hash"]
            recs = (await client.get(f"/api/v1/runs/{run['id']}/recommendations")).json()
            assert [x["id"] for x in recs] == [x["id"] for x in r.json()["recommendations"]]
    counts = await asyncio.to_thread(_counts, settings.db.url)
    assert counts["run"] == 16 and counts["raw_payload"] == 16 and counts["deployment"] == 1


async def test_in_one_batch_a_bad_submission_fails_alone_and_a_twin_is_stored_once(settings: Settings) -> None:
    bodies = [_run(i) for i in range(5)]
    bad = _run(99, hardware="nvidia-a10000")  # unknown hardware: a 422 for that request only
    twin = bodies[2]
    async with _client(create_app(settings)) as client:
        responses = await _post_all(client, [*bodies, bad, twin])
    statuses = [r.status_code for r in responses]
    assert statuses[5] == 422
    problem = responses[5].json()
    assert problem["field"] == "setup.hardware" and problem["matches"]
    assert statuses[:5].count(201) + statuses[6:].count(201) == 5  # the twin: one 201, one 200
    assert sorted([statuses[2], statuses[6]]) == [200, 201]
    assert responses[2].json()["run"]["id"] == responses[6].json()["run"]["id"]
    counts = await asyncio.to_thread(_counts, settings.db.url)
    assert counts["run"] == 5 and counts["raw_payload"] == 5


async def test_a_reused_idempotency_key_in_a_batch_is_a_conflict_for_that_request(settings: Settings) -> None:
    async with _client(create_app(settings)) as client:
        first = await client.post("/api/v1/runs", content=_run(1), headers={"Idempotency-Key": "ci-42"})
        assert first.status_code == 201
        again, other, fresh = await asyncio.gather(
            client.post("/api/v1/runs", content=_run(1), headers={"Idempotency-Key": "ci-42"}),
            client.post("/api/v1/runs", content=_run(2), headers={"Idempotency-Key": "ci-42"}),
            client.post("/api/v1/runs", content=_run(3)),
        )
    assert again.status_code == 200 and again.json()["run"]["id"] == first.json()["run"]["id"]
    assert other.status_code == 422 and other.json()["field"] == "header.idempotency-key"
    assert fresh.status_code == 201
    assert (await asyncio.to_thread(_counts, settings.db.url))["run"] == 2


def _rule_ids(response: Any) -> set[str]:
    return {r["rule_id"] for r in response.json()["recommendations"]}


async def test_the_baseline_sees_runs_written_since_it_was_cached(settings: Settings) -> None:
    async with _client(create_app(settings)) as client:
        first = await client.post("/api/v1/runs", content=_run(0, decode=40.0))
        assert "REG003" not in _rule_ids(first)  # no history yet; the cell is now cached
        for i in range(1, 6):  # one by one: each later run is compared with the ones before
            assert (await client.post("/api/v1/runs", content=_run(i, decode=40.0 + i * 0.1))).status_code == 201
        slow = await client.post("/api/v1/runs", content=_run(10, decode=25.0))
        assert "REG003" in _rule_ids(slow)
        # A backfill older than the cached runs is compared only with the runs before it.
        early = await client.post("/api/v1/runs", content=_run(-10, decode=25.0))
        assert "REG003" not in _rule_ids(early)


async def test_bulk_loaded_history_reaches_the_baseline_at_once(settings: Settings) -> None:
    async with _client(create_app(settings)) as client:
        assert (await client.post("/api/v1/runs", content=_run(100, decode=40.0))).status_code == 201  # cached
        history = b"\n".join(_run(i, decode=40.0 + i * 0.1) for i in range(10))
        bulk = await client.post("/api/v1/runs/bulk", content=history)
        assert bulk.status_code == 200 and bulk.json()["created"] == 10
        slow = await client.post("/api/v1/runs", content=_run(200, decode=25.0))
    assert "REG003" in _rule_ids(slow)


async def test_an_in_memory_sqlite_database_is_written_through_its_own_connection() -> None:
    """The writer thread opens a second connection, which would see another, empty in-memory
    database: for ``:memory:`` the batch's reads and writes stay on the session's connection."""
    from advanced_alchemy.base import metadata_registry
    from sqlalchemy import func, select
    from sqlalchemy.ext.asyncio import async_sessionmaker

    from advisor.db.config import create_engine
    from advisor.db.models import Run
    from advisor.domain.runs.pipeline import RunPipeline
    from advisor.domain.runs.submission import SubmissionRequest
    from advisor.settings import DatabaseSettings

    engine = create_engine(DatabaseSettings(url="sqlite+aiosqlite:///:memory:"))
    try:
        async with engine.begin() as connection:
            await connection.run_sync(metadata_registry.get(None).create_all)
        request = SubmissionRequest(_run(1), "application/json", "auto", ())
        async with async_sessionmaker(engine, expire_on_commit=False)() as session:
            (outcome,) = await RunPipeline(session).submit(request)
            assert outcome.created
            assert (await session.execute(select(func.count(Run.id)))).scalar_one() == 1
    finally:
        await engine.dispose()
