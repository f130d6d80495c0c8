"""The real files added for issue 14 read with the values their own bytes imply, and the context a
file implies (issue 12, item 3) derived before anyone is asked for it, with a note saying so.

Every expectation here is computed from the fixture itself (its JSON, its YAML, its text), not copied
from the golden files: a parser that drifts fails here even if someone regenerates the goldens.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from advisor.canonical import CanonicalRun
from advisor.ingest.base import Input
from advisor.ingest.registry import detect, parse

INGEST = Path(__file__).resolve().parents[2] / "fixtures" / "ingest"

VLLM_LATENCY_BS1 = (
    INGEST / "vllm_offline" / "cmontemuino-vllm0.9.1-rocm-mi300x-llama31-8b-bench-latency-bs1-in128-out128-fp16.json"
)
VLLM_LATENCY_BS8 = (
    INGEST
    / "vllm_offline"
    / "cmontemuino-vllm0.9.1-rocm-mi300x-llama31-8b-bench-latency-bs8-in128-out128-fp16-slow-first-iter.json"
)
SGLANG_ONE_BATCH = (
    INGEST / "sglang_one_batch" / "sglang-gb200-qwen3-30b-a3b-tp1-in1024-out8192-b1-to-64-bench_one_batch.jsonl"
)
LLMD_WIDE_EP = INGEST / "llmd_report" / "llmd-guide-wide-ep-lws-br-v0.2-inference-perf-c2048-h200-deepseek-r1.yaml"
LLMD_EXAMPLE = INGEST / "llmd_report" / "edge-br-v0.2-upstream-example-kind-in-standardized.yaml"
GENAI_CSV = INGEST / "genai_perf_csv" / "cloudai-ai-dynamo-doc-profile_export_genai_perf-isl3000.csv"
LLAMA_SERVER = INGEST / "llama_server" / "danbev-llama-server-completion-llama2-7b-q4km-jq.json"
VLLM_RUN0 = INGEST / "vllm_bench" / "vllm-0.25.1-bench-sweep-run0-opt125m.json"
VLLM_NO_CAP = INGEST / "vllm_bench" / "edge-no-max-concurrency-peak-in-flight.json"
IPERF_STAGE = INGEST / "inference_perf" / "kubecon25-vllm0.11-h100-batch_size-stage_0_lifecycle_metrics.json"
IPERF_CONCURRENT = INGEST / "inference_perf" / "edge-concurrent-stage-requested-rate-is-count.json"
CONSOLE = INGEST / "bench_console" / "edge-vllm-0.11-failed-peak-e2el-p90-log-prefix.txt"


def _runs(path: Path, expected_format: str) -> list[CanonicalRun]:
    inp = Input(path.read_bytes(), file_name=path.name)
    assert detect(inp).format_id == expected_format
    format_id, runs = parse(inp)
    assert format_id == expected_format
    return runs


def _derived_note(run: CanonicalRun, *words: str) -> str:
    notes = [n for n in run.source.notes if "derived" in n and all(w in n for w in words)]
    assert notes, f"no note says what was derived ({words}): {run.source.notes}"
    return notes[0]


# --- vLLM bench latency --output-json (benchmark_latency.py, vLLM 0.9.1 ROCm, MI300X) ------------------


@pytest.mark.parametrize("path", [VLLM_LATENCY_BS1, VLLM_LATENCY_BS8], ids=["bs1", "bs8"])
def test_vllm_latency_real_file_statistics_match_its_own_numpy_percentiles(path: Path) -> None:
    doc = json.loads(path.read_text("utf-8"))
    (run,) = _runs(path, "vllm_offline")
    seconds = np.array(doc["latencies"], dtype=float)
    e2e = run.metrics.e2e_ms
    assert e2e.mean == pytest.approx(doc["avg_latency"] * 1000.0, rel=1e-12)
    # The tool's own "percentiles" are numpy's linear percentiles of the same list: ours must agree.
    for key, stat in (("50", "p50"), ("75", "p75"), ("90", "p90"), ("99", "p99")):
        assert getattr(e2e, stat) == pytest.approx(doc["percentiles"][key] * 1000.0, rel=1e-9)
    assert e2e.max == pytest.approx(seconds.max() * 1000.0)
    assert run.source.tool == "vllm bench latency"
    # The JSON names neither model nor batch size: nothing is invented, the run says what to pass.
    assert run.setup.model is None and run.workload.concurrency is None
    assert any("pass model, concurrency" in n for n in run.source.notes)


def test_vllm_latency_real_file_keeps_the_slow_first_iteration() -> None:
    doc = json.loads(VLLM_LATENCY_BS8.read_text("utf-8"))
    (run,) = _runs(VLLM_LATENCY_BS8, "vllm_offline")
    assert doc["latencies"][0] > 1.2 * float(np.median(doc["latencies"]))
    # The outlier stays in the distribution: p99 and max carry it, the median does not.
    assert run.metrics.e2e_ms.max == pytest.approx(doc["latencies"][0] * 1000.0)
    assert run.metrics.e2e_ms.p50 == pytest.approx(float(np.median(doc["latencies"])) * 1000.0)


def test_vllm_throughput_real_file_rates_and_counts() -> None:
    path = (
        INGEST / "vllm_offline" / "zhangxinyuehfad-vllm-nightly-throughput_llama8B_tp1-sharegpt-200-dummy-weights.json"
    )
    doc = json.loads(path.read_text("utf-8"))
    (run,) = _runs(path, "vllm_offline")
    assert run.source.tool == "vllm bench throughput"
    m = run.metrics
    assert m.duration_s == doc["elapsed_time"] and m.requests_completed == doc["num_requests"] == 200
    assert m.request_throughput_rps == pytest.approx(doc["num_requests"] / doc["elapsed_time"])
    # tokens_per_second counts prompt and output tokens: stored as the total, never as output.
    assert m.total_throughput_tok_s == pytest.approx(doc["total_num_tokens"] / doc["elapsed_time"])
    assert m.output_throughput_tok_s is None
    assert run.workload.concurrency is None and run.workload.request_rate is None


# --- SGLang bench_one_batch (GB200, Qwen3-30B-A3B) ------------------------------------------------------


def test_sglang_one_batch_real_file_one_run_per_batch_size() -> None:
    records = [json.loads(line) for line in SGLANG_ONE_BATCH.read_text("utf-8").splitlines() if line.strip()]
    runs = _runs(SGLANG_ONE_BATCH, "sglang_one_batch")
    assert [r.workload.concurrency for r in runs] == [float(r["batch_size"]) for r in records] == [1, 4, 16, 32, 64]
    for run, record in zip(runs, records, strict=True):
        m = run.metrics
        assert m.ttft_ms.mean == pytest.approx(record["prefill_latency"] * 1000.0)
        assert m.tpot_ms.p50 == pytest.approx(record["median_decode_latency"] * 1000.0)
        assert m.decode_tok_s == pytest.approx(1.0 / record["median_decode_latency"])
        assert m.output_throughput_tok_s == pytest.approx(record["median_decode_throughput"])
        assert m.e2e_ms.mean == pytest.approx(record["total_latency"] * 1000.0)
        assert run.workload.prompt_tokens_mean == 1024 and run.workload.output_tokens_mean == 8192
        assert run.setup.runtime == "sglang"
    # Batching: the aggregate decode rate rises with the batch while each sequence slows down.
    assert [r.metrics.output_throughput_tok_s or 0 for r in runs] == sorted(
        r.metrics.output_throughput_tok_s or 0 for r in runs
    )
    assert runs[0].metrics.decode_tok_s > runs[-1].metrics.decode_tok_s  # type: ignore[operator]


# --- llm-d Benchmark Report v0.2 printed by the llm-d maintainers (wide-EP, inference-perf) -----------


def test_llmd_real_report_reads_seconds_and_the_closed_loop_concurrency() -> None:
    doc = yaml.safe_load(LLMD_WIDE_EP.read_text("utf-8"))
    (run,) = _runs(LLMD_WIDE_EP, "llmd_report")
    load = doc["scenario"]["load"]["standardized"]
    aggregate = doc["results"]["request_performance"]["aggregate"]
    assert run.workload.concurrency == load["concurrency"] == 2048
    # inference-perf sets a concurrent stage's rate to its request count; llm-d copies it to rate_qps.
    assert load["rate_qps"] == aggregate["requests"]["total"] == 8192
    assert run.workload.request_rate is None
    assert any("rate_qps 8192" in n and "not an offered rate" in n for n in run.source.notes)
    ttft = aggregate["latency"]["time_to_first_token"]
    assert ttft["units"] == "s"
    assert run.metrics.ttft_ms.p50 == pytest.approx(ttft["p50"] * 1000.0)
    assert run.metrics.e2e_ms.mean == pytest.approx(aggregate["latency"]["request_latency"]["mean"] * 1000.0)
    assert run.metrics.request_throughput_rps == pytest.approx(aggregate["throughput"]["request_rate"]["mean"])
    assert run.metrics.requests_completed == 8192 and run.metrics.requests_failed == 0
    # No stack component in this report: no model or GPU is made up.
    assert run.setup.model is None and run.setup.hardware is None


def test_llmd_published_example_reads_the_engine_whose_kind_sits_in_standardized() -> None:
    doc = yaml.safe_load(LLMD_EXAMPLE.read_text("utf-8"))
    engine = doc["scenario"]["stack"][0]
    assert "kind" not in engine["metadata"] and engine["standardized"]["kind"] == "inference_engine"
    (run,) = _runs(LLMD_EXAMPLE, "llmd_report")
    assert run.setup.model == engine["standardized"]["model"]["name"] == "Qwen/Qwen3-0.6B"
    assert run.setup.hardware == engine["standardized"]["accelerator"]["model"]
    assert run.setup.tensor_parallel == engine["standardized"]["accelerator"]["parallelism"]["tp"] == 8
    assert run.setup.runtime == "vllm"


# --- genai-perf CSV printed in NVIDIA/cloudai's AI Dynamo guide --------------------------------------


def test_genai_perf_real_csv_reads_thousands_separators() -> None:
    (run,) = _runs(GENAI_CSV, "genai_perf_csv")
    rows = {line.split(",", 1)[0]: line for line in GENAI_CSV.read_text("utf-8").splitlines()}
    assert '"1,146.31"' in rows["Time To First Token (ms)"]
    assert run.metrics.ttft_ms.mean == pytest.approx(1146.31)
    assert run.metrics.e2e_ms.p99 == pytest.approx(9436.13)
    assert run.workload.prompt_tokens_mean == pytest.approx(3000.05)
    assert run.metrics.request_throughput_rps == pytest.approx(1.50)
    assert run.metrics.requests_completed == 40


# --- llama-server /completion response from a real run ------------------------------------------------


def test_llama_server_real_response() -> None:
    doc = json.loads(LLAMA_SERVER.read_text("utf-8"))
    (run,) = _runs(LLAMA_SERVER, "llama_server")
    timings = doc["timings"]
    assert run.setup.runtime == "llamacpp"
    assert run.setup.model == "llama-2-7b" and run.setup.quantization == "Q4_K_M"
    assert run.metrics.ttft_ms.mean == pytest.approx(timings["prompt_ms"])
    assert run.metrics.decode_tok_s == pytest.approx(timings["predicted_per_second"])
    assert run.metrics.e2e_ms.mean == pytest.approx(timings["prompt_ms"] + timings["predicted_ms"])
    # Six prompt tokens say nothing about prefill speed: no prefill_tok_s from this response.
    assert timings["prompt_n"] == 6 and run.metrics.prefill_tok_s is None


# --- concurrency the file implies (issue 12, item 3) --------------------------------------------------


def test_vllm_bench_serve_without_cap_derives_concurrency_from_peak_in_flight() -> None:
    doc = json.loads(VLLM_NO_CAP.read_text("utf-8"))
    assert doc["max_concurrency"] is None
    (run,) = _runs(VLLM_NO_CAP, "vllm_bench")
    assert run.workload.concurrency == doc["max_concurrent_requests"] == 6
    _derived_note(run, "max_concurrent_requests")


def test_vllm_bench_serve_cap_wins_over_peak_in_flight() -> None:
    doc = json.loads(VLLM_RUN0.read_text("utf-8"))
    assert doc["max_concurrency"] == 2 and doc["max_concurrent_requests"] == 6
    (run,) = _runs(VLLM_RUN0, "vllm_bench")
    assert run.workload.concurrency == 2
    assert not any("max_concurrent_requests" in n for n in run.source.notes)


def test_inference_perf_concurrent_stage_stores_concurrency_not_the_count_as_rate() -> None:
    (run,) = _runs(IPERF_CONCURRENT, "inference_perf")
    assert run.workload.concurrency == 1
    assert run.workload.request_rate is None
    _derived_note(run, "load_summary.concurrency")
    assert any("requested_rate 60" in n for n in run.source.notes)
    # At concurrency 1 the prefill speed may be approximated from TTFT, as for every other tool.
    assert run.metrics.prefill_tok_s == pytest.approx(
        run.workload.prompt_tokens_mean / run.metrics.ttft_ms.mean * 1000.0  # type: ignore[operator]
    )


def test_inference_perf_rate_stage_keeps_its_rate_and_derives_nothing() -> None:
    (run,) = _runs(IPERF_STAGE, "inference_perf")
    assert run.workload.request_rate == 1.0 and run.workload.concurrency is None
    assert not any("load_summary.concurrency" in n for n in run.source.notes)


def test_inference_perf_tpot_that_does_not_add_up_to_its_latencies_is_not_taken() -> None:
    """The KubeCon vLLM stage: mean TPOT 3.48 ms (ITL median 34 µs: about two gaps per token), but
    (483.2 - 33.3) / (62.35 - 1) = 7.33 ms from its own latencies; 288 tok/s would beat the H100's
    bandwidth ceiling (208 tok/s for Llama-3.1-8B BF16). TPOT comes from the latencies; the ITL
    statistics stay as measured (MEAS008 says what they time)."""
    (run,) = _runs(IPERF_STAGE, "inference_perf")
    m = run.metrics
    assert m.tpot_ms.mean == pytest.approx((483.228 - 33.319) / (62.35 - 1), rel=1e-3)
    assert m.tpot_ms.p50 is None
    assert m.itl_ms.p50 == pytest.approx(0.0339, rel=1e-2)
    assert m.decode_tok_s == pytest.approx(1000.0 / m.tpot_ms.mean)
    assert 130 < m.decode_tok_s < 140
    assert any("does not add up to the report's own latencies" in n for n in run.source.notes)
    # The same report with TPOT and ITL at one gap per token keeps them, percentiles included.
    doc = json.loads(IPERF_STAGE.read_bytes())
    for name in ("time_per_output_token", "inter_token_latency"):
        doc["successes"]["latency"][name] = {k: v * 2.1 for k, v in doc["successes"]["latency"][name].items()}
    (kept,) = parse(Input(json.dumps(doc).encode(), file_name=IPERF_STAGE.name))[1]
    assert kept.metrics.tpot_ms.p50 is not None and kept.metrics.itl_ms.mean is not None
    assert kept.metrics.tpot_ms.mean == pytest.approx(3.4776 * 2.1, rel=1e-3)
    assert not any("does not add up" in n for n in kept.source.notes)


def test_bench_console_without_cap_derives_concurrency_from_peak() -> None:
    text = CONSOLE.read_text("utf-8")
    stripped = "\n".join(line for line in text.splitlines() if not line.startswith("Maximum request concurrency"))
    assert stripped != text and "Peak concurrent requests:                16.00" in stripped
    inp = Input(stripped.encode("utf-8"), file_name=CONSOLE.name)
    _, runs = parse(inp, "bench_console")
    (run,) = runs
    assert run.workload.concurrency == 16
    _derived_note(run, "Peak concurrent requests")
    _, capped = parse(Input(text.encode("utf-8"), file_name=CONSOLE.name), "bench_console")
    assert capped[0].workload.concurrency == 16
    assert not any("Peak concurrent requests" in n for n in capped[0].source.notes)


def test_llmd_report_without_engine_component_takes_model_from_the_load_generator_config() -> None:
    doc = yaml.safe_load(LLMD_EXAMPLE.read_text("utf-8"))
    server = doc["scenario"]["load"]["native"]["config"]["server"]
    assert server["model_name"] == "Qwen/Qwen3-0.6B" and server["type"] == "vllm"
    doc["scenario"]["stack"] = [c for c in doc["scenario"]["stack"] if c["standardized"]["kind"] != "inference_engine"]
    inp = Input(yaml.safe_dump(doc).encode("utf-8"), file_name="no-engine.yaml")
    _, runs = parse(inp, "llmd_report")
    (run,) = runs
    assert run.setup.model == "Qwen/Qwen3-0.6B"
    assert run.setup.runtime == "vllm"
    _derived_note(run, "model", "scenario.load.native.config.server.model_name")
    _derived_note(run, "runtime", "server.type")
    # With the engine component present, its own names win and nothing is marked as derived.
    (given,) = _runs(LLMD_EXAMPLE, "llmd_report")
    assert not any("load generator's config" in n for n in given.source.notes)
