"""Report schemas: the report itself is :class:`advisor.reports.context.WeeklyReport`."""

from __future__ import annotations

from typing import Literal

from advisor.domain.reports.services import Snapshot
from advisor.reports.context import WeeklyReport

__all__ = ["FORMATS", "Format", "Snapshot", "WeeklyReport"]

Format = Literal["json", "html", "md"]
FORMATS: tuple[Format, ...] = ("json", "html", "md")
