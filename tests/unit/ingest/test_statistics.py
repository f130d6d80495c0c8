"""The one summary of raw values (advisor.ingest.statistics), checked against numpy, whose
``np.mean``/``np.std``/``np.percentile`` it must reproduce to the last bit."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.canonical import Percentiles
from advisor.client.measure import percentiles
from advisor.ingest.statistics import QUANTILES, distribution, mean_of, percentile, summarize

# Latencies in ms from sub-microsecond to hours, in any order, with repeats; sizes cross numpy's
# pairwise-summation thresholds (8 and 128 values).
VALUES = st.lists(
    st.floats(min_value=0, max_value=1e7, allow_nan=False, allow_infinity=False), min_size=1, max_size=300
)


@settings(max_examples=200, deadline=None)
@given(VALUES)
def test_summary_is_numpys_to_the_last_bit(values: list[float]) -> None:
    summary = summarize(values)
    array = np.asarray(values, dtype=float)
    assert summary.mean == float(np.mean(array))
    assert summary.std == float(np.std(array))
    assert summary.min == float(np.min(array))
    assert summary.max == float(np.max(array))
    computed = np.percentile(array, [q for _, q in QUANTILES])
    for (key, _), expected in zip(QUANTILES, computed, strict=True):
        assert getattr(summary, key) == float(expected), key


@settings(max_examples=100, deadline=None)
@given(VALUES, st.floats(min_value=0, max_value=100))
def test_percentile_matches_numpy_at_any_rank(values: list[float], q: float) -> None:
    assert percentile(sorted(values), q) == float(np.percentile(values, q))


@settings(max_examples=100, deadline=None)
@given(VALUES)
def test_summary_is_ordered(values: list[float]) -> None:
    p = summarize(values)
    ordered = [p.min, p.p25, p.p50, p.p75, p.p90, p.p95, p.p99, p.p99_9, p.max]
    assert all(a is not None and b is not None and a <= b for a, b in itertools.pairwise(ordered))


def test_linear_interpolation_between_closest_ranks() -> None:
    # Ranks 0..3 hold 10, 20, 30, 40: the 50th percentile sits at rank 1.5, the 90th at rank 2.7.
    summary = summarize([40.0, 10.0, 30.0, 20.0])
    assert summary.p50 == 25.0
    assert summary.p90 == pytest.approx(37.0)
    assert summary.mean == 25.0
    assert summary.std == pytest.approx(math.sqrt(125.0))


def test_no_values_give_an_empty_summary_and_bad_values_are_refused() -> None:
    assert summarize([]) == Percentiles()
    assert mean_of([]) is None
    with pytest.raises(ValueError, match="finite"):
        summarize([1.0, math.inf])
    with pytest.raises(ValueError, match=r"0\.\.100"):
        percentile([1.0], 101.0)


def test_one_response_gives_only_its_mean() -> None:
    assert distribution([12.5]) == Percentiles(mean=12.5)
    assert distribution([1.0, 3.0]).p50 == 2.0


@settings(max_examples=50, deadline=None)
@given(VALUES)
def test_measure_percentiles_is_the_shared_summary(values: list[float]) -> None:
    summary = summarize(values)
    assert percentiles(values) == {
        "mean": summary.mean,
        "min": summary.min,
        "p50": summary.p50,
        "p90": summary.p90,
        "p99": summary.p99,
        "max": summary.max,
    }
    assert percentiles([]) == {}
