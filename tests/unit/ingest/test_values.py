"""Tolerant reading of JSON/YAML values (advisor.ingest.values)."""

from __future__ import annotations

import math

import pytest

from advisor.errors import IngestError
from advisor.ingest.values import as_dict, as_float, as_int, as_list, dig


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("931", 931.0),
        (" 12.5 ", 12.5),
        (7, 7.0),
        (True, None),
        ("abc", None),
        (None, None),
        (float("nan"), None),
    ],
)
def test_as_float_reads_string_typed_numbers(value: object, expected: float | None) -> None:
    assert as_float(value) == expected


def test_as_float_infinity_only_when_allowed() -> None:
    assert as_float("inf", allow_inf=True) == math.inf
    with pytest.raises(IngestError):
        as_float("inf", "request_rate")


@pytest.mark.parametrize(("value", "expected"), [("931", 931), (12.0, 12), (12.5, None), ("x", None)])
def test_as_int(value: object, expected: int | None) -> None:
    assert as_int(value) == expected


def test_dig_follows_keys_and_indexes_and_stops_at_a_missing_step() -> None:
    doc = {"a": [{"b": 1}, {"b": 2}]}
    assert dig(doc, "a", -1, "b") == 2
    assert dig(doc, "a", 5, "b") is None
    assert dig(doc, "a", "b") is None
    assert dig(None, "a") is None


def test_as_dict_and_as_list_read_a_drifted_schema_as_empty() -> None:
    assert as_dict({"k": 1}) == {"k": 1}
    assert as_dict([1]) == {}
    assert as_list([1]) == [1]
    assert as_list({"k": 1}) == []
