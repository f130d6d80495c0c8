from __future__ import annotations

import platform
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import msgspec
from litestar import Controller, Response, get
from litestar.di import NamedDependency
from litestar.status_codes import HTTP_200_OK, HTTP_503_SERVICE_UNAVAILABLE
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from advisor import __version__
from advisor.db.migrate import current_revision_async, head_revision


class DatabaseHealth(msgspec.Struct):
    reachable: bool
    backend: str
    revision: str | None
    head: str | None
    up_to_date: bool
    error: str | None = None


class Health(msgspec.Struct):
    status: str
    database: DatabaseHealth
    versions: dict[str, str]
    model: dict[str, Any]


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


class SystemController(Controller):
    tags = ("system",)

    @get("/health", summary="Liveness and readiness", cache=False)
    async def health(self, db_session: NamedDependency[AsyncSession]) -> Response[Health]:
        """The database is reachable and migrated; versions of everything that matters."""
        engine = db_session.bind
        backend = engine.dialect.name
        head = head_revision()
        try:
            await db_session.execute(text("SELECT 1"))
            revision = await current_revision_async(engine)  # type: ignore[arg-type]
            db = DatabaseHealth(True, backend, revision, head, revision == head)
        except Exception as exc:  # the point of /health is to report this, not to raise
            db = DatabaseHealth(False, backend, None, head, False, error=type(exc).__name__)
        ok = db.reachable and db.up_to_date
        body = Health(
            status="ok" if ok else "degraded",
            database=db,
            versions=_versions(),
            model=await _model_status(db_session) if db.reachable else {"source": "physics-prior", "error": "no db"},
        )
        return Response(body, status_code=HTTP_200_OK if ok else HTTP_503_SERVICE_UNAVAILABLE)


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
