"""A per-process cache of each deployment's recent comparable runs (the regression baseline).

Every submission is compared with the last runs of its deployment on the same runtime, hardware,
model, quantization and concurrency (:meth:`RunService.baseline`). Reading and decoding those rows
cost more than the rest of the analysis, and consecutive submissions of one deployment ask for the
same cell, so each process keeps the newest :data:`CELL_ROWS` runs of the cells it has seen (as
:class:`~advisor.rules.context.BaselinePoint`, what the baseline needs of each):

* it answers from memory when it holds every run of the cell, or at least ``limit`` runs measured
  before the one being analysed (a live stream of submissions, newest last);
* it adds the runs this process writes, and forgets a cell after :data:`TTL_SECONDS`, so the runs
  other workers wrote are seen within that time;
* anything else (a backfill older than what it holds, a re-analysis that excludes a run) is a query.

Bulk ingestion and reparsing change runs behind its back and clear it (:func:`invalidate`).
Hand-written: an LRU of time-limited entries with domain rules for "complete enough" is not what
``functools`` or a cache library offers.
"""

from __future__ import annotations

import bisect
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from advisor.canonical import CanonicalRun
from advisor.rules.context import BaselinePoint, baseline_point

__all__ = ["CELL_ROWS", "TTL_SECONDS", "BaselineCache", "cell_key", "invalidate"]

CELL_ROWS = 40  # twice the baseline's 20 runs: a few out-of-order submissions still hit
MAX_CELLS = 512
TTL_SECONDS = 2.0

CellKey = tuple[Any, ...]


def cell_key(database: str, deployment_id: int, values: dict[str, Any]) -> CellKey:
    return (
        database,
        deployment_id,
        *(values.get(c) for c in ("runtime", "hardware_id", "model_id", "quantization_id", "concurrency")),
    )


@dataclass
class _Cell:
    loaded_at: float
    complete: bool  # holds every run of the cell (as loaded, plus this process's writes since)
    stamps: list[datetime] = field(default_factory=list)  # ascending, parallel to runs
    runs: list[BaselinePoint] = field(default_factory=list)  # what the baseline needs of each run

    def add(self, run: BaselinePoint) -> None:
        assert run.measured_at is not None
        at = bisect.bisect_right(self.stamps, run.measured_at)
        self.stamps.insert(at, run.measured_at)
        self.runs.insert(at, run)
        if len(self.runs) > CELL_ROWS:
            del self.stamps[0], self.runs[0]
            self.complete = False

    def before(self, measured_at: datetime | None, limit: int) -> list[BaselinePoint] | None:
        """The newest ``limit`` runs measured before ``measured_at``, newest first; None when this
        cell cannot know them."""
        end = len(self.runs) if measured_at is None else bisect.bisect_left(self.stamps, measured_at)
        if end < limit and not self.complete:
            return None
        return self.runs[max(0, end - limit) : end][::-1]


class BaselineCache:
    """One process's cells, least recently used first."""

    _cells: OrderedDict[CellKey, _Cell] = OrderedDict()

    @classmethod
    def holds(cls, key: CellKey) -> bool:
        """Whether this process has the cell, loaded less than :data:`TTL_SECONDS` ago."""
        cell = cls._cells.get(key)
        if cell is None:
            return False
        if time.monotonic() - cell.loaded_at > TTL_SECONDS:
            del cls._cells[key]
            return False
        return True

    @classmethod
    def lookup(cls, key: CellKey, measured_at: datetime | None, limit: int) -> list[BaselinePoint] | None:
        """The baseline runs from memory, newest first; None when the cell cannot tell."""
        if not cls.holds(key):
            return None
        cls._cells.move_to_end(key)
        return cls._cells[key].before(measured_at, limit)

    @classmethod
    def store(cls, key: CellKey, newest_first: list[CanonicalRun], *, complete: bool) -> None:
        """Remember a cell as read from the database (its newest runs, newest first)."""
        dated = [baseline_point(r) for r in reversed(newest_first) if r.measured_at is not None]
        cls._cells[key] = _Cell(
            time.monotonic(), complete, [r.measured_at for r in dated if r.measured_at is not None], dated
        )
        cls._cells.move_to_end(key)
        while len(cls._cells) > MAX_CELLS:
            cls._cells.popitem(last=False)

    @classmethod
    def written(cls, key: CellKey, run: CanonicalRun) -> None:
        """A run this process has just committed: cells that hold its cell learn it."""
        cell = cls._cells.get(key)
        if cell is not None and run.measured_at is not None:
            cell.add(baseline_point(run))


def invalidate() -> None:
    """Forget every cell (runs were added or changed without passing through the cache)."""
    BaselineCache._cells.clear()
