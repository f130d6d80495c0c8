from __future__ import annotations

from datetime import datetime
from typing import Any

from advanced_alchemy.base import IdentityAuditBase
from advanced_alchemy.types import DateTimeUTC, JsonB
from sqlalchemy import Boolean, Integer, LargeBinary, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column


class FittedModel(IdentityAuditBase):
    """A fitted performance-model version: the skops artifact plus what it was trained on."""

    __tablename__ = "fitted_model"

    version: Mapped[str] = mapped_column(String(64), unique=True)
    is_active: Mapped[bool] = mapped_column(Boolean, default=False, index=True)
    artifact: Mapped[bytes] = mapped_column(LargeBinary)
    artifact_sha256: Mapped[str] = mapped_column(String(64))
    data_hash: Mapped[str] = mapped_column(String(64))
    n_train: Mapped[int] = mapped_column(Integer)
    library_versions: Mapped[dict[str, Any]] = mapped_column(JsonB, default=dict)
    cv_metrics: Mapped[dict[str, Any]] = mapped_column(JsonB, default=dict)
    notes: Mapped[str | None] = mapped_column(Text, default=None)


class Job(IdentityAuditBase):
    """A background job (model fit, report) that clients poll."""

    __tablename__ = "job"

    kind: Mapped[str] = mapped_column(String(32), index=True)
    status: Mapped[str] = mapped_column(String(16), default="queued")
    params: Mapped[dict[str, Any]] = mapped_column(JsonB, default=dict)
    result: Mapped[dict[str, Any] | None] = mapped_column(JsonB, default=None)
    error: Mapped[str | None] = mapped_column(Text, default=None)
    started_at: Mapped[datetime | None] = mapped_column(DateTimeUTC(timezone=True), default=None)
    finished_at: Mapped[datetime | None] = mapped_column(DateTimeUTC(timezone=True), default=None)


class ApiToken(IdentityAuditBase):
    """An API token; only its SHA-256 is stored."""

    __tablename__ = "api_token"

    name: Mapped[str] = mapped_column(String(200))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    role: Mapped[str] = mapped_column(String(16), default="submit")
    last_used_at: Mapped[datetime | None] = mapped_column(DateTimeUTC(timezone=True), default=None)
    expires_at: Mapped[datetime | None] = mapped_column(DateTimeUTC(timezone=True), default=None)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTimeUTC(timezone=True), default=None)


class Report(IdentityAuditBase):
    """A stored rendering of a periodic report (e.g. the weekly fleet report)."""

    __tablename__ = "report"
    __table_args__ = (UniqueConstraint("kind", "period", "format", name="uq_report_kind_period_format"),)

    kind: Mapped[str] = mapped_column(String(32))
    period: Mapped[str] = mapped_column(String(32))
    format: Mapped[str] = mapped_column(String(8))
    content: Mapped[bytes] = mapped_column(LargeBinary)
    params: Mapped[dict[str, Any]] = mapped_column(JsonB, default=dict)
