"""The baseline's arithmetic spelled for speed gives what the plain spelling gives (issue #19).

``_close`` without ``abs``/``max`` calls, and ``build_baseline``'s medians and MADs spelled inline
and its columns by one ``zip`` over each point's ``row``: each is compared with the straightforward
version it replaced, on random inputs (NaN, ±inf, -0.0, None, undated points, ties in time).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.rules.context import (
    BASELINE_METRICS,
    BASELINE_TOLERANCE,
    Baseline,
    BaselinePoint,
    MetricBaseline,
    _close,
    build_baseline,
)

NUMBERS = st.one_of(
    st.none(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1.0, 4.0, 5.0, 256.0, 320.0, 1024.0, math.inf, -math.inf]),
    st.integers(min_value=-(2**40), max_value=2**40),
)


def _close_plain(x: float | None, y: float | None, tolerance: float) -> bool:
    if x is None or y is None:
        return x is None and y is None
    return x == y or abs(x - y) <= tolerance * max(abs(x), abs(y))


@settings(max_examples=3000, deadline=None)
@given(NUMBERS, NUMBERS, st.sampled_from([0.0, 0.25, 0.5, 1.0]))
def test_close_is_the_plain_formula(x: float | None, y: float | None, tolerance: float) -> None:
    assert _close(x, y, tolerance) is _close_plain(x, y, tolerance)


FINITE = st.floats(min_value=-1e12, max_value=1e12, allow_nan=False, allow_infinity=False)


def _build_plain(
    runs: Sequence[BaselinePoint], current: BaselinePoint, max_runs: int, min_runs: int
) -> Baseline | None:
    """``build_baseline`` as it was written before (issue #19, session 7), for points."""
    key, workload, at = current.setup_key, current.workload, current.measured_at
    pool = [
        p
        for p in runs
        if p.setup_key == key
        and all(_close_plain(a, b, BASELINE_TOLERANCE) for a, b in zip(workload, p.workload, strict=True))
        and (at is None or p.measured_at is None or p.measured_at < at)
    ]
    dated = sorted((p for p in pool if p.measured_at is not None), key=lambda p: p.measured_at, reverse=True)
    undated = [p for p in pool if p.measured_at is None]
    chosen = (dated + undated)[:max_runs]
    if len(chosen) < min_runs:
        return None
    columns: dict[str, list[float]] = {path: [] for path in BASELINE_METRICS}
    for p in chosen:
        for path, value in p.values.items():
            if path in columns:
                columns[path].append(value)
    metrics: dict[str, MetricBaseline] = {}
    for path, higher in BASELINE_METRICS.items():
        values = columns[path]
        if len(values) >= min_runs:
            med = statistics.median(values)
            mad = statistics.median([abs(v - med) for v in values])
            metrics[path] = MetricBaseline(med, 1.4826 * mad, len(values), higher)
    return Baseline(len(chosen), metrics)


T0 = datetime(2026, 12, 7, tzinfo=UTC)
KEYS = (("a", "vllm"), ("b", "vllm"))
WORKLOADS = st.tuples(
    st.sampled_from([256.0, 300.0, 1024.0, None, math.nan]),
    st.sampled_from([256.0, 128.0]),
    st.sampled_from([4.0, 4.5, 16.0, None]),
    st.sampled_from([None, 2.0]),
)
METRIC_VALUES = st.dictionaries(
    st.sampled_from([*BASELINE_METRICS, "not_a_baseline_metric"]),
    st.one_of(FINITE, st.sampled_from([10.0, 10.0, 11.0])),
    max_size=len(BASELINE_METRICS),
)


@st.composite
def points(draw: Any) -> BaselinePoint:
    minute = draw(st.one_of(st.none(), st.integers(min_value=0, max_value=30)))
    return BaselinePoint(
        None if minute is None else T0 + timedelta(minutes=minute),
        draw(st.sampled_from(KEYS)),
        draw(WORKLOADS),
        draw(METRIC_VALUES),
    )


@settings(max_examples=1500, deadline=None)
@given(
    st.lists(points(), max_size=40),
    points(),
    st.integers(min_value=1, max_value=25),
    st.integers(min_value=1, max_value=5),
)
def test_build_baseline_is_the_plain_summary(
    runs: list[BaselinePoint], current: BaselinePoint, max_runs: int, min_runs: int
) -> None:
    # build_baseline takes the current run's key and workload from the run itself; a point stands
    # in for it through the module's own key functions, patched to read the point.
    from advisor.rules import context

    saved = context._setup_key, context._workload
    context._setup_key, context._workload = (lambda r: r.setup_key), (lambda r: r.workload)  # type: ignore[assignment]
    try:
        got = build_baseline(runs, current=current, max_runs=max_runs, min_runs=min_runs)  # type: ignore[arg-type]
    finally:
        context._setup_key, context._workload = saved
    want = _build_plain(runs, current, max_runs, min_runs)
    assert repr(got) == repr(want)
    if got is not None and want is not None:
        for path, mb in got.metrics.items():
            assert [math.copysign(1.0, mb.median), math.copysign(1.0, mb.spread)] == [
                math.copysign(1.0, want.metrics[path].median),
                math.copysign(1.0, want.metrics[path].spread),
            ]


def test_a_point_keeps_its_row_in_metric_order() -> None:
    point = BaselinePoint(T0, KEYS[0], (1.0, 1.0, 1.0, None), {"ttft_ms.p99": 3.0, "decode_tok_s": 2.0})
    assert point.row[0] == 2.0 and point.row[list(BASELINE_METRICS).index("ttft_ms.p99")] == 3.0
    assert sum(v is not None for v in point.row) == 2
    assert BaselinePoint(T0, KEYS[0], (1.0, 1.0, 1.0, None), {}).row == (None,) * len(BASELINE_METRICS)
