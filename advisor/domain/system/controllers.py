"""Thin handlers: /health (readiness with details), /health/live and /health/ready, and /formats."""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, Response, get
from litestar.di import NamedDependency
from litestar.status_codes import HTTP_200_OK, HTTP_503_SERVICE_UNAVAILABLE

from advisor.domain.providers import session_service
from advisor.domain.system.schemas import FormatOut, Health, Probe
from advisor.domain.system.services import HealthService

__all__ = ["FormatsController", "SystemController"]


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
    dependencies = {"health": session_service(HealthService)}

    @get("/health", summary="Readiness with details (the details need a token in token mode)", cache=False)
    async def health(self, request: Request[Any, Any, Any], health: NamedDependency[HealthService]) -> Response[Health]:
        """The database is reachable, migrated and writable; versions of everything that matters.
        503 with Retry-After when not."""
        body, ok = await health.health(trusted=_trusted(request))
        return Response(body, status_code=HTTP_200_OK) if ok else _unavailable(body)

    @get("/health/live", summary="Liveness: the process answers (no dependency checked)", cache=False)
    async def live(self) -> Probe:
        return Probe(status="ok")

    @get("/health/ready", summary="Readiness: a write to the database would succeed now", cache=False)
    async def ready(self, request: Request[Any, Any, Any], health: NamedDependency[HealthService]) -> Response[Probe]:
        """200 when the database takes a write; 503 with Retry-After when it is unreachable, locked
        beyond a short bound or read-only (the reason only for a trusted caller)."""
        body, ok = await health.ready(trusted=_trusted(request))
        return Response(body) if ok else _unavailable(body)


class FormatsController(Controller):
    path = "/formats"
    tags = ("system",)

    @get("/", summary="Input formats POST /runs understands (auto-detected, or chosen with ?format=)")
    async def formats(self) -> list[FormatOut]:
        from advisor.ingest import parsers

        return [FormatOut(p.format_id, p.description) for p in parsers()]
