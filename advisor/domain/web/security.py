"""The pages' protections: the secret key, signed sessions, CSRF and the security headers.

Litestar provides the session backend and the CSRF middleware; what is ours is where the secret
comes from and which paths they cover. The API under ``/api/`` is driven by tokens and CI, never by
a browser's ambient cookies, so CSRF and sessions leave it alone.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from pathlib import Path

from litestar.config.csrf import CSRFConfig
from litestar.datastructures import MutableScopeHeaders
from litestar.enums import ScopeType
from litestar.middleware import ASGIMiddleware
from litestar.middleware.session.client_side import CookieBackendConfig
from litestar.types import ASGIApp, Message, Receive, Scope, Send
from sqlalchemy.engine import make_url

from advisor.settings import Settings

__all__ = [
    "CSP",
    "SESSION_COOKIE",
    "SecurityHeadersMiddleware",
    "csrf_config",
    "resolve_secret_key",
    "session_config",
]

SESSION_COOKIE = "advisor_session"
#: No inline script or style anywhere in the pages: every asset is a vendored file under /static.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; form-action 'self'; base-uri 'self'"
)
#: The OpenAPI UIs (Scalar, Swagger) are Litestar's: they load their bundles from CDNs and boot with
#: an inline script, so /schema gets a policy that lets them run, still unframeable.
SCHEMA_CSP = (
    "default-src 'self' https:; script-src 'self' 'unsafe-inline' https:; style-src 'self' 'unsafe-inline' https:; "
    "img-src 'self' data: https:; font-src 'self' data: https:; frame-ancestors 'none'"
)
_NOT_BROWSER = ["^/api/", "^/metrics", "^/health"]


def _default_key_file(settings: Settings) -> Path | None:
    """Beside the SQLite file, else the working directory; None for an in-memory database, whose
    data (and so whose sessions) die with the process anyway."""
    if settings.db.is_sqlite:
        database = make_url(settings.db.url).database
        if not database or database == ":memory:" or database.startswith("file::memory:"):
            return None
        return Path(database).resolve().parent / ".advisor-secret-key"
    return Path(".advisor-secret-key").resolve()


def resolve_secret_key(settings: Settings) -> str:
    """ADVISOR_SECRET_KEY, else the key file (created on first start, mode 0600).

    Creation uses O_EXCL, so two workers starting together agree on one key: the loser reads the
    winner's file.
    """
    if settings.web.secret_key:
        return settings.web.secret_key
    path = settings.web.secret_key_file or _default_key_file(settings)
    if path is None:
        return secrets.token_urlsafe(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        key = path.read_text(encoding="utf-8").strip()
        if key:
            return key
        raise RuntimeError(f"the secret key file {path} is empty; delete it or set ADVISOR_SECRET_KEY") from None
    key = secrets.token_urlsafe(32)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(key + "\n")
    return key


def _derive(secret: str, purpose: str) -> bytes:
    """One key per use, so the session key never doubles as the CSRF key."""
    return hmac.new(secret.encode(), purpose.encode(), hashlib.sha256).digest()


def session_config(secret: str) -> CookieBackendConfig:
    """A signed (AES-GCM), HttpOnly, SameSite=Lax session cookie for the pages."""
    return CookieBackendConfig(
        secret=_derive(secret, "session"),  # 32 bytes: AES-256-GCM
        key=SESSION_COOKIE,
        httponly=True,
        samesite="lax",
        max_age=12 * 3600,
        exclude=_NOT_BROWSER,
    )


def csrf_config(secret: str) -> CSRFConfig:
    """Double-submit CSRF tokens on every page form; the API is excluded."""
    return CSRFConfig(
        secret=_derive(secret, "csrf").hex(),
        cookie_name="advisor_csrf",
        cookie_httponly=True,  # the form carries the token; no script needs to read the cookie
        cookie_samesite="lax",
        exclude=_NOT_BROWSER,
    )


class SecurityHeadersMiddleware(ASGIMiddleware):
    """CSP, nosniff, frame-ancestors and the referrer policy on every HTTP response. A response
    that sets one of these headers itself keeps its own (e.g. a standalone HTML report that needs
    its inline stylesheet)."""

    scopes = (ScopeType.HTTP,)

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        path = scope.get("path", "")
        policy = SCHEMA_CSP if path == "/schema" or path.startswith("/schema/") else CSP

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableScopeHeaders.from_message(message)
                headers.setdefault("Content-Security-Policy", policy)
                headers.setdefault("X-Content-Type-Options", "nosniff")
                headers.setdefault("X-Frame-Options", "DENY")
                headers.setdefault("Referrer-Policy", "same-origin")
            await send(message)

        await next_app(scope, receive, send_with_headers)
