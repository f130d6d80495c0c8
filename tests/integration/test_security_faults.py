"""Issue #18 item 3: a database that is unreachable, locked beyond a short bound or read-only is a
503 with Retry-After on every call, and /health, /health/ready say so; nothing is a 500."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from advisor.db import migrate
from advisor.server import create_app
from advisor.settings import DatabaseSettings, ServerSettings, Settings, WebSettings
from tests.conftest import fresh_database
from tests.integration.test_runs_api import CANONICAL


def _client(url: str, **db: Any) -> TestClient[Any]:
    settings = Settings(
        db=DatabaseSettings(url=url, **db),
        server=ServerSettings(log_level="warning"),  # type: ignore[arg-type]
        web=WebSettings(secret_key="k" * 40),
    )
    return TestClient(app=create_app(settings))


def _assert_503(response: Any, reason: str) -> None:
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"] == "5"
    assert reason in response.text


def _assert_all_503(client: TestClient[Any], reason: str, *, reads_work: bool) -> None:
    _assert_503(client.post("/api/v1/runs", json=CANONICAL), reason)
    listing = client.get("/api/v1/runs")
    if reads_work:
        assert listing.status_code == 200, listing.text
    else:
        _assert_503(listing, reason)
    health = client.get("/health")
    _assert_503(health, reason)
    assert health.json()["status"] == "degraded"
    ready = client.get("/health/ready")
    _assert_503(ready, reason)
    assert ready.json() == {"status": "unavailable", "reason": reason}
    assert client.get("/health/live").json() == {"status": "ok"}


@pytest.fixture
def sqlite_file(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "advisor.db"
    migrate.upgrade(DatabaseSettings(url=f"sqlite+aiosqlite:///{path}"))
    yield path


def test_sqlite_read_only_is_503(sqlite_file: Path) -> None:
    with _client(f"sqlite+aiosqlite:///file:{sqlite_file}?mode=ro&uri=true") as client:
        _assert_all_503(client, "the database is read-only", reads_work=True)
        assert client.get("/health").json()["database"]["writable"] is False


def test_sqlite_locked_is_503_within_the_busy_timeout(sqlite_file: Path) -> None:
    lock = sqlite3.connect(sqlite_file, isolation_level=None)
    lock.execute("BEGIN EXCLUSIVE")
    try:
        with _client(f"sqlite+aiosqlite:///{sqlite_file}", sqlite_busy_timeout_ms=300) as client:
            started = time.monotonic()
            _assert_503(client.post("/api/v1/runs", json=CANONICAL), "the database is locked by another writer")
            assert time.monotonic() - started < 5  # not the old 30 s
            ready = client.get("/health/ready")
            _assert_503(ready, "the database is locked by another writer")
    finally:
        lock.execute("ROLLBACK")
        lock.close()
    with _client(f"sqlite+aiosqlite:///{sqlite_file}") as client:  # the lock gone, the retry stores
        assert client.post("/api/v1/runs", json=CANONICAL).status_code == 201
        assert client.get("/health/ready").json() == {"status": "ready"}


def test_sqlite_unopenable_is_503(tmp_path: Path) -> None:
    with _client(f"sqlite+aiosqlite:///{tmp_path / 'missing' / 'x.db'}") as client:
        _assert_all_503(client, "the database is unavailable", reads_work=False)


def test_postgres_unreachable_is_503() -> None:
    with _client("postgresql+asyncpg://postgres@127.0.0.1:1/advisor") as client:
        _assert_all_503(client, "the database is unreachable", reads_work=False)


async def _pg(url: str, sql: str) -> None:
    engine = create_async_engine(url, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as conn:
            await conn.execute(text(sql))
    finally:
        await engine.dispose()


def test_postgres_read_only_is_503(tmp_path: Path) -> None:
    with fresh_database("postgres", tmp_path) as url:
        migrate.upgrade(DatabaseSettings(url=url))
        name = make_url(url).database
        asyncio.run(_pg(url, f'ALTER DATABASE "{name}" SET default_transaction_read_only = on'))
        with _client(url) as client:
            _assert_all_503(client, "the database is read-only", reads_work=True)


def test_postgres_locked_is_503_within_the_lock_timeout(tmp_path: Path) -> None:
    with fresh_database("postgres", tmp_path) as url:
        migrate.upgrade(DatabaseSettings(url=url))

        async def scenario() -> None:
            holder = create_async_engine(url)
            try:
                async with holder.connect() as conn:
                    await conn.execute(text("LOCK TABLE alembic_version, run IN ACCESS EXCLUSIVE MODE"))
                    await asyncio.to_thread(check)
                    await conn.rollback()
            finally:
                await holder.dispose()

        def check() -> None:
            with _client(url, sqlite_busy_timeout_ms=300) as client:
                started = time.monotonic()
                _assert_503(client.get("/health/ready"), "the database is locked by another writer")
                assert time.monotonic() - started < 5

        asyncio.run(scenario())
