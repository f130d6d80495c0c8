"""Who is looking at the pages. In ``none`` mode everyone may do everything; in ``token`` mode a
user signs in by pasting an API token, and the signed session cookie carries the token's hash,
name and role (never the token itself)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from litestar.connection import ASGIConnection
from litestar.handlers.base import BaseRouteHandler

from advisor.domain.auth import ApiTokenService, hash_token, role_allows

__all__ = ["SignInRequired", "WebUser", "current_user", "sign_in", "sign_out", "web_guard"]

#: A signed-in session re-checks its token this often, so a revoked token stops working soon.
_RECHECK_SECONDS = 5.0
_checked: dict[str, tuple[float, bool]] = {}
_MAX_CHECKED = 10_000


@dataclass(frozen=True, slots=True)
class WebUser:
    name: str
    role: str

    @property
    def can_submit(self) -> bool:
        return role_allows(self.role, "submit")


_OPEN = WebUser(name="", role="admin")


class SignInRequired(Exception):
    """Raised by :func:`web_guard`; the pages answer with a redirect to the sign-in form."""

    def __init__(self, next_path: str) -> None:
        super().__init__(next_path)
        self.next_path = next_path


def _token_mode(connection: ASGIConnection[Any, Any, Any, Any]) -> bool:
    return bool(connection.app.state.settings.auth.mode == "token")


async def _still_active(connection: ASGIConnection[Any, Any, Any, Any], digest: str) -> bool:
    now = time.monotonic()
    cached = _checked.get(digest)
    if cached is not None and now - cached[0] < _RECHECK_SECONDS:
        return cached[1]
    async with ApiTokenService.new(config=connection.app.state.sqlalchemy_config) as service:
        active = await service.find_active(digest) is not None
    if len(_checked) >= _MAX_CHECKED:
        _checked.clear()
    _checked[digest] = (now, active)
    return active


async def current_user(connection: ASGIConnection[Any, Any, Any, Any]) -> WebUser | None:
    """The signed-in user (everyone, in ``none`` mode), or None."""
    if not _token_mode(connection):
        return _OPEN
    stored = connection.scope.get("session")
    session: dict[str, Any] = stored if isinstance(stored, dict) else {}
    digest, name, role = session.get("token_hash"), session.get("token_name"), session.get("role")
    if not (digest and name and role):
        return None
    if not await _still_active(connection, digest):
        connection.clear_session()
        return None
    return WebUser(name=name, role=role)


async def web_guard(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    """Token mode: pages need a session; the user lands on /signin and comes back afterwards."""
    user = await current_user(connection)
    if user is None:
        query = connection.scope.get("query_string", b"").decode("latin-1")
        raise SignInRequired(connection.scope["path"] + (f"?{query}" if query else ""))
    connection.state.web_user = user


async def sign_in(connection: ASGIConnection[Any, Any, Any, Any], token: str) -> WebUser | None:
    """Start a session for ``token`` when it is active; None otherwise."""
    digest = hash_token(token.strip())
    async with ApiTokenService.new(config=connection.app.state.sqlalchemy_config) as service:
        row = await service.find_active(digest)
    if row is None:
        return None
    connection.set_session({"token_hash": digest, "token_name": row.name, "role": row.role})
    _checked.pop(digest, None)
    return WebUser(name=row.name, role=row.role)


def sign_out(connection: ASGIConnection[Any, Any, Any, Any]) -> None:
    connection.clear_session()
