"""Durations to milliseconds and tool times to UTC (advisor.ingest.units)."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest

from advisor.errors import IngestError
from advisor.ingest.units import epoch_to_utc, iso_to_utc, to_ms


@pytest.mark.parametrize(
    ("value", "unit", "ms"),
    [
        (1.5, "s", 1500.0),
        (2_000_000, "ns", 2.0),
        (250, "us", 0.25),
        (12.5, "ms", 12.5),
        (0.0071, "s/token", 7.1),
        (3, "sec", 3000.0),
        ("0.5", "s", 500.0),
        (None, "s", None),
    ],
)
def test_to_ms(value: object, unit: str, ms: float | None) -> None:
    result = to_ms(value, unit, "f")
    assert result == (pytest.approx(ms) if ms is not None else None)


@pytest.mark.parametrize(("value", "unit"), [(-1.0, "ms"), (1.0, "minutes"), (float("inf"), "s")])
def test_to_ms_refuses_negative_infinite_and_unknown_units(value: float, unit: str) -> None:
    with pytest.raises(IngestError) as info:
        to_ms(value, unit, "metrics.x")
    assert info.value.field == "metrics.x"


def test_iso_to_utc_notes_a_naive_time() -> None:
    notes: list[str] = []
    assert iso_to_utc("2025-10-03T13:13:39", "start_time", notes) == datetime(2025, 10, 3, 13, 13, 39, tzinfo=UTC)
    assert notes and "assumed UTC" in notes[0]
    notes.clear()
    assert iso_to_utc("2025-10-03T15:13:39+02:00", "start_time", notes) == datetime(2025, 10, 3, 13, 13, 39, tzinfo=UTC)
    assert notes == []


def test_epoch_to_utc_reads_seconds_and_refuses_non_positive_times() -> None:
    assert epoch_to_utc(1_700_000_000, "timestamp") == datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)
    assert epoch_to_utc(None, "timestamp") is None
    for bad in (0, -5, math.inf):
        with pytest.raises(IngestError) as info:
            epoch_to_utc(bad, "timestamp")
        assert info.value.field == "timestamp"
