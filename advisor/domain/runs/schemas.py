"""Response shapes of the runs API (DESIGN §4). Request bodies are raw files or canonical runs,
decoded by the ingest layer, so only the responses need schemas here."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec

from advisor.domain.recommendations.schemas import RecommendationOut

__all__ = ["BulkResult", "RunOut", "RunPage", "RunResult"]


class RunOut(msgspec.Struct, kw_only=True):
    """A run: the canonical document plus what advisor derived from it. ``id``, ``submitted_at``
    and ``links`` are empty for a run analysed without being stored (``POST /advise``)."""

    id: int | None
    deployment: str | None
    measured_at: datetime | None
    submitted_at: datetime | None
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
    """What POST /runs and POST /advise return for one run (DESIGN §4)."""

    run: RunOut
    verdict: str | None
    recommendations: list[RecommendationOut]
    expectations: dict[str, Any]
    #: Why the verdict is what it is: ``{kind: "slo"|"finding", name, limit, found, text}`` each.
    verdict_reasons: list[dict[str, Any]] = msgspec.field(default_factory=list)
    #: The rest of the stored analysis: ``ttft_breakdown``, the SLO checks, the missing fields and
    #: what was derived from the file (``notes``).
    analysis: dict[str, Any] = msgspec.field(default_factory=dict)
    #: True when this submission found the run already stored (a resubmission: HTTP 200, not 201).
    stored_before: bool = False


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
