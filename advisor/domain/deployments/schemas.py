from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec

from advisor.canonical import SLO


class DeploymentIn(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """PUT body: any subset; omitted fields keep their stored value."""

    team: str | None = None
    runtime: str | None = None
    description: str | None = None
    slo: SLO | None = None


class DeploymentOut(msgspec.Struct, kw_only=True):
    name: str
    team: str | None
    runtime: str | None
    description: str | None
    slo: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    run_count: int | None = None
    last_measured_at: datetime | None = None
