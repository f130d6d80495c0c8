"""/health (readiness with details), /health/live and /health/ready, and /formats."""

from __future__ import annotations

import asyncio
import contextlib
import platform
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import msgspec
from litestar import Controller, Request, Response, get
from litestar.di import NamedDependency
from litestar.status_codes import HTTP_200_OK, HTTP_503_SERVICE_UNAVAILABLE
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from advisor import __version__
from advisor.db.migrate import current_revision_async, head_revision

__all__ = ["FormatsController", "SystemController", "probe_write"]


class DatabaseHealth(msgspec.Struct):
    reachable: bool
    backend: str
    revision: str | None
    head: str | None
    up_to_date: bool
    error: str | None = None
    #: A write would succeed (not locked beyond a short bound, not read-only).
    writable: bool | None = None


class Health(msgspec.Struct, omit_defaults=True):
    """``status`` for everyone; the details only in auth mode ``none`` or for a valid token."""

    status: str
    database: DatabaseHealth | None = None
    versions: dict[str, str] | None = None
    model: dict[str, Any] | None = None


class Probe(msgspec.Struct, omit_defaults=True):
    status: str
    reason: str | None = None


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


def _trusted(request: Request[Any, Any, Any]) -> bool:
    """Auth mode ``none`` trusts everyone who can reach the port; token mode a valid token."""
    settings = request.app.state.settings
    return bool(settings.auth.mode != "token" or getattr(request.state, "token_name", None))


def _unavailable(body: Any) -> Response[Any]:
    from advisor.server.problems import RETRY_AFTER_S

    return Response(body, status_code=HTTP_503_SERVICE_UNAVAILABLE, headers={"Retry-After": str(RETRY_AFTER_S)})


class SystemController(Controller):
    tags = ("system",)
    #: Open to all; a valid token (if sent) unlocks the details.
    opt = {"auth": "optional"}

    @get("/health", summary="Readiness with details (the details need a token in token mode)", cache=False)
    async def health(
        self, request: Request[Any, Any, Any], db_session: NamedDependency[AsyncSession]
    ) -> Response[Health]:
        """The database is reachable, migrated and writable; versions of everything that matters.
        503 with Retry-After when not."""
        engine = db_session.bind
        backend = engine.dialect.name
        head = head_revision()
        try:
            await db_session.execute(text("SELECT 1"))
            revision = await current_revision_async(engine)  # type: ignore[arg-type]
            db = DatabaseHealth(True, backend, revision, head, revision == head)
        except Exception as exc:  # the point of /health is to report this, not to raise
            await db_session.rollback()
            from advisor.server.problems import database_fault

            db = DatabaseHealth(False, backend, None, head, False, error=database_fault(exc) or type(exc).__name__)
        if db.reachable:
            fault = await probe_write(engine)  # type: ignore[arg-type]
            db.writable = fault is None
            db.error = fault
        ok = db.reachable and db.up_to_date and bool(db.writable)
        body = Health(status="ok" if ok else "degraded")
        if _trusted(request):
            body.database = db
            body.versions = _versions()
            body.model = (
                await _model_status(db_session) if db.reachable else {"source": "physics-prior", "error": "no db"}
            )
        return Response(body, status_code=HTTP_200_OK) if ok else _unavailable(body)

    @get("/health/live", summary="Liveness: the process answers (no dependency checked)", cache=False)
    async def live(self) -> Probe:
        return Probe(status="ok")

    @get("/health/ready", summary="Readiness: a write to the database would succeed now", cache=False)
    async def ready(
        self, request: Request[Any, Any, Any], db_session: NamedDependency[AsyncSession]
    ) -> Response[Probe]:
        """200 when the database takes a write; 503 with Retry-After when it is unreachable, locked
        beyond a short bound or read-only (the reason only for a trusted caller)."""
        fault = await probe_write(db_session.bind)  # type: ignore[arg-type]
        if fault is None:
            return Response(Probe(status="ready"))
        return _unavailable(Probe(status="unavailable", reason=fault if _trusted(request) else None))


class FormatOut(msgspec.Struct):
    format_id: str
    description: str


class FormatsController(Controller):
    path = "/formats"
    tags = ("system",)

    @get("/", summary="Input formats POST /runs understands (auto-detected, or chosen with ?format=)")
    async def formats(self) -> list[FormatOut]:
        from advisor.ingest import parsers

        return [FormatOut(p.format_id, p.description) for p in parsers()]
