"""Engine and advanced-alchemy configuration for SQLite (embedded) and Postgres (production)."""

from __future__ import annotations

import weakref
from importlib import resources
from pathlib import Path
from typing import Any

import msgspec
from advanced_alchemy.extensions.litestar import (
    AlembicAsyncConfig,
    AsyncSessionConfig,
    SQLAlchemyAsyncConfig,
)
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, create_async_engine
from sqlalchemy.pool import NullPool

from advisor.settings import DatabaseSettings

__all__ = [
    "CONNECT_TIMEOUT_S",
    "SQLITE_TIMEOUTS",
    "create_engine",
    "database_key",
    "json_dumps",
    "make_sqlalchemy_config",
    "migrations_dir",
    "sqlite_pragmas",
]


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


def sqlite_pragmas(dbapi_connection: Any, _record: Any, busy_timeout_ms: int) -> None:
    cursor = dbapi_connection.cursor()
    # WAL lets readers run beside the single writer; NORMAL sync is safe with WAL.
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def json_dumps(value: Any) -> str:
    return msgspec.json.encode(value).decode()


#: Seconds to establish a Postgres connection before the request is answered 503.
CONNECT_TIMEOUT_S = 5.0


def create_engine(settings: DatabaseSettings, *, pool: bool = True) -> AsyncEngine:
    """An async engine with the right options per backend."""
    kwargs: dict[str, Any] = {
        "echo": settings.echo,
        # msgspec instead of the stdlib json for the JSON columns: every run stores seven documents.
        "json_serializer": json_dumps,
        "json_deserializer": msgspec.json.decode,
    }
    if settings.is_sqlite:
        kwargs["connect_args"] = {"timeout": settings.sqlite_busy_timeout_ms / 1000}
    else:
        # A write waits at most as long for a lock on Postgres as on SQLite, then fails (a 503 with
        # Retry-After, server/problems.py) instead of holding the request; an unreachable server
        # fails the connect within CONNECT_TIMEOUT_S, not asyncpg's default minute.
        kwargs["connect_args"] = {
            "timeout": CONNECT_TIMEOUT_S,
            "server_settings": {"lock_timeout": str(int(settings.sqlite_busy_timeout_ms))},
        }
    if not settings.is_sqlite and pool:
        kwargs.update(pool_size=settings.pool_size, max_overflow=settings.pool_size, pool_pre_ping=True)
    if not pool:
        kwargs["poolclass"] = NullPool
    engine = create_async_engine(settings.url, **kwargs)
    if settings.is_sqlite:
        timeout = settings.sqlite_busy_timeout_ms
        event.listen(
            engine.sync_engine,
            "connect",
            lambda conn, rec: sqlite_pragmas(conn, rec, timeout),
        )
        SQLITE_TIMEOUTS[engine.sync_engine] = timeout
    return engine


SQLITE_TIMEOUTS: weakref.WeakKeyDictionary[Engine, int] = weakref.WeakKeyDictionary()


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
