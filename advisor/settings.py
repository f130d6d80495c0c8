"""Typed settings, one class per concern, all read from ``ADVISOR_*`` environment variables.

Every field has a documented default; ``.env.example`` lists them all. ``get_settings()`` is cached:
tests set the environment first, then call ``get_settings.cache_clear()``.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = [
    "AuthSettings",
    "DatabaseSettings",
    "ModelSettings",
    "ReportSettings",
    "RulesSettings",
    "ServerSettings",
    "Settings",
    "SettingsError",
    "WebSettings",
    "get_settings",
]


def _config(prefix: str) -> SettingsConfigDict:
    return SettingsConfigDict(env_prefix=prefix, env_file=".env", extra="ignore", frozen=True)


class DatabaseSettings(BaseSettings):
    """Where runs are stored. SQLite is embedded; Postgres is the production choice."""

    model_config = _config("ADVISOR_DATABASE_")

    url: str = Field(
        default="sqlite+aiosqlite:///./advisor.db",
        description="SQLAlchemy async URL: sqlite+aiosqlite:///path.db or postgresql+asyncpg://user@host/db.",
    )
    echo: bool = Field(default=False, description="Log every SQL statement.")
    pool_size: int = Field(default=10, ge=1, description="Connections per worker (Postgres).")
    sqlite_busy_timeout_ms: int = Field(
        default=5_000, ge=0, description="SQLite busy timeout: a write locked longer is a 503 with Retry-After."
    )

    @field_validator("url")
    @classmethod
    def _async_driver(cls, value: str) -> str:
        if value.startswith(("sqlite:///", "sqlite://")) and "+aiosqlite" not in value:
            value = value.replace("sqlite://", "sqlite+aiosqlite://", 1)
        if value.startswith(("postgresql://", "postgres://")):
            value = "postgresql+asyncpg://" + value.split("://", 1)[1]
        if not value.startswith(("sqlite+aiosqlite://", "postgresql+asyncpg://")):
            raise ValueError("must start with sqlite+aiosqlite:// or postgresql+asyncpg://")
        return value

    @property
    def is_sqlite(self) -> bool:
        return self.url.startswith("sqlite")


class ServerSettings(BaseSettings):
    """The HTTP server."""

    model_config = _config("ADVISOR_")

    host: str = Field(default="127.0.0.1", description="Interface to bind.")
    port: int = Field(default=8000, ge=1, le=65535, description="TCP port.")
    workers: int = Field(default=1, ge=1, le=64, description="Worker processes (uvicorn --workers).")
    log_level: Literal["debug", "info", "warning", "error", "critical"] = Field(
        default="info", description="Log level."
    )
    log_format: Literal["console", "json"] = Field(default="console", description="Log renderer.")
    max_body_bytes: int = Field(
        default=10_000_000, ge=1024, description="Largest accepted request body (413 above it)."
    )
    bulk_max_runs: int = Field(default=10_000, ge=1, description="Most runs in one bulk request.")
    bulk_max_body_bytes: int = Field(
        default=200_000_000, ge=1024, description="Largest bulk request body (413 above it)."
    )
    request_timeout_s: float = Field(
        default=30.0,
        ge=0,
        description="Longest a request may take in the app: past it, 503 with Retry-After (408 while its body "
        "is still arriving); 0: no bound.",
    )
    bulk_request_timeout_s: float = Field(
        default=300.0, ge=0, description="The same bound for POST /api/v1/runs/bulk; 0: no bound."
    )
    header_timeout_s: float = Field(
        default=10.0,
        ge=0,
        description="Seconds a connection has to send a complete request line and headers (advisor serve); "
        "past it, it is closed. 0: no bound.",
    )
    debug: bool = Field(default=False, description="Litestar debug mode (tracebacks in responses).")


class AuthSettings(BaseSettings):
    """Who may call the API. In ``token`` mode every /api/v1 request needs ``Authorization: Bearer``
    with a token from ``advisor tokens create`` whose role (read < submit < admin) suffices."""

    model_config = _config("ADVISOR_AUTH_")

    mode: Literal["none", "token"] = Field(
        default="none",
        description="none: open API (local use); token: bearer tokens with roles required under /api/v1.",
    )
    failed_per_minute: int = Field(
        default=20,
        ge=1,
        description="Unknown or invalid tokens a client address may send per minute before it gets 429s.",
    )
    rate_limit_per_second: int = Field(
        default=500,
        ge=0,
        description="Requests per second per token (or address without one) and worker; 0 turns it off.",
    )


class RulesSettings(BaseSettings):
    """The rules engine."""

    model_config = _config("ADVISOR_RULES_")

    thresholds_file: Path | None = Field(
        default=None, description="TOML file whose thresholds override rules/thresholds.toml."
    )


class ModelSettings(BaseSettings):
    """The fitted performance model."""

    model_config = _config("ADVISOR_MODEL_")

    refit_after_runs: int = Field(
        default=0, ge=0, description="Refit in the background after this many new runs (0: never)."
    )


class WebSettings(BaseSettings):
    """The web pages' sessions and CSRF tokens. Multi-host deployments set ``ADVISOR_SECRET_KEY``
    explicitly (the same on every host); a single host may let advisor generate it."""

    model_config = _config("ADVISOR_")

    secret_key: str | None = Field(
        default=None,
        description="Signs session cookies and CSRF tokens; unset: read from (or generated into) secret_key_file.",
    )
    secret_key_file: Path | None = Field(
        default=None,
        description="Where a generated key is kept (mode 0600); unset: beside the SQLite file, else in ./",
    )


class ReportSettings(BaseSettings):
    """The weekly fleet report: delivery to chat and the optional in-process schedule."""

    model_config = _config("ADVISOR_REPORT_")

    webhook_url: str | None = Field(
        default=None, description="Slack-compatible webhook the weekly report is posted to; unset: no delivery."
    )
    webhook_retries: int = Field(default=4, ge=0, le=10, description="Extra delivery attempts after a failure.")
    webhook_backoff_s: float = Field(
        default=1.0, ge=0, description="First retry delay in seconds; doubled after each failed attempt."
    )
    schedule_enabled: bool = Field(
        default=False, description="Build (and deliver) last week's report every week inside the server process."
    )
    schedule_weekday: int = Field(default=1, ge=1, le=7, description="ISO weekday of the scheduled build (1: Monday).")
    schedule_time: str = Field(
        default="06:00", pattern=r"^([01]\d|2[0-3]):[0-5]\d$", description="UTC time of the scheduled build (HH:MM)."
    )
    public_url: str | None = Field(
        default=None, description="The server's public base URL, to link the full report from the chat message."
    )


class Settings:
    """All settings groups, validated together."""

    def __init__(
        self,
        *,
        db: DatabaseSettings | None = None,
        server: ServerSettings | None = None,
        auth: AuthSettings | None = None,
        rules: RulesSettings | None = None,
        model: ModelSettings | None = None,
        web: WebSettings | None = None,
        report: ReportSettings | None = None,
    ) -> None:
        self.db = db or DatabaseSettings()
        self.server = server or ServerSettings()
        self.auth = auth or AuthSettings()
        self.rules = rules or RulesSettings()
        self.model = model or ModelSettings()
        self.web = web or WebSettings()
        self.report = report or ReportSettings()


class SettingsError(Exception):
    """A malformed setting, rendered as one line naming the environment variable."""


_PREFIXES: dict[type[BaseSettings], str] = {
    DatabaseSettings: "ADVISOR_DATABASE_",
    ServerSettings: "ADVISOR_",
    AuthSettings: "ADVISOR_AUTH_",
    RulesSettings: "ADVISOR_RULES_",
    ModelSettings: "ADVISOR_MODEL_",
    WebSettings: "ADVISOR_",
    ReportSettings: "ADVISOR_REPORT_",
}


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings. Raises :class:`SettingsError` with a one-line message."""
    try:
        return Settings()
    except ValidationError as exc:
        prefix = next((p for cls, p in _PREFIXES.items() if cls.__name__ == exc.title), "ADVISOR_")
        err = exc.errors()[0]
        name = prefix + "_".join(str(p) for p in err["loc"]).upper()
        raise SettingsError(f"invalid setting {name}={err.get('input')!r}: {err['msg']}") from None
