"""The format pitfalls of docs/formats.md, asserted by hand against the raw files (the golden files pin
everything else). Each test recomputes the expected value from the tool's own numbers."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from advisor.canonical import CanonicalRun
from advisor.errors import IngestError
from advisor.ingest.base import Input
from advisor.ingest.registry import detect, parse

ROOT = Path(__file__).resolve().parents[2] / "fixtures" / "ingest"


def _raw(rel: str) -> bytes:
    return (ROOT / rel).read_bytes()


def _runs(rel: str) -> tuple[str, list[CanonicalRun]]:
    return parse(Input(_raw(rel), file_name=Path(rel).name))


def _doc(rel: str) -> Any:
    return json.loads(_raw(rel))


@pytest.mark.parametrize(
    ("rel", "colon_key", "format_id"),
    [
        ("vllm_legacy/llmd-exp7-h100-vllm-2replicas-llama31-8b.json", True, "vllm_legacy"),
        (
            "vllm_legacy/gunther520-2024-11-benchmark_serving-per-request-arrays-llama31-8b.json",
            True,
            "vllm_legacy",
        ),
        # Nov 2024: neither goodput key, no `failed`, no `endpoint_type`: still the legacy script.
        ("vllm_legacy/dstack-2024-11-mi300x-405b-1000qps-mostly-failed.json", False, "vllm_legacy"),
        ("vllm_bench/vllm_bench_serve.json", False, "vllm_bench"),
        # Sep 2025 CLI file without `failed`: `endpoint_type` marks it as the new CLI.
        ("vllm_bench/dstack-2025-09-bench-serve-gpt-oss-120b-pd-1p3d-c128.json", False, "vllm_bench"),
    ],
)
def test_legacy_vllm_is_told_apart_by_its_goodput_key(rel: str, colon_key: bool, format_id: str) -> None:
    assert ("request_goodput:" in _doc(rel)) is colon_key
    assert detect(Input(_raw(rel))).format_id == format_id


def test_legacy_arrays_in_seconds_become_milliseconds() -> None:
    sample = _doc("vllm_legacy/vllm_benchmark_serving_legacy.json")
    _, (run,) = _runs("vllm_legacy/edge-ttft-only-summary-arrays-in-seconds.json")
    # The summary-less ITL and TPOT are rebuilt from `itls` (seconds); they must land on the tool's
    # own ms figures from the complete file.
    assert run.metrics.itl_ms.p50 == pytest.approx(sample["median_itl_ms"], rel=1e-9)
    assert run.metrics.itl_ms.mean == pytest.approx(sample["mean_itl_ms"], rel=1e-9)
    assert run.metrics.itl_ms.p99 == pytest.approx(sample["p99_itl_ms"], rel=1e-9)
    # TPOT from gaps is (latency − ttft)/(n − 1) without the final-chunk overhead: within 1 %.
    assert run.metrics.tpot_ms.mean == pytest.approx(sample["mean_tpot_ms"], rel=0.01)
    assert any("computed from the per-request arrays" in n for n in run.source.notes)
    ttfts_ms = [t * 1000 for t in sample["ttfts"]]
    assert run.metrics.ttft_ms.max == pytest.approx(max(ttfts_ms))
    assert run.metrics.ttft_ms.mean == pytest.approx(sample["mean_ttft_ms"])


@pytest.mark.parametrize(
    ("rel", "scale", "raw_key", "field"),
    [
        ("llmperf/llmperf_summary.json", 1000.0, "results_ttft_s_mean", "ttft_ms"),
        ("llmperf/llmperf_summary.json", 1000.0, "results_end_to_end_latency_s_quantiles_p99", "e2e_ms.p99"),
        ("llmperf/llmperf_summary.json", 1000.0, "results_inter_token_latency_s_mean", "e2e_per_token_ms"),
        ("genai_perf/genai_perf_profile_export.json", 1.0, "time_to_first_token.avg", "ttft_ms"),
        (
            "guidellm/guidellm_benchmarks.json",
            1000.0,
            "benchmarks.0.metrics.request_latency.successful.mean",
            "e2e_ms",
        ),
    ],
)
def test_every_unit_is_converted_to_ms(rel: str, scale: float, raw_key: str, field: str) -> None:
    raw: Any = _doc(rel)
    for step in raw_key.split("."):
        raw = raw[int(step)] if step.isdigit() else raw[step]
    _, runs = _runs(rel)
    name, _, stat = field.partition(".")
    assert getattr(getattr(runs[0].metrics, name), stat or "mean") == pytest.approx(raw * scale, rel=1e-12)


FAILED_ONLY = [
    "vllm_bench/vllm-0.25.1-bench-serve-all-requests-failed-opt125m.json",
    "vllm_legacy/edge-all-requests-failed-errors-array.json",
    "llmperf/edge-all-requests-failed.json",
    "inference_perf/edge-stage-all-requests-failed.json",
]


@pytest.mark.parametrize("rel", FAILED_ONLY)
def test_all_failed_run_has_failures_and_no_latency_at_all(rel: str) -> None:
    _, (run,) = _runs(rel)
    m = run.metrics
    assert m.requests_completed == 0
    assert m.requests_failed is not None and m.requests_failed > 0
    for name in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "e2e_per_token_ms"):
        assert getattr(m, name).is_empty(), f"{name} must be absent, not zeros that look like a fast run"
    assert m.decode_tok_s is None and m.prefill_tok_s is None
    assert m.request_throughput_rps is None and m.output_throughput_tok_s is None


def test_all_zero_statistics_of_a_mostly_failed_run_are_dropped() -> None:
    raw = _doc("vllm_legacy/dstack-2024-11-mi300x-405b-1000qps-mostly-failed.json")
    assert raw["mean_ttft_ms"] == 0.0 and raw["completed"] == 17
    _, (run,) = _runs("vllm_legacy/dstack-2024-11-mi300x-405b-1000qps-mostly-failed.json")
    assert run.metrics.requests_completed == 17
    assert run.metrics.requests_failed == sum(1 for e in raw["errors"] if e) == 983
    assert run.metrics.ttft_ms.is_empty() and run.metrics.tpot_ms.is_empty()


def test_guidellm_e2e_per_token_is_never_stored_as_tpot() -> None:
    bench = _doc("guidellm/guidellm_benchmarks.json")["benchmarks"][0]["metrics"]
    _, (run,) = _runs("guidellm/guidellm_benchmarks.json")
    tpot_like = bench["inter_token_latency_ms"]["successful"]
    e2e_per_token = bench["time_per_output_token_ms"]["successful"]
    assert run.metrics.tpot_ms.mean == tpot_like["mean"]
    assert run.metrics.tpot_ms.p99 == tpot_like["percentiles"]["p99"]
    assert run.metrics.tpot_ms.p99_9 == tpot_like["percentiles"]["p999"]
    assert run.metrics.e2e_per_token_ms.mean == e2e_per_token["mean"]
    assert run.metrics.itl_ms.is_empty()
    assert run.metrics.e2e_per_token_ms.mean != run.metrics.tpot_ms.mean
    assert run.metrics.decode_tok_s == pytest.approx(1000 / tpot_like["mean"])


def test_guidellm_yaml_report_reads_median_when_p50_is_missing() -> None:
    rel = "guidellm/jhurlocker-guidellm-0.2-format-llama-3.2-3b-synchronous.yaml"
    doc = yaml.safe_load(_raw(rel))
    ttft = doc["benchmarks"][0]["metrics"]["time_to_first_token_ms"]["successful"]
    assert "p50" not in ttft["percentiles"]
    fmt, (run,) = _runs(rel)
    assert fmt == "guidellm"
    assert run.metrics.ttft_ms.p50 == ttft["median"]
    assert run.workload.concurrency == 1.0  # synchronous


def test_llmperf_string_integers_and_no_tpot() -> None:
    raw = _doc("llmperf/llmperf_summary.json")
    assert isinstance(raw["results_number_input_tokens_min"], str)
    _, (run,) = _runs("llmperf/llmperf_summary.json")
    assert run.workload.prompt_tokens_mean == raw["results_number_input_tokens_mean"]
    assert run.metrics.tpot_ms.is_empty() and run.metrics.itl_ms.is_empty()
    assert run.metrics.request_throughput_rps == pytest.approx(raw["results_num_completed_requests_per_min"] / 60)
    # Not the per-request output ÷ E2E figure, which counts TTFT as decode time.
    assert run.metrics.decode_tok_s != pytest.approx(raw["results_request_output_throughput_token_per_s_mean"])
    e2e = raw["results_end_to_end_latency_s_mean"]
    ttft = raw["results_ttft_s_mean"]
    out = raw["results_number_output_tokens_mean"]
    assert run.metrics.decode_tok_s == pytest.approx((out - 1) / (e2e - ttft))


def _strict_constant(token: str) -> float:
    raise ValueError(f"non-standard JSON constant {token}")


def test_sglang_bare_infinity_is_read_and_each_line_is_a_run() -> None:
    rel = "sglang_bench/sglang_bench_serving.jsonl"
    text = _raw(rel).decode()
    assert '"request_rate": Infinity' in text
    with pytest.raises(ValueError, match="Infinity"):  # what a strict JSON reader does with it
        json.loads(text.splitlines()[0], parse_constant=_strict_constant)
    fmt, runs = _runs(rel)
    assert fmt == "sglang_bench" and len(runs) == 2
    assert all(r.workload.request_rate is None for r in runs)
    assert all(any("Infinity" in n for n in r.source.notes) for r in runs)
    assert [r.workload.concurrency for r in runs] == [8.0, 32.0]


@pytest.mark.parametrize(
    ("rel", "itl_key", "tpot_key"),
    [
        ("aiperf/aiperf_profile_export.json", "inter_chunk_latency", "inter_token_latency"),
        ("genai_perf/genai_perf_profile_export.json", None, "inter_token_latency"),
    ],
)
def test_nvidia_tools_itl_and_tpot(rel: str, itl_key: str | None, tpot_key: str) -> None:
    raw = _doc(rel)
    _, (run,) = _runs(rel)
    assert run.metrics.tpot_ms.mean == raw[tpot_key]["avg"]
    if itl_key is None:
        assert run.metrics.itl_ms.is_empty()
    else:
        assert run.metrics.itl_ms.p99 == raw[itl_key]["p99"]


def test_llmd_report_from_guidellm_swaps_tpot_back() -> None:
    rel = "llmd_report/edge-br-v0.2-guidellm-tpot-is-e2e-per-token.yaml"
    latency = yaml.safe_load(_raw(rel))["results"]["request_performance"]["aggregate"]["latency"]
    _, (run,) = _runs(rel)
    assert run.metrics.e2e_per_token_ms.mean == latency["time_per_output_token"]["mean"]
    assert run.metrics.tpot_ms.mean == latency["inter_token_latency"]["mean"]
    assert run.metrics.itl_ms.is_empty()


def test_llmd_report_keeps_schema_meaning_for_other_tools_and_converts_s_per_token() -> None:
    rel = "llmd_report/edge-br-v0.2-inference-perf-llmd-stage3.yaml"
    latency = yaml.safe_load(_raw(rel))["results"]["request_performance"]["aggregate"]["latency"]
    _, (run,) = _runs(rel)
    assert run.metrics.tpot_ms.p99 == pytest.approx(latency["time_per_output_token"]["p99"] * 1000)
    assert run.metrics.itl_ms.p99 == pytest.approx(latency["inter_token_latency"]["p99"] * 1000)
    assert run.metrics.ttft_ms.p99_9 == pytest.approx(latency["time_to_first_token"]["p99p9"] * 1000)
    assert run.setup.hardware == "NVIDIA-H100-80GB-HBM3" and run.setup.runtime == "vllm"


def test_vllm_metadata_inf_rate_and_naive_date() -> None:
    raw = _doc("vllm_bench/vllm_bench_serve.json")
    _, (run,) = _runs("vllm_bench/vllm_bench_serve.json")
    assert raw["request_rate"] == "inf" and run.workload.request_rate is None
    assert run.labels == {"gpu": "H100-SXM-80GB", "tp": "1", "ci_job": "nightly-perf-4411"}
    assert run.setup.runtime is None  # backend "openai" names the client API, not the server
    assert run.measured_at is not None and run.measured_at.isoformat() == "2025-09-11T14:32:07+00:00"
    assert any("assumed UTC" in n for n in run.source.notes)
    assert run.workload.concurrency == raw["max_concurrency"]
    assert run.metrics.decode_tok_s == pytest.approx(1000 / raw["mean_tpot_ms"])
    assert run.metrics.prefill_tok_s is None  # concurrency 8: TTFT holds queueing


@pytest.mark.parametrize(
    ("mutation", "field"),
    [
        ({"mean_ttft_ms": -1.0}, "mean_ttft_ms"),
        ({"p99_itl_ms": -0.5}, "p99_itl_ms"),
        ({"p99_ttft_ms": 1.0}, "metrics.ttft_ms.p90"),  # p90 above p99: refused by the registry
        ({"completed": -3}, "completed"),
    ],
)
def test_impossible_values_are_refused_with_the_field(mutation: dict[str, float], field: str) -> None:
    doc = _doc("vllm_bench/vllm_bench_serve.json") | mutation
    with pytest.raises(IngestError) as info:
        parse(Input(json.dumps(doc).encode()))
    assert info.value.field == field
    assert info.value.status == 422


def test_sweep_summary_array_and_append_result_give_one_run_per_object() -> None:
    _, array_runs = _runs("vllm_bench/vllm-0.25.1-bench-sweep-summary-opt125m.json")
    _, jsonl_runs = _runs("vllm_bench/edge-append-result-two-runs.jsonl")
    assert len(array_runs) == len(jsonl_runs) == 2
    for a, b in zip(array_runs, jsonl_runs, strict=True):
        assert a.metrics.ttft_ms == b.metrics.ttft_ms
    assert array_runs[0].setup.engine_args == {"max_num_seqs": 4}
    assert [r.labels["run_number"] for r in array_runs] == ["0", "1"]


def test_aiperf_telemetry_names_the_gpu() -> None:
    _, (run,) = _runs("aiperf/wellflat-gptoss20b-vllm-c1-profile_export_aiperf.json")
    assert run.setup.hardware == "NVIDIA A100-SXM4-80GB"
    assert run.setup.gpu_count is None


def test_prefill_is_not_derived_when_ttft_is_slower_than_decode() -> None:
    # gpt-oss reasoning tokens sit inside genai-perf's TTFT: 152 tokens in 2.2 s would be a
    # "prefill" slower than decode, which is physically backwards.
    _, (run,) = _runs("genai_perf/wellflat-gptoss20b-vllm-c1-per_request-key-profile_export_genai_perf.json")
    assert run.workload.concurrency == 1.0
    assert run.metrics.prefill_tok_s is None
    assert any("below the decode speed" in n for n in run.source.notes)
    _, (aiperf_run,) = _runs("aiperf/aiperf-qwen3-0.6b-rtx6000ada-c1-profile_export_aiperf.json")
    assert aiperf_run.metrics.prefill_tok_s == pytest.approx(
        aiperf_run.workload.prompt_tokens_mean / aiperf_run.metrics.ttft_ms.mean * 1000  # type: ignore[operator]
    )
    assert aiperf_run.metrics.prefill_tok_s is not None and math.isfinite(aiperf_run.metrics.prefill_tok_s)
