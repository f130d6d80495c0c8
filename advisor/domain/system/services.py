"""Health of this worker and its database: the checks behind /health and /health/ready."""

from __future__ import annotations

import asyncio
import contextlib
import platform
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import msgspec
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from advisor import __version__
from advisor.db.migrate import current_revision_async, head_revision
from advisor.domain.system.schemas import DatabaseHealth, Health, Probe

__all__ = ["READY_LOCK_TIMEOUT_MS", "HealthService", "probe_write"]


#: How long the readiness write probe may wait for a lock before it says "not ready".
READY_LOCK_TIMEOUT_MS = 1_000


def _versions() -> dict[str, str]:
    out = {"advisor": __version__, "python": platform.python_version()}
    for dist in ("litestar", "sqlalchemy", "advanced-alchemy", "scikit-learn", "msgspec"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:  # pragma: no cover
            out[dist] = "missing"
    return out


async def _model_status(session: AsyncSession) -> dict[str, Any]:
    """Which expectation model this worker serves (the fitted version, or the physics prior and why)."""
    from advisor.domain.models import model_status

    try:
        return msgspec.to_builtins(await model_status(session))  # type: ignore[no-any-return]
    except Exception as exc:  # e.g. a database behind its migrations: report, never fail /health
        await session.rollback()
        return {"source": "physics-prior", "active": None, "loaded": False, "error": type(exc).__name__}


async def probe_write(engine: AsyncEngine) -> str | None:
    """None when a write would succeed now, else why not. Takes the write lock with a no-op update
    of Alembic's version row and rolls it back, waiting at most :data:`READY_LOCK_TIMEOUT_MS`."""
    from advisor.db.config import SQLITE_TIMEOUTS
    from advisor.server.problems import database_fault

    sqlite = engine.dialect.name == "sqlite"
    try:
        async with asyncio.timeout(READY_LOCK_TIMEOUT_MS / 1000 + 4), engine.connect() as conn:
            if sqlite:
                await conn.exec_driver_sql(f"PRAGMA busy_timeout={READY_LOCK_TIMEOUT_MS}")
            try:
                if not sqlite:
                    await conn.exec_driver_sql(f"SET LOCAL lock_timeout = '{READY_LOCK_TIMEOUT_MS}ms'")
                await conn.execute(text("UPDATE alembic_version SET version_num = version_num"))
            finally:
                await conn.rollback()  # the probe never writes
                if sqlite:
                    restore = SQLITE_TIMEOUTS.get(engine.sync_engine, 5_000)
                    with contextlib.suppress(Exception):
                        await conn.exec_driver_sql(f"PRAGMA busy_timeout={int(restore)}")
                        await conn.rollback()
    except Exception as exc:  # the point of the probe is to report this, not to raise
        return database_fault(exc) or f"the database refused a write ({type(exc).__name__})"
    return None


class HealthService:
    """The checks behind the health endpoints, on the request's session."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def health(self, *, trusted: bool) -> tuple[Health, bool]:
        """The database is reachable, migrated and writable; versions of everything that matters
        (the details only for a ``trusted`` caller). Returns the body and whether all is well."""
        session = self.session
        engine = session.bind
        backend = engine.dialect.name
        head = head_revision()
        try:
            await session.execute(text("SELECT 1"))
            revision = await current_revision_async(engine)  # type: ignore[arg-type]
            db = DatabaseHealth(True, backend, revision, head, revision == head)
        except Exception as exc:  # the point of /health is to report this, not to raise
            await session.rollback()
            from advisor.server.problems import database_fault

            db = DatabaseHealth(False, backend, None, head, False, error=database_fault(exc) or type(exc).__name__)
        if db.reachable:
            fault = await probe_write(engine)  # type: ignore[arg-type]
            db.writable = fault is None
            db.error = fault
        ok = db.reachable and db.up_to_date and bool(db.writable)
        body = Health(status="ok" if ok else "degraded")
        if trusted:
            body.database = db
            body.versions = _versions()
            body.model = await _model_status(session) if db.reachable else {"source": "physics-prior", "error": "no db"}
        return body, ok

    async def ready(self, *, trusted: bool) -> tuple[Probe, bool]:
        """Ready when the database takes a write now; else why not (the reason only when ``trusted``)."""
        fault = await probe_write(self.session.bind)  # type: ignore[arg-type]
        if fault is None:
            return Probe(status="ready"), True
        return Probe(status="unavailable", reason=fault if trusted else None), False
