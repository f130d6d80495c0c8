"""Engine and advanced-alchemy configuration for SQLite (embedded) and Postgres (production)."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import msgspec
from advanced_alchemy.extensions.litestar import (
    AlembicAsyncConfig,
    AsyncSessionConfig,
    SQLAlchemyAsyncConfig,
)
from sqlalchemy import Connection, event
from sqlalchemy import create_engine as sa_create_engine
from sqlalchemy.engine import Engine
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine
from sqlalchemy.pool import NullPool

from advisor.settings import DatabaseSettings

T = TypeVar("T")

__all__ = ["SqliteWriter", "create_engine", "database_key", "make_sqlalchemy_config", "migrations_dir", "sqlite_writer"]


def migrations_dir() -> Path:
    """The Alembic scripts: shipped inside the wheel as advisor/_migrations, or the repo's
    top-level migrations/ folder in a source checkout."""
    packaged = resources.files("advisor").joinpath("_migrations")
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[2] / "migrations"


def database_key(session: AsyncSession) -> str:
    """The database a session talks to, as a key for per-process caches (password hidden)."""
    bind = session.get_bind()  # the sync Engine (or Connection) behind the async session
    url = bind.url if isinstance(bind, Engine) else bind.engine.url
    return url.render_as_string(hide_password=True)


def _sqlite_pragmas(dbapi_connection: Any, _record: Any, busy_timeout_ms: int) -> None:
    cursor = dbapi_connection.cursor()
    # WAL lets readers run beside the single writer; NORMAL sync is safe with WAL.
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _json_dumps(value: Any) -> str:
    return msgspec.json.encode(value).decode()


def create_engine(settings: DatabaseSettings, *, pool: bool = True) -> AsyncEngine:
    """An async engine with the right options per backend."""
    kwargs: dict[str, Any] = {
        "echo": settings.echo,
        # msgspec instead of the stdlib json for the JSON columns: every run stores seven documents.
        "json_serializer": _json_dumps,
        "json_deserializer": msgspec.json.decode,
    }
    if settings.is_sqlite:
        kwargs["connect_args"] = {"timeout": settings.sqlite_busy_timeout_ms / 1000}
    elif pool:
        kwargs.update(pool_size=settings.pool_size, max_overflow=settings.pool_size, pool_pre_ping=True)
    if not pool:
        kwargs["poolclass"] = NullPool
    engine = create_async_engine(settings.url, **kwargs)
    if settings.is_sqlite:
        timeout = settings.sqlite_busy_timeout_ms
        event.listen(
            engine.sync_engine,
            "connect",
            lambda conn, rec: _sqlite_pragmas(conn, rec, timeout),
        )
        _SQLITE_TIMEOUTS[engine.sync_engine] = timeout
    return engine


_SQLITE_TIMEOUTS: weakref.WeakKeyDictionary[Engine, int] = weakref.WeakKeyDictionary()


class SqliteWriter:
    """A synchronous pysqlite engine on the same file as an async SQLite engine, used from one
    dedicated thread: a batch of Core statements then costs one hand-off to that thread instead of
    aiosqlite's four per statement (see :mod:`advisor.domain.runs.writes`)."""

    def __init__(self, engine: AsyncEngine) -> None:
        timeout = _SQLITE_TIMEOUTS.get(engine.sync_engine, DatabaseSettings().sqlite_busy_timeout_ms)
        self.engine = sa_create_engine(
            engine.url.set(drivername="sqlite+pysqlite"),
            json_serializer=_json_dumps,
            json_deserializer=msgspec.json.decode,
            connect_args={"timeout": timeout / 1000, "check_same_thread": False},
            pool_size=1,
            max_overflow=0,
        )
        event.listen(self.engine, "connect", lambda conn, rec: _sqlite_pragmas(conn, rec, timeout))
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="advisor-sqlite-writer")
        weakref.finalize(self, _close_writer, self.engine, self._thread)

    async def run(self, fn: Callable[[Connection], T]) -> T:
        """``fn(connection)`` in one transaction on the writer thread; committed when it returns."""

        def call() -> T:
            with self.engine.begin() as connection:
                return fn(connection)

        return await asyncio.get_running_loop().run_in_executor(self._thread, call)


def _close_writer(engine: Engine, thread: ThreadPoolExecutor) -> None:
    thread.shutdown(wait=False)
    engine.dispose()


_WRITERS: weakref.WeakKeyDictionary[Engine, SqliteWriter] = weakref.WeakKeyDictionary()


def sqlite_writer(engine: AsyncEngine) -> SqliteWriter:
    """The process's :class:`SqliteWriter` for this SQLite engine."""
    writer = _WRITERS.get(engine.sync_engine)
    if writer is None:
        writer = _WRITERS[engine.sync_engine] = SqliteWriter(engine)
    return writer


def make_sqlalchemy_config(settings: DatabaseSettings, engine: AsyncEngine | None = None) -> SQLAlchemyAsyncConfig:
    """The advanced-alchemy config shared by the app, the CLI and migrations."""
    return SQLAlchemyAsyncConfig(
        engine_instance=engine or create_engine(settings),
        session_config=AsyncSessionConfig(expire_on_commit=False),
        before_send_handler="autocommit",
        create_all=False,
        alembic_config=AlembicAsyncConfig(
            script_location=str(migrations_dir()),
            version_table_name="alembic_version",
            render_as_batch=True,
            compare_type=True,
        ),
    )
