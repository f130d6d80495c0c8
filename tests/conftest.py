"""Shared fixtures. Every database test runs on SQLite and on Postgres through ``db_url``.

Postgres comes from ADVISOR_TEST_POSTGRES_URL (default postgresql+asyncpg://postgres@127.0.0.1:5432/postgres);
each test session creates its own database there and drops it afterwards. With no Postgres reachable the
Postgres half skips with the reason, unless ADVISOR_REQUIRE_POSTGRES=1, when it fails.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

# Tests never read a developer's .env or database: fix the environment before importing the app.
os.environ["ADVISOR_DATABASE_URL"] = "sqlite+aiosqlite:///:memory:"
os.environ.setdefault("ADVISOR_LOG_LEVEL", "warning")

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from advisor.settings import DatabaseSettings, ServerSettings, Settings

PG_URL = os.environ.get("ADVISOR_TEST_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres")
REQUIRE_PG = os.environ.get("ADVISOR_REQUIRE_POSTGRES") == "1"
BACKENDS = ("sqlite", "postgres")
FIXTURES = Path(__file__).parent / "fixtures"


def _pg_admin_reachable() -> str | None:
    """None when Postgres answers, else the reason."""

    async def probe() -> None:
        engine = create_async_engine(PG_URL, isolation_level="AUTOCOMMIT")
        try:
            async with engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
        finally:
            await engine.dispose()

    try:
        asyncio.run(asyncio.wait_for(probe(), timeout=5))
    except Exception as exc:
        return f"Postgres at {make_url(PG_URL).render_as_string(hide_password=True)} unreachable: {exc!r}"
    return None


async def _pg_exec(sql: str) -> None:
    engine = create_async_engine(PG_URL, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as conn:
            await conn.execute(text(sql))
    finally:
        await engine.dispose()


@contextmanager
def fresh_database(backend: str, tmp_dir: Path) -> Iterator[str]:
    """A new, empty database on the backend; yields its async URL and drops it afterwards."""
    if backend == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_dir / f'advisor-{uuid.uuid4().hex[:8]}.db'}"
        return
    reason = _pg_admin_reachable()
    if reason:
        if REQUIRE_PG:
            pytest.fail(f"ADVISOR_REQUIRE_POSTGRES=1 but {reason}")
        pytest.skip(reason)
    name = f"advisor_test_{uuid.uuid4().hex[:12]}"
    asyncio.run(_pg_exec(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(PG_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        asyncio.run(_pg_exec(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture(scope="session", params=BACKENDS)
def db_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A migrated database per backend, shared by the session (tables are emptied between tests)."""
    from advisor.db import migrate

    with fresh_database(request.param, tmp_path_factory.mktemp(request.param)) as url:
        migrate.upgrade(DatabaseSettings(url=url))
        yield url


_KEEP = {"alembic_version"}


async def _truncate(url: str) -> None:
    from advanced_alchemy.base import metadata_registry

    import advisor.db.models  # noqa: F401

    engine = create_async_engine(url)
    tables = [t for t in reversed(metadata_registry.get(None).sorted_tables) if t.name not in _KEEP]
    try:
        async with engine.begin() as conn:
            if engine.dialect.name == "postgresql":
                names = ", ".join(f'"{t.name}"' for t in tables)
                await conn.execute(text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))
            else:
                for t in tables:
                    await conn.execute(t.delete())
    finally:
        await engine.dispose()


@pytest.fixture
def clean_db(db_url: str) -> Iterator[str]:
    """The shared database, emptied after the test."""
    yield db_url
    asyncio.run(_truncate(db_url))
    from advisor.domain.catalog.services import CatalogService

    CatalogService.invalidate()  # its per-process cache may hold user entries the truncation removed
    from advisor.domain.runs.baselines import invalidate

    invalidate()  # likewise the baseline cache, runs


@pytest.fixture
def settings(clean_db: str) -> Settings:
    return Settings(db=DatabaseSettings(url=clean_db), server=ServerSettings(log_level="warning"))


@pytest.fixture
async def engine(clean_db: str) -> AsyncIterator[AsyncEngine]:
    from advisor.db.config import create_engine

    eng = create_engine(DatabaseSettings(url=clean_db))
    yield eng
    await eng.dispose()


@pytest.fixture
def client(settings: Settings) -> Iterator[object]:
    """A Litestar TestClient (an httpx.Client) over the app on the test database."""
    from litestar.testing import TestClient

    from advisor.server import create_app

    with TestClient(app=create_app(settings)) as tc:
        yield tc


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test marked ``postgres_only`` checks a mechanism only Postgres has (COPY, asyncpg's own
    statements, the committer's held connection): its SQLite parameter is not collected, rather than
    collected and skipped, so that a skip in CI always means a missing part."""
    keep: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if item.get_closest_marker("postgres_only") and params.get("db_url") == "sqlite":
            dropped.append(item)
        else:
            keep.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep
