from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from advisor.rules import Severity, Thresholds
from advisor.rules.severity import damp

ASC = Thresholds.of([10, 20, 30, 40])
DESC = Thresholds.of([0.5, 0.3, 0.2, 0.1], ascending=False)


@pytest.mark.parametrize(
    ("thresholds", "value", "expected"),
    [
        (ASC, None, Severity.NONE),
        (ASC, 9.99, Severity.NONE),
        (ASC, 10, Severity.LOW),
        (ASC, 19.99, Severity.LOW),
        (ASC, 20, Severity.MODERATE),
        (ASC, 30, Severity.SEVERE),
        (ASC, 40, Severity.CRITICAL),
        (ASC, 1e9, Severity.CRITICAL),
        (DESC, 0.51, Severity.NONE),
        (DESC, 0.5, Severity.LOW),
        (DESC, 0.3, Severity.MODERATE),
        (DESC, 0.25, Severity.MODERATE),
        (DESC, 0.2, Severity.SEVERE),
        (DESC, 0.1, Severity.CRITICAL),
        (DESC, 0.0, Severity.CRITICAL),
        (ASC, math.nan, Severity.NONE),
    ],
)
def test_severity_of(thresholds: Thresholds, value: float | None, expected: Severity) -> None:
    assert thresholds.severity_of(value) is expected


@pytest.mark.parametrize(
    ("values", "ascending"),
    [([1, 3, 2, 4], True), ([4, 3, 2, 1], True), ([1, 2, 3, 4], False), ([1, 2, 3], True), ([1, 2, math.inf, 4], True)],
)
def test_rejects_malformed_thresholds(values: list[float], ascending: bool) -> None:
    with pytest.raises(ValueError, match="threshold"):
        Thresholds.of(values, ascending=ascending)


def test_equal_neighbours_collapse_a_level() -> None:
    t = Thresholds.of([0.8, 0.9, 0.98, 1.0])
    assert t.severity_of(1.0) is Severity.CRITICAL
    assert Thresholds.of([1, 1, 2, 2]).severity_of(1) is Severity.MODERATE


@given(st.floats(allow_nan=False, allow_infinity=False), st.floats(allow_nan=False, allow_infinity=False))
def test_ascending_severity_is_monotonic(a: float, b: float) -> None:
    low, high = sorted((a, b))
    assert ASC.severity_of(low) <= ASC.severity_of(high)
    assert DESC.severity_of(low) >= DESC.severity_of(high)


def test_damp_is_a_min_that_ignores_none() -> None:
    assert damp(Severity.CRITICAL, None, Severity.MODERATE, Severity.SEVERE) is Severity.MODERATE
    assert damp(Severity.LOW, Severity.CRITICAL) is Severity.LOW
    assert damp(Severity.SEVERE) is Severity.SEVERE


def test_labels_round_trip() -> None:
    for s in Severity:
        assert Severity.from_label(s.label) is s
        assert Severity.from_label(s.label.upper()) is s
    with pytest.raises(ValueError, match="critical"):
        Severity.from_label("urgent")


def test_describe() -> None:
    assert ASC.describe(Severity.NONE) == "< 10"
    assert ASC.describe(Severity.SEVERE) == ">= 30"
    assert DESC.describe(Severity.CRITICAL) == "<= 0.1"
