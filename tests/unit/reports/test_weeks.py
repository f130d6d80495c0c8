from __future__ import annotations

from datetime import UTC, datetime

import pytest

from advisor.reports.weeks import IsoWeek


def test_parse_and_bounds() -> None:
    week = IsoWeek.parse("2026-W48")
    assert str(week) == "2026-W48"
    assert week.start == datetime(2026, 11, 23, tzinfo=UTC)  # a Monday
    assert week.end == datetime(2026, 11, 30, tzinfo=UTC)
    assert IsoWeek.parse("2026w48") == week


def test_year_boundaries() -> None:
    # 2026-12-31 is a Thursday: it belongs to 2026-W53, and 2027-01-03 (a Sunday) too.
    assert str(IsoWeek.of(datetime(2026, 12, 31, 12, tzinfo=UTC))) == "2026-W53"
    assert str(IsoWeek.of(datetime(2027, 1, 3, 23, 59, tzinfo=UTC))) == "2026-W53"
    assert str(IsoWeek.parse("2027-W01").previous()) == "2026-W53"
    assert str(IsoWeek.parse("2026-W53").next()) == "2027-W01"
    assert str(IsoWeek.parse("2026-W01").previous()) == "2025-W52"


def test_last_complete_week() -> None:
    # Tuesday of W49: the last complete week is W48; on Monday 00:00 of W49, W48 has just ended.
    assert str(IsoWeek.last_complete(datetime(2026, 12, 1, 19, tzinfo=UTC))) == "2026-W48"
    assert str(IsoWeek.last_complete(datetime(2026, 11, 30, 0, 0, tzinfo=UTC))) == "2026-W48"
    assert str(IsoWeek.last_complete(datetime(2026, 11, 29, 23, 59, tzinfo=UTC))) == "2026-W47"


@pytest.mark.parametrize("text", ["2026-48", "W48", "2026-W00", "2025-W53", "2026-W54", ""])
def test_bad_weeks_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        IsoWeek.parse(text)
