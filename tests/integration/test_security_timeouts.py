"""Issue #18 item 4, body-read and request timeouts, against a real ``advisor serve`` (uvicorn):

* connections that send nothing, half a request head, or a head and one byte of a longer body are
  closed after their bound (raw sockets; uvicorn alone would hold the first two for ever);
* a request whose database is locked answers 503 problem+json with Retry-After within the request
  bound (ADVISOR_REQUEST_TIMEOUT_S), on SQLite and on Postgres, and the server serves on.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from tests.conftest import _truncate
from tests.integration.real_server import serve
from tests.integration.test_runs_api import CANONICAL

HEAD_S = 1.0
REQUEST_S = 2.0


@pytest.fixture(scope="module")
def server(db_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    env = {
        "ADVISOR_HEADER_TIMEOUT_S": str(HEAD_S),
        "ADVISOR_REQUEST_TIMEOUT_S": str(REQUEST_S),
        "ADVISOR_DATABASE_SQLITE_BUSY_TIMEOUT_MS": "60000",  # the request bound, not the busy timeout, answers
    }
    try:
        with serve(db_url, tmp_path_factory.mktemp("timeouts"), env=env) as base:
            yield base, db_url
    finally:
        asyncio.run(_truncate(db_url))


def _connect(base: str) -> socket.socket:
    host, port = base.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=30)


def _read_until_closed(sock: socket.socket, within: float) -> tuple[bytes, float]:
    """Everything the server sends until it closes the connection; and when it closed it."""
    start = time.monotonic()
    sock.settimeout(within)
    data = b""
    with contextlib.suppress(ConnectionResetError):
        while chunk := sock.recv(65536):
            data += chunk
    return data, time.monotonic() - start


@pytest.mark.parametrize(
    "sent",
    [
        b"",  # connects and says nothing
        b"POST /api/v1/runs HTTP/1.1\r\nHost: x\r\nContent-Type: appli",  # half a head
    ],
    ids=["nothing", "half-a-head"],
)
def test_a_connection_without_a_complete_head_is_closed(server: tuple[str, str], sent: bytes) -> None:
    base, _ = server
    sockets = [_connect(base) for _ in range(50)]
    try:
        for sock in sockets:
            sock.sendall(sent)
        start = time.monotonic()
        for sock in sockets:
            remaining = max(0.5, HEAD_S + 10 - (time.monotonic() - start))
            data, _ = _read_until_closed(sock, remaining)  # socket.timeout here: still open
            assert data == b""
        assert time.monotonic() - start < HEAD_S + 10
    finally:
        for sock in sockets:
            sock.close()
    assert httpx.get(base + "/health/live", timeout=10).status_code == 200


def test_a_head_and_one_byte_is_answered_408_and_closed(server: tuple[str, str]) -> None:
    base, _ = server
    head = b"POST /api/v1/runs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
    sockets = [_connect(base) for _ in range(20)]
    try:
        for sock in sockets:
            sock.sendall(head)
        start = time.monotonic()
        for sock in sockets:
            data, _ = _read_until_closed(sock, 30)
            assert data.startswith(b"HTTP/1.1 408"), data[:200]
            assert b"application/problem+json" in data
        # The request bound answers, then uvicorn's keep-alive bound (5 s) closes the connection.
        assert time.monotonic() - start < REQUEST_S + 5 + 10
    finally:
        for sock in sockets:
            sock.close()
    assert httpx.get(base + "/health/live", timeout=10).status_code == 200


@contextlib.contextmanager
def _database_locked(url: str) -> Iterator[None]:
    """The database's run table locked against writers by another connection, until the block ends."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        conn = sqlite3.connect(str(parsed.database), timeout=30, isolation_level=None)
        try:
            conn.execute("BEGIN EXCLUSIVE")
            yield
        finally:
            conn.execute("ROLLBACK")
            conn.close()
        return
    locked, release = threading.Event(), threading.Event()

    async def hold() -> None:
        engine = create_async_engine(url)
        try:
            async with engine.connect() as conn, conn.begin():
                await conn.execute(text("LOCK TABLE run IN ACCESS EXCLUSIVE MODE"))
                locked.set()
                await asyncio.to_thread(release.wait, 60)
        finally:
            await engine.dispose()

    holder = threading.Thread(target=asyncio.run, args=(hold(),))
    holder.start()
    try:
        assert locked.wait(30)
        yield
    finally:
        release.set()
        holder.join(30)


def _run(i: int) -> dict[str, Any]:
    run = copy.deepcopy(CANONICAL)
    run["labels"] = {"timeouts": str(i)}
    return run


def test_a_locked_database_is_a_503_within_the_request_bound(server: tuple[str, str]) -> None:
    base, url = server
    with httpx.Client(base_url=base, timeout=60) as client:
        assert client.post("/api/v1/runs", json=_run(0)).status_code == 201  # warm: catalog, pool
        with _database_locked(url):
            start = time.monotonic()
            response = client.post("/api/v1/runs", json=_run(1))
            took = time.monotonic() - start
        assert response.status_code == 503, response.text
        assert response.headers["content-type"].startswith("application/problem+json")
        assert int(response.headers["retry-after"]) >= 1
        assert response.headers.get("x-request-id")  # answered inside the edge middleware
        assert response.json()["type"].endswith("/request-timeout")
        assert REQUEST_S - 0.5 <= took < REQUEST_S + 5, took
        # Once the lock is gone the server serves on; the timed-out run, sent again, is stored once.
        again = client.post("/api/v1/runs", json=_run(1))
        assert again.status_code in (200, 201), again.text
        listed = client.get("/api/v1/runs", params={"limit": 50}).json()
        assert sum(r["labels"] == {"timeouts": "1"} for r in listed["items"]) == 1
