"""ISO weeks (``2026-W48``): parsing, their UTC bounds, and the last complete week."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

__all__ = ["IsoWeek"]

_PATTERN = re.compile(r"^(\d{4})-?W(\d{2})$")


@dataclass(frozen=True, order=True)
class IsoWeek:
    """An ISO 8601 week: Monday 00:00 UTC to the next Monday, numbered as ``date.isocalendar`` does."""

    year: int
    week: int

    def __post_init__(self) -> None:
        # date.fromisocalendar validates the week number against the year (W53 exists in some years).
        date.fromisocalendar(self.year, self.week, 1)

    @classmethod
    def parse(cls, text: str) -> IsoWeek:
        """``2026-W48`` (or ``2026W48``); raises ValueError otherwise."""
        match = _PATTERN.match(text.strip().upper())
        if not match:
            raise ValueError(f"{text!r} is not an ISO week such as 2026-W48")
        return cls(int(match.group(1)), int(match.group(2)))

    @classmethod
    def of(cls, moment: datetime | date) -> IsoWeek:
        """The week holding ``moment`` (aware datetimes are taken in UTC)."""
        if isinstance(moment, datetime):
            moment = moment.astimezone(UTC).date() if moment.tzinfo else moment.date()
        year, week, _ = moment.isocalendar()
        return cls(year, week)

    @classmethod
    def last_complete(cls, now: datetime | None = None) -> IsoWeek:
        """The latest week that has ended at ``now`` (default: the current time)."""
        return cls.of(now or datetime.now(UTC)).previous()

    @property
    def start(self) -> datetime:
        return datetime.combine(date.fromisocalendar(self.year, self.week, 1), time(), tzinfo=UTC)

    @property
    def end(self) -> datetime:
        """Exclusive: the next week's start."""
        return self.start + timedelta(days=7)

    def previous(self, weeks: int = 1) -> IsoWeek:
        return IsoWeek.of(self.start - timedelta(days=7 * weeks))

    def next(self) -> IsoWeek:
        return IsoWeek.of(self.end)

    def __str__(self) -> str:
        return f"{self.year}-W{self.week:02d}"
