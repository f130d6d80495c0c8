"""combine(): a client benchmark plus the server telemetry scraped around it."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from advisor.canonical import CanonicalRun, Percentiles, run_to_builtins
from advisor.errors import Conflict
from advisor.ingest.base import Input
from advisor.ingest.combine import combine
from advisor.ingest.registry import parse

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "ingest"


def load(path: str, format_id: str) -> CanonicalRun:
    return parse(Input((FIXTURES / path).read_bytes()), format_id)[1][0]


@pytest.fixture
def bench() -> CanonicalRun:
    return load("vllm_bench/vllm_bench_serve.json", "vllm_bench")


@pytest.fixture
def telemetry() -> CanonicalRun:
    return load("prometheus/edge-vllm-before-during-after-scraped-at.prom", "prometheus")


def test_benchmark_figures_stay_and_server_only_figures_are_filled(
    bench: CanonicalRun, telemetry: CanonicalRun
) -> None:
    out = combine(bench, telemetry)
    # What the client measured is kept, even where the server has its own (different) figure.
    assert out.metrics.ttft_ms == bench.metrics.ttft_ms
    assert out.metrics.ttft_ms != telemetry.metrics.ttft_ms
    assert out.metrics.itl_ms == bench.metrics.itl_ms
    assert out.metrics.decode_tok_s == bench.metrics.decode_tok_s
    assert out.workload.concurrency == bench.workload.concurrency
    assert out.measured_at == bench.measured_at
    # What only the server saw comes from the telemetry.
    for name in (
        "queue_waiting_mean",
        "queue_waiting_max",
        "running_mean",
        "kv_cache_usage_mean",
        "kv_cache_usage_max",
        "prefix_cache_hit_rate",
        "preemptions",
        "prefill_tok_s",
    ):
        assert getattr(out.metrics, name) == getattr(telemetry.metrics, name) is not None
    assert out.metrics.queue_ms == telemetry.metrics.queue_ms  # the benchmark had none
    # Setup hints the benchmark lacked.
    assert bench.setup.runtime is None
    assert out.setup.runtime == "vllm"
    assert out.setup.kv_cache_dtype == "fp8"
    assert out.setup.engine_args["enable_prefix_caching"] is True
    assert any(n.startswith("telemetry: ") for n in out.source.notes)
    assert out.source.format == "vllm_bench"


def test_inputs_are_not_modified(bench: CanonicalRun, telemetry: CanonicalRun) -> None:
    before = (run_to_builtins(copy.deepcopy(bench)), run_to_builtins(copy.deepcopy(telemetry)))
    combine(bench, telemetry)
    assert (run_to_builtins(bench), run_to_builtins(telemetry)) == before


def test_an_empty_latency_distribution_is_taken_from_the_server(bench: CanonicalRun, telemetry: CanonicalRun) -> None:
    bench.metrics.itl_ms = Percentiles()
    out = combine(bench, telemetry)
    assert out.metrics.itl_ms == telemetry.metrics.itl_ms
    assert any("itl_ms from the server's histogram" in n for n in out.source.notes)


@pytest.mark.parametrize(
    ("field", "bench_value"),
    [("model", "Qwen/Qwen2.5-7B-Instruct"), ("runtime", "sglang"), ("kv_cache_dtype", "auto")],
)
def test_a_contradiction_names_both_values(
    bench: CanonicalRun, telemetry: CanonicalRun, field: str, bench_value: str
) -> None:
    setattr(bench.setup, field, bench_value)
    server_value = getattr(telemetry.setup, field)
    assert server_value is not None
    with pytest.raises(Conflict) as info:
        combine(bench, telemetry)
    assert info.value.field == f"setup.{field}"
    assert bench_value in info.value.detail
    assert str(server_value) in info.value.detail


def test_conflicting_engine_args(bench: CanonicalRun, telemetry: CanonicalRun) -> None:
    bench.setup.engine_args["gpu_memory_utilization"] = 0.95
    with pytest.raises(Conflict, match=r"0\.95.*0\.9"):
        combine(bench, telemetry)


@pytest.mark.parametrize(
    "name",
    ["Llama-3.1-8B-Instruct", "META-LLAMA/llama-3.1-8b-instruct", "meta-llama/Llama-3.1-8B-Instruct"],
)
def test_the_same_model_spelt_differently_is_no_conflict(
    bench: CanonicalRun, telemetry: CanonicalRun, name: str
) -> None:
    bench.setup.model = name
    assert combine(bench, telemetry).setup.model == name
