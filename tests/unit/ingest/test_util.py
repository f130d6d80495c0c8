"""The shared parser helpers in advisor.ingest._util, table-driven."""

from __future__ import annotations

import itertools
import math
from datetime import UTC, datetime

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.canonical import Metrics, Percentiles, Workload
from advisor.errors import IngestError
from advisor.ingest import _util


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
    assert _util.canonical_percentile_key(name) == key


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
    result = _util.to_ms(value, unit, "f")
    assert result == (pytest.approx(ms) if ms is not None else None)


@pytest.mark.parametrize(("value", "unit"), [(-1.0, "ms"), (1.0, "minutes"), (float("inf"), "s")])
def test_to_ms_refuses_negative_infinite_and_unknown_units(value: float, unit: str) -> None:
    with pytest.raises(IngestError) as info:
        _util.to_ms(value, unit, "metrics.x")
    assert info.value.field == "metrics.x"


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
    assert _util.as_float(value) == expected


def test_as_float_infinity_only_when_allowed() -> None:
    assert _util.as_float("inf", allow_inf=True) == math.inf
    with pytest.raises(IngestError):
        _util.as_float("inf", "request_rate")


@pytest.mark.parametrize(("value", "expected"), [("931", 931), (12.0, 12), (12.5, None), ("x", None)])
def test_as_int(value: object, expected: int | None) -> None:
    assert _util.as_int(value) == expected


@pytest.mark.parametrize(
    ("backend", "runtime"),
    [
        ("vllm", "vllm"),
        ("openai", None),
        ("openai-chat", None),
        ("sglang-oai", "sglang"),
        ("tgi", "tgi"),
        ("tensorrt-llm", "trtllm"),
        ("lmdeploy", "other"),
        (None, None),
    ],
)
def test_runtime_from_backend(backend: str | None, runtime: str | None) -> None:
    assert _util.runtime_from_backend(backend) == runtime


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(min_value=0, max_value=1e5, allow_nan=False), min_size=1, max_size=50))
def test_percentiles_from_values_match_numpy_and_are_ordered(values: list[float]) -> None:
    p = _util.percentiles_from_values(values)
    assert p.p99 == pytest.approx(float(np.percentile(values, 99)))
    assert p.mean == pytest.approx(float(np.mean(values)))
    ordered = [p.min, p.p25, p.p50, p.p75, p.p90, p.p95, p.p99, p.p99_9, p.max]
    assert all(a is not None and b is not None and a <= b * (1 + 1e-12) + 1e-12 for a, b in itertools.pairwise(ordered))


def test_percentiles_from_mapping_prefers_explicit_p50_and_drops_all_zero_sets() -> None:
    p = _util.percentiles_from_mapping({"median": 5.0, "p50": 4.0, "avg": 6.0}, unit="ms", field="x")
    assert p == Percentiles(mean=6.0, p50=4.0)
    zeros = {"mean": 0.0, "median": 0.0, "percentiles": {"p99": 0.0}}
    assert _util.percentiles_from_mapping(zeros, unit="ms", field="x", zero_is_missing=True).is_empty()
    assert _util.percentiles_from_mapping(zeros, unit="ms", field="x").p99 == 0.0


def test_iso_to_utc_notes_a_naive_time() -> None:
    notes: list[str] = []
    assert _util.iso_to_utc("2025-10-03T13:13:39", "start_time", notes) == datetime(2025, 10, 3, 13, 13, 39, tzinfo=UTC)
    assert notes and "assumed UTC" in notes[0]
    notes.clear()
    assert _util.iso_to_utc("2025-10-03T15:13:39+02:00", "start_time", notes) == datetime(
        2025, 10, 3, 13, 13, 39, tzinfo=UTC
    )
    assert notes == []


@pytest.mark.parametrize(
    ("concurrency", "ttft", "decode", "expected"),
    [
        (1.0, 100.0, 50.0, 5120.0),  # 512 tokens in 100 ms
        (8.0, 100.0, 50.0, None),  # queueing inside TTFT
        (None, 100.0, 50.0, None),  # unknown concurrency
        (1.0, 20000.0, 50.0, None),  # 25.6 tok/s "prefill" below decode: TTFT holds something else
    ],
)
def test_prefill_from_ttft_only_when_it_means_prefill(
    concurrency: float | None, ttft: float, decode: float, expected: float | None
) -> None:
    metrics = Metrics(ttft_ms=Percentiles(mean=ttft), decode_tok_s=decode)
    notes: list[str] = []
    _util.prefill_from_ttft(metrics, Workload(concurrency=concurrency, prompt_tokens_mean=512.0), notes)
    assert metrics.prefill_tok_s == (pytest.approx(expected) if expected is not None else None)
    assert len(notes) == 1


def test_decode_from_tpot() -> None:
    metrics = Metrics(tpot_ms=Percentiles(mean=8.0))
    _util.decode_from_tpot(metrics)
    assert metrics.decode_tok_s == 125.0
    empty = Metrics()
    _util.decode_from_tpot(empty)
    assert empty.decode_tok_s is None
