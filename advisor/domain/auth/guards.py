"""The one app-level guard of ``ADVISOR_AUTH_MODE=token``.

Every handler under ``/api/v1`` needs a bearer token whose role suffices. The role a handler needs
comes from its ``opt={"role": ...}`` when it declares one, else from the HTTP method: reads (GET,
HEAD, OPTIONS) need ``read``, writes need ``submit``. Handlers outside ``/api/v1`` (``/health``,
``/metrics``, ``/schema``) are open unless they declare a role.

Verified tokens are cached per process for :data:`CACHE_TTL_SECONDS`, so a revoked token keeps
working for at most that long; a hit costs one SHA-256 and a dict lookup, no query. ``last_used_at``
is written at most once a :data:`TOUCH_INTERVAL` per token, in a background task whose failure only
logs. The token itself is never logged or echoed.

In ``none`` mode the plugin is not installed at all, so the open API pays nothing.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from advanced_alchemy.extensions.litestar import SQLAlchemyAsyncConfig
from litestar import Litestar
from litestar.config.app import AppConfig
from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler
from litestar.plugins import InitPlugin
from litestar.plugins.problem_details import ProblemDetailsException
from litestar.types import Logger

from advisor.domain.auth.schemas import ROLES, Role, role_allows
from advisor.domain.auth.services import ApiTokenService, hash_token

__all__ = [
    "API_PREFIX",
    "CACHE_TTL_SECONDS",
    "TOUCH_INTERVAL",
    "FailedAuthLimiter",
    "TokenAuthPlugin",
    "bearer_token",
    "required_role",
]

#: How long a verified token is trusted without asking the database (revocation delay).
CACHE_TTL_SECONDS = 5.0
#: ``last_used_at`` is written at most this often per token.
TOUCH_INTERVAL = timedelta(seconds=60)
API_PREFIX = "/api/v1"
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_MAX_CACHED = 10_000
_PROBLEMS = "https://llm-advisor.dev/problems/"


def required_role(method: str, path_template: str, opt: Mapping[str, Any]) -> Role | None:
    """The role a request needs: the handler's ``opt["role"]``, else by method under ``/api/v1``;
    None when the route is open."""
    declared = opt.get("role")
    if declared is not None:
        if declared not in ROLES:
            raise ValueError(f"opt role {declared!r} is not one of {', '.join(ROLES)}")
        return declared  # type: ignore[no-any-return]
    if path_template != API_PREFIX and not path_template.startswith(API_PREFIX + "/"):
        return None
    return "read" if method.upper() in _SAFE_METHODS else "submit"


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, or None."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def _unauthorized(detail: str, *, invalid: bool) -> ProblemDetailsException:
    challenge = 'Bearer realm="advisor"' + (', error="invalid_token"' if invalid else "")
    return ProblemDetailsException(
        status_code=401,
        type_=_PROBLEMS + "unauthorized",
        title="Unauthorized",
        detail=detail,
        headers={"WWW-Authenticate": challenge},
    )


def _forbidden(needed: Role, held: str) -> ProblemDetailsException:
    return ProblemDetailsException(
        status_code=403,
        type_=_PROBLEMS + "forbidden",
        title="Forbidden",
        detail=f"this operation needs the {needed} role; the token has the {held} role",
        extra={"required_role": needed, "token_role": held},
    )


def _too_many(wait: float) -> ProblemDetailsException:
    return ProblemDetailsException(
        status_code=429,
        type_=_PROBLEMS + "too-many-requests",
        title="Too many requests",
        detail="too many requests with a missing, unknown or invalid token from this address; retry later",
        headers={"Retry-After": str(max(1, math.ceil(wait)))},
    )


class FailedAuthLimiter:
    """At most ``per_minute`` missing, unknown or invalid tokens per client address in a sliding
    minute; past it the address gets 429 without a database lookup until its oldest failure ages out.

    Hand-written rather than Litestar's rate-limit middleware: that one counts every request before
    the handler runs, while this counts only the refusals the guard makes. Memory is bounded: at most
    :data:`_MAX_CACHED` addresses, the oldest forgotten first.
    """

    def __init__(self, per_minute: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_minute = per_minute
        self.clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def blocked(self, address: str) -> float | None:
        """Seconds to wait when ``address`` is over its limit, else None."""
        times = self._failures.get(address)
        if times is None:
            return None
        now = self.clock()
        while times and now - times[0] >= 60.0:
            times.popleft()
        if len(times) < self.per_minute:
            return None
        return 60.0 - (now - times[0])

    def record(self, address: str) -> None:
        times = self._failures.pop(address, None) or deque(maxlen=self.per_minute)
        times.append(self.clock())
        self._failures[address] = times  # most recent last
        while len(self._failures) > _MAX_CACHED:
            self._failures.popitem(last=False)


@dataclass(frozen=True, slots=True)
class _Principal:
    token_id: int
    name: str
    role: str
    expires_at: datetime | None


class TokenAuthPlugin(InitPlugin):
    """Installs :meth:`guard` on the app, and drains pending ``last_used_at`` writes on shutdown."""

    def __init__(self) -> None:
        self._verified: dict[str, tuple[float, _Principal]] = {}  # sha256 -> (verified at, principal)
        self._touched: dict[int, float] = {}
        self._pending: set[asyncio.Task[None]] = set()
        self._limiter: FailedAuthLimiter | None = None

    def on_app_init(self, app_config: AppConfig) -> AppConfig:
        app_config.guards.append(self.guard)
        app_config.on_startup.append(self._check_declared_roles)
        # Shutdown hooks run in reverse: this one runs before the engine is disposed.
        app_config.on_shutdown.append(self.drain)
        return app_config

    async def guard(self, connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler) -> None:
        scope = connection.scope
        method: str = scope.get("method", "GET")  # type: ignore[assignment]  # websockets have none
        needed = required_role(method, scope.get("path_template", scope["path"]), handler.opt)
        token = bearer_token(connection.headers.get("authorization"))
        if needed is None:
            # An open route may still say more to a valid token (opt auth="optional": /health).
            if token is not None and handler.opt.get("auth") == "optional":
                principal = await self._verify(connection.app.state.sqlalchemy_config, token, connection.logger)
                if principal is not None:
                    connection.state.token_name = principal.name
            return
        address = connection.client.host if connection.client else "unknown"
        failures = self._failures(connection)
        wait = failures.blocked(address)
        if wait is not None:  # this address sent too many bad tokens: no database lookup at all
            raise _too_many(wait)
        if token is None:
            failures.record(address)
            raise _unauthorized("this endpoint needs an Authorization: Bearer <token> header", invalid=False)
        principal = await self._verify(connection.app.state.sqlalchemy_config, token, connection.logger)
        if principal is None:
            failures.record(address)
            connection.logger.info("auth.rejected", reason="unknown, revoked or expired token", path=scope["path"])
            raise _unauthorized("the token is unknown, revoked or expired", invalid=True)
        if not role_allows(principal.role, needed):
            connection.logger.info("auth.forbidden", token_name=principal.name, needed=needed, held=principal.role)
            raise _forbidden(needed, principal.role)
        connection.state.token_name = principal.name  # for handlers and logs; never the token

    def _failures(self, connection: ASGIConnection[Any, Any, Any, Any]) -> FailedAuthLimiter:
        if self._limiter is None:
            self._limiter = FailedAuthLimiter(connection.app.state.settings.auth.failed_per_minute)
        return self._limiter

    def reset(self) -> None:
        """Forget every verified token and counted failure (tests)."""
        self._verified.clear()
        self._touched.clear()
        self._limiter = None

    async def drain(self) -> None:
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)

    async def _verify(self, config: SQLAlchemyAsyncConfig, token: str, logger: Logger) -> _Principal | None:
        digest = hash_token(token)
        clock = time.monotonic()
        now = datetime.now(UTC)
        cached = self._verified.get(digest)
        # The TTL is read at each lookup, so changing it applies to tokens already cached.
        if cached is not None and clock - cached[0] < CACHE_TTL_SECONDS:
            principal = cached[1]
        else:
            async with ApiTokenService.new(config=config) as service:
                row = await service.find_active(digest, now)
            if row is None:
                self._verified.pop(digest, None)
                return None
            principal = _Principal(row.id, row.name, row.role, row.expires_at)
            if len(self._verified) >= _MAX_CACHED:
                self._verified.clear()
            self._verified[digest] = (clock, principal)
            if row.last_used_at is not None and principal.token_id not in self._touched:
                self._touched[principal.token_id] = clock - (now - row.last_used_at).total_seconds()
        if principal.expires_at is not None and principal.expires_at <= now:
            self._verified.pop(digest, None)
            return None
        self._maybe_touch(config, principal.token_id, clock, now, logger)
        return principal

    def _maybe_touch(
        self, config: SQLAlchemyAsyncConfig, token_id: int, clock: float, now: datetime, logger: Logger
    ) -> None:
        last = self._touched.get(token_id)
        if last is not None and clock - last < TOUCH_INTERVAL.total_seconds():
            return
        self._touched[token_id] = clock
        task = asyncio.get_running_loop().create_task(self._touch(config, token_id, now, logger))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _touch(self, config: SQLAlchemyAsyncConfig, token_id: int, now: datetime, logger: Logger) -> None:
        try:
            async with ApiTokenService.new(config=config) as service:
                await asyncio.wait_for(service.touch(token_id, at=now, min_interval=TOUCH_INTERVAL), timeout=10)
        except Exception as exc:  # never the request's problem
            logger.warning("auth.last_used_not_recorded", token_id=token_id, error=type(exc).__name__)

    async def _check_declared_roles(self, app: Litestar) -> None:
        """Fail at start-up, not at the first request, on a misspelt ``opt={"role": ...}``."""
        for route in app.routes:
            for handler in getattr(route, "route_handlers", ()):
                required_role("GET", route.path, handler.opt)
