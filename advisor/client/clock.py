"""The clock ``advisor measure`` reads, injected so tests run on fake time.

``monotonic()`` times requests (seconds, any origin); ``now()`` stamps the run and the /metrics
scrapes (an aware UTC datetime).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol

__all__ = ["SYSTEM_CLOCK", "Clock", "SystemClock"]


class Clock(Protocol):
    def monotonic(self) -> float: ...
    def now(self) -> datetime: ...


class SystemClock:
    """The real clock: ``time.perf_counter`` (the finest monotonic timer) and the UTC wall clock."""

    def monotonic(self) -> float:
        return time.perf_counter()

    def now(self) -> datetime:
        return datetime.now(UTC)


SYSTEM_CLOCK: Clock = SystemClock()
