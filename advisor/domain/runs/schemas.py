"""Response shapes of the runs API (DESIGN §4). Request bodies are raw files or canonical runs,
decoded by the ingest layer, so only the responses need schemas here."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec

__all__ = ["BulkResult", "RunOut", "RunPage", "RunResult", "RunResultDoc", "StatusIn"]


class RunOut(msgspec.Struct, kw_only=True):
    """A stored run: the canonical document plus what advisor derived from it."""

    id: int
    deployment: str | None
    measured_at: datetime
    submitted_at: datetime
    submitted_by: str | None
    content_hash: str
    verdict: str | None
    setup: dict[str, Any]
    workload: dict[str, Any]
    metrics: dict[str, Any]
    labels: dict[str, Any]
    source: dict[str, Any]
    efficiency: dict[str, float | None]
    links: dict[str, str]


class RunResult(msgspec.Struct, kw_only=True):
    """What POST /runs and POST /advise return for one run."""

    run: RunOut | dict[str, Any]
    verdict: str
    recommendations: list[dict[str, Any]]
    expectations: dict[str, Any]
    created: bool = True


class RunResultDoc(msgspec.Struct, kw_only=True):
    """The documented shape of a POST /runs or /advise answer (DESIGN §4)."""

    run: RunOut
    verdict: str
    recommendations: list[dict[str, Any]]
    expectations: dict[str, Any]


class RunPage(msgspec.Struct, kw_only=True):
    items: list[RunOut]
    total: int
    limit: int
    next_cursor: str | None


class BulkResult(msgspec.Struct, kw_only=True):
    received: int
    created: int
    existing: int
    run_ids: list[int]


class StatusIn(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """PATCH body for a recommendation."""

    status: str
    note: str | None = None
