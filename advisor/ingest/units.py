"""Units and times as tools write them: durations to milliseconds, epoch and ISO-8601 times to UTC.

Units differ per tool and are never guessed from a number's size (docs/formats.md §9.1): each parser
names the unit its tool documents or writes beside the number.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Final

from advisor.errors import IngestError
from advisor.ingest.values import as_float

__all__ = ["TIME_UNITS_MS", "epoch_to_utc", "iso_to_utc", "to_ms"]

#: Multipliers from a time unit, as tools spell it, to milliseconds.
TIME_UNITS_MS: Final[dict[str, float]] = {
    "ns": 1e-6,
    "us": 1e-3,
    "µs": 1e-3,
    "ms": 1.0,
    "s": 1000.0,
    "sec": 1000.0,
    "secs": 1000.0,
    "second": 1000.0,
    "seconds": 1000.0,
    # per-token latencies (llm-d Benchmark Report); the "/token" is implied by the metric
    "ms/token": 1.0,
    "s/token": 1000.0,
}


def to_ms(value: object, unit: str, field: str) -> float | None:
    """A time in ``unit`` converted to milliseconds. Negative times are rejected: a tool never
    measures one, so the file is corrupt or hand-edited."""
    key = unit.strip()
    factor = TIME_UNITS_MS.get(key, TIME_UNITS_MS.get(key.lower()))
    if factor is None:
        raise IngestError(f"unknown time unit {unit!r}", field=field)
    number = as_float(value, field)
    if number is None:
        return None
    if number < 0:
        raise IngestError(f"a time cannot be negative, got {number}", field=field)
    return number * factor


def epoch_to_utc(value: object, field: str) -> datetime | None:
    """A UTC datetime from epoch seconds; None for missing values."""
    seconds = as_float(value, field)
    if seconds is None:
        return None
    if seconds <= 0:
        raise IngestError(f"not a valid epoch time: {seconds}", field=field)
    try:
        return datetime.fromtimestamp(seconds, tz=UTC)
    except (OverflowError, OSError, ValueError) as exc:
        raise IngestError(f"not a valid epoch time: {seconds}", field=field) from exc


def iso_to_utc(value: object, field: str, notes: list[str]) -> datetime | None:
    """A UTC datetime from an ISO-8601 string or a YAML timestamp. A naive (zone-less) time is the
    tool's local time; the zone is unknown, so it is taken as UTC and a note says so."""
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str) and value.strip():
        try:
            parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError as exc:
            raise IngestError(f"not an ISO-8601 time: {value!r}", field=field) from exc
    else:
        return None
    if parsed.tzinfo is None:
        notes.append(f"{field} has no time zone (tool local time); assumed UTC")
        return parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)
