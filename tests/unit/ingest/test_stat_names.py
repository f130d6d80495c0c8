"""Tools' statistic names read into canonical percentile sets (advisor.ingest.stat_names)."""

from __future__ import annotations

import pytest

from advisor.canonical import Percentiles
from advisor.ingest.stat_names import canonical_percentile_key, percentiles_from_mapping


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("p99", "p99"),
        ("99", "p99"),
        ("median", "p50"),
        ("p50", "p50"),
        ("p99.9", "p99_9"),
        ("p99p9", "p99_9"),  # llm-d
        ("p999", "p99_9"),  # guidellm's 99.9th
        ("p99_9", "p99_9"),
        ("p001", None),  # guidellm's 0.1th
        ("p01", None),
        ("p0.1", None),  # inference-perf
        ("p1", None),
        ("p10", None),
        ("p80", None),
        ("mean", None),
    ],
)
def test_canonical_percentile_key(name: str, key: str | None) -> None:
    assert canonical_percentile_key(name) == key


def test_percentiles_from_mapping_prefers_explicit_p50_and_drops_all_zero_sets() -> None:
    p = percentiles_from_mapping({"median": 5.0, "p50": 4.0, "avg": 6.0}, unit="ms", field="x")
    assert p == Percentiles(mean=6.0, p50=4.0)
    zeros = {"mean": 0.0, "median": 0.0, "percentiles": {"p99": 0.0}}
    assert percentiles_from_mapping(zeros, unit="ms", field="x", zero_is_missing=True).is_empty()
    assert percentiles_from_mapping(zeros, unit="ms", field="x").p99 == 0.0
