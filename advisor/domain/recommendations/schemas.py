"""The recommendation's public shape (DESIGN §4), the same in ``POST /advise``, ``POST /runs`` and
``GET /runs/{id}/recommendations``."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

import msgspec

__all__ = ["STATUSES", "RecommendationOut", "Status", "StatusIn"]

#: The recommendation's own state. The rule's lifecycle (stable, preview) is ``rule_status``.
STATUSES = ("open", "applied", "dismissed")
Status = Literal["open", "applied", "dismissed"]


class RecommendationOut(msgspec.Struct, kw_only=True):
    """One ranked recommendation. ``id`` and ``run_id`` are null when nothing was stored
    (``POST /advise``)."""

    id: int | None
    run_id: int | None = None
    rank: int
    rule_id: str
    name: str
    action: str
    phase: str | None
    severity: str
    score: float
    title: str
    evidence: list[dict[str, Any]]
    fix: dict[str, str]
    fix_for_runtime: str | None = None
    runtime: str | None = None
    expected_gain: dict[str, Any] | None
    confidence: float | None
    docs: str | None = None
    rule_status: str | None = None
    details: dict[str, Any] | None = None
    status: Status = "open"
    status_note: str | None = None
    status_changed_at: datetime | None = None


class StatusIn(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """PATCH body for a recommendation (the status is checked by the service, for a 422 naming it)."""

    status: str
    note: str | None = None
