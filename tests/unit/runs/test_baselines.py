"""The per-process baseline cache answers only what it can know."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from advisor.canonical import CanonicalRun, Setup
from advisor.domain.runs import baselines
from advisor.domain.runs.baselines import CELL_ROWS, BaselineCache, cell_key

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def _run(minute: int) -> CanonicalRun:
    return CanonicalRun(measured_at=T0 + timedelta(minutes=minute), setup=Setup(runtime="vllm"))


def _minutes(runs: list[Any] | None) -> list[int] | None:
    if runs is None:
        return None
    return [int((r.measured_at - T0).total_seconds() // 60) for r in runs if r.measured_at is not None]


KEY = cell_key("sqlite://test", 1, {"runtime": "vllm", "hardware_id": "nvidia-a10g", "concurrency": 4})


@pytest.fixture(autouse=True)
def _empty() -> Iterator[None]:
    baselines.invalidate()
    yield
    baselines.invalidate()


def test_a_complete_cell_answers_any_time() -> None:
    BaselineCache.store(KEY, [_run(m) for m in (30, 20, 10)], complete=True)  # newest first, as queried
    assert _minutes(BaselineCache.lookup(KEY, T0 + timedelta(minutes=25), 20)) == [20, 10]
    assert _minutes(BaselineCache.lookup(KEY, T0, 20)) == []  # nothing before: an empty baseline, known
    assert _minutes(BaselineCache.lookup(KEY, None, 2)) == [30, 20]


def test_an_incomplete_cell_answers_only_within_what_it_holds() -> None:
    BaselineCache.store(KEY, [_run(m) for m in range(100, 60, -1)], complete=False)  # the newest 40 of more
    assert _minutes(BaselineCache.lookup(KEY, T0 + timedelta(minutes=200), 20)) == list(range(100, 80, -1))
    assert BaselineCache.lookup(KEY, T0 + timedelta(minutes=70), 20) is None  # older runs may exist: ask the db


def test_written_runs_join_their_cell_and_old_ones_fall_out() -> None:
    BaselineCache.store(KEY, [_run(1)], complete=True)
    for m in range(2, CELL_ROWS + 3):
        BaselineCache.written(KEY, _run(m))
    got = _minutes(BaselineCache.lookup(KEY, None, CELL_ROWS + 10))
    assert got is None  # trimmed to CELL_ROWS: no longer complete, cannot give more than it holds
    assert _minutes(BaselineCache.lookup(KEY, None, 3)) == [CELL_ROWS + 2, CELL_ROWS + 1, CELL_ROWS]
    BaselineCache.written(KEY, _run(-5))  # an old run is kept in order, then trimmed away
    assert -5 not in (_minutes(BaselineCache.lookup(KEY, None, CELL_ROWS)) or [])


def test_a_run_written_to_an_unknown_cell_is_not_cached() -> None:
    BaselineCache.written(KEY, _run(1))
    assert not BaselineCache.holds(KEY)


def test_cells_expire_so_other_workers_writes_are_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    monkeypatch.setattr(baselines.time, "monotonic", lambda: now[0])
    BaselineCache.store(KEY, [_run(1)], complete=True)
    now[0] += baselines.TTL_SECONDS / 2
    assert BaselineCache.holds(KEY)
    now[0] += baselines.TTL_SECONDS
    assert not BaselineCache.holds(KEY)
    assert BaselineCache.lookup(KEY, None, 20) is None


def test_the_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(baselines, "MAX_CELLS", 3)
    keys = [cell_key("db", i, {}) for i in range(5)]
    for key in keys:
        BaselineCache.store(key, [_run(1)], complete=True)
    assert [BaselineCache.holds(k) for k in keys] == [False, False, True, True, True]
