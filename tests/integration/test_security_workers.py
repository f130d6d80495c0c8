"""Issue #18 item 2 with real worker processes: ``advisor serve --workers 2`` (uvicorn's supervisor,
two processes, each with its own engine and group committer) on SQLite and on Postgres.

Eight requests sharing one Idempotency-Key are sent at once, with eight different bodies or with
one body, for several rounds. Whatever the interleaving: every 2xx carries a run that
``GET /runs/{id}`` returns as stored; a conflict is a 422 (or 409) problem naming the header;
never a success without a run (``200 {"runs": []}``); exactly one run is stored per key.
"""

from __future__ import annotations

import asyncio
import copy
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from tests.conftest import _truncate
from tests.integration.real_server import serve
from tests.integration.test_runs_api import CANONICAL

ROUNDS = 4
SENDERS = 8


@pytest.fixture(scope="module")
def two_workers(db_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """One server per backend for the module (starting two workers is the slow part); the tables
    are emptied afterwards, as ``clean_db`` does."""
    try:
        with serve(db_url, tmp_path_factory.mktemp("workers"), workers=2) as base:
            yield base, db_url
    finally:
        asyncio.run(_truncate(db_url))


def _keyed_runs(url: str, key: str) -> list[tuple[str, str]]:
    async def query() -> list[tuple[str, str]]:
        engine = create_async_engine(url)
        try:
            async with engine.connect() as conn:
                rows = await conn.execute(
                    text("SELECT idempotency_key, content_hash FROM run WHERE idempotency_key LIKE :k"),
                    {"k": key + "#%"},
                )
                return [(str(a), str(b)) for a, b in rows.all()]
        finally:
            await engine.dispose()

    return asyncio.run(query())


def _body(key: str, i: int) -> dict[str, Any]:
    body = copy.deepcopy(CANONICAL)
    body["labels"] = {"key": key, "attempt": str(i)}  # distinct from every other test's runs
    return body


def _fire(base: str, key: str, bodies: list[dict[str, Any]]) -> list[httpx.Response]:
    """Send every body at once (one connection each, released together by a barrier)."""
    barrier = threading.Barrier(len(bodies))
    answers: list[httpx.Response | BaseException | None] = [None] * len(bodies)

    def send(i: int) -> None:
        with httpx.Client(base_url=base, timeout=60) as client:
            client.get("/health/live")  # the connection is open before the barrier
            barrier.wait()
            try:
                answers[i] = client.post("/api/v1/runs", json=bodies[i], headers={"Idempotency-Key": key})
            except BaseException as exc:  # reported below, with the others
                answers[i] = exc

    threads = [threading.Thread(target=send, args=(i,)) for i in range(len(bodies))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    out = []
    for answer in answers:
        assert isinstance(answer, httpx.Response), answer
        out.append(answer)
    return out


def _check_round(base: str, url: str, key: str, bodies: list[dict[str, Any]]) -> list[int]:
    responses = _fire(base, key, bodies)
    stored = _keyed_runs(url, key)
    assert len(stored) == 1, stored  # exactly one run for the key, whatever the interleaving
    stored_hash = stored[0][1]
    for body, response in zip(bodies, responses, strict=True):
        if response.status_code in (200, 201):
            answer = response.json()
            assert "run" in answer and answer.get("runs") is None, response.text  # never {"runs": []}
            run = answer["run"]
            assert run["id"] is not None and run["content_hash"] == stored_hash, response.text
            assert run["labels"] == body["labels"], "acknowledged a body other than the stored one"
            got = httpx.get(f"{base}/api/v1/runs/{run['id']}", timeout=30)
            assert got.status_code == 200 and got.json()["content_hash"] == stored_hash, got.text
        else:
            assert response.status_code in (409, 422), response.text
            assert response.headers["content-type"].startswith("application/problem+json")
            assert response.json()["field"] in ("header.idempotency-key", "body"), response.text
    return [r.status_code for r in responses]


def test_eight_bodies_under_one_key_on_two_workers(two_workers: tuple[str, str]) -> None:
    base, url = two_workers
    for round_ in range(ROUNDS):
        key = f"race-diff-{round_}"
        bodies = [_body(key, i) for i in range(SENDERS)]
        statuses = _check_round(base, url, key, bodies)
        assert statuses.count(201) == 1, statuses  # one body won the key
        assert statuses.count(200) == 0, statuses  # the others are different bodies: conflicts


def test_one_body_eight_times_under_one_key_on_two_workers(two_workers: tuple[str, str]) -> None:
    base, url = two_workers
    for round_ in range(ROUNDS):
        key = f"race-same-{round_}"
        bodies = [_body(key, 0)] * SENDERS
        statuses = _check_round(base, url, key, bodies)
        assert statuses.count(201) == 1, statuses
        # The same body again is acknowledged with the stored run (200); a request that lost a
        # race it cannot resolve may be told to send again (409), never told it succeeded.
        assert statuses.count(200) + statuses.count(409) == SENDERS - 1, statuses
