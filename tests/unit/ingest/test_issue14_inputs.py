"""The inputs and refusals of issue 14: side files, forced formats, logs, the new parsers' values
checked against the numbers their files imply (not against their golden files)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from advisor.errors import IngestError, MalformedInput, UnsupportedFormat
from advisor.ingest.base import Input
from advisor.ingest.formats.llama_bench import split_model_filename
from advisor.ingest.registry import detect, parse
from advisor.ingest.submission import parse_submission

ROOT = Path(__file__).resolve().parents[2] / "fixtures"
INGEST = ROOT / "ingest"
SIDE = ROOT / "side_files"


def _read(path: Path) -> Input:
    return Input(path.read_bytes(), file_name=path.name)


@pytest.mark.parametrize(
    ("name", "side", "instead"),
    [
        (
            "aiperf-qwen3-0.6b-rtx6000ada-c1-gpu_telemetry_export.jsonl",
            "aiperf_gpu_telemetry",
            "profile_export_aiperf.json",
        ),
        (
            "kubecon25-vllm0.11-h100-batch_size-stage_0_prometheus_metrics.json",
            "inference_perf_prometheus",
            "_lifecycle_metrics.json",
        ),
        (
            "kubecon25-vllm0.11-h100-batch_size-summary_prometheus_metrics.json",
            "inference_perf_prometheus",
            "summary_lifecycle_metrics.json",
        ),
        ("genai_perf_profile_export_raw_abridged.json", "genai_perf_raw", "profile_export_genai_perf.json"),
        (
            "perf_analyzer-repo-gpt2-triton-vllm-analyze-checkpoint-2024-12.json",
            "genai_perf_checkpoint",
            "analyze_export_genai_perf.csv",
        ),
    ],
)
def test_a_side_file_alone_is_a_422_naming_the_file_to_send(name: str, side: str, instead: str) -> None:
    with pytest.raises(IngestError) as info:
        parse(_read(SIDE / name))
    assert info.value.status == 422
    assert info.value.extra["side_file"] == side
    assert instead in info.value.detail


def test_a_side_file_beside_its_benchmark_in_a_wrapper_is_kept_and_noted() -> None:
    wrapper = {
        "files": [
            {
                "name": "profile_export_aiperf.json",
                "content": (
                    INGEST / "aiperf" / "aiperf-qwen3-0.6b-rtx6000ada-c1-profile_export_aiperf.json"
                ).read_text(),
            },
            {
                "name": "gpu_telemetry_export.jsonl",
                "content": (SIDE / "aiperf-qwen3-0.6b-rtx6000ada-c1-gpu_telemetry_export.jsonl").read_text(),
            },
            {"name": "notes.txt", "content": "run on a quiet node", "role": "side"},
        ]
    }
    parsed = parse_submission(json.dumps(wrapper).encode(), content_type="application/json", format_id="auto")
    assert parsed.format_id == "aiperf"
    assert len(parsed.runs) == 1
    notes = parsed.runs[0].source.notes
    assert (
        "side file gpu_telemetry_export.jsonl (aiperf's gpu_telemetry_export.jsonl (raw DCGM samples)) kept with the submission, not read"
        in notes
    )
    assert "side file notes.txt (a side file) kept with the submission, not read" in notes


def test_a_wrapper_of_side_files_only_says_so() -> None:
    wrapper = {
        "files": [
            {
                "name": "t.jsonl",
                "content": (SIDE / "aiperf-qwen3-0.6b-rtx6000ada-c1-gpu_telemetry_export.jsonl").read_text(),
            }
        ]
    }
    with pytest.raises(Exception) as info:
        parse_submission(json.dumps(wrapper).encode(), content_type="application/json", format_id="auto")
    assert "only side files" in str(info.value)


def test_an_ollama_embedding_response_is_refused_as_no_benchmark() -> None:
    body = {
        "model": "all-minilm",
        "embeddings": [[0.01, -0.02, 0.03]],
        "total_duration": 14143917,
        "load_duration": 1019500,
        "prompt_eval_count": 8,
    }
    with pytest.raises(IngestError) as info:
        parse(Input(json.dumps(body).encode()))
    assert info.value.status == 422
    assert info.value.detail.startswith("this is an Ollama /api/embed response")
    assert "not a benchmark" in info.value.detail


def test_forcing_a_format_on_another_formats_file_says_what_it_looks_like() -> None:
    inp = _read(INGEST / "vllm_bench" / "vllm_bench_serve.json")
    with pytest.raises(IngestError) as info:
        parse(inp, "llmperf")
    assert info.value.field == "format"
    assert "it looks like vLLM `vllm bench serve --save-result` JSON" in info.value.detail
    assert "pass ?format=vllm_bench" in info.value.detail


def test_forcing_a_json_format_on_plain_text_says_it_is_text() -> None:
    with pytest.raises(IngestError) as info:
        parse(Input(b"hello\nthis is not a benchmark\n"), "aiperf")
    assert "it is plain text, not JSON" in info.value.detail


def test_a_text_log_starting_with_a_bracket_is_never_called_malformed_json() -> None:
    log = b"[TensorRT-LLM][INFO] Engine version 0.12.0\n[TensorRT-LLM][INFO] Loaded engine\nsomething else\n"
    with pytest.raises(UnsupportedFormat) as info:
        detect(Input(log))
    assert "JSON" not in info.value.detail
    with pytest.raises(MalformedInput):  # truncated JSON still is
        detect(Input(b'{"a": 1,\n "b": [1, 2'))


def test_the_trtllm_log_is_read_not_refused() -> None:
    fmt, runs = parse(_read(INGEST / "trtllm_bench" / "trtllm-docs-0.17-throughput-trt-engine-llama31-8b-fp8.log"))
    assert fmt == "trtllm_bench"
    run = runs[0]
    # 3000 requests × 128 output tokens in 13525.6862 ms is the printed "Token Throughput".
    assert run.metrics.output_throughput_tok_s == pytest.approx(3000 * 128 / 13.5256862, rel=1e-6)
    assert run.metrics.duration_s == pytest.approx(13.5256862)
    assert run.setup.runtime_version == "0.17.0"
    assert run.setup.model == "meta-llama/Llama-3.1-8B"


def test_aiperf_csv_gives_the_json_twins_numbers() -> None:
    _, (from_csv,) = parse(_read(INGEST / "aiperf_csv" / "aiperf-gptoss20b-c100-cancel10-profile_export_aiperf.csv"))
    _, (from_json,) = parse(_read(INGEST / "aiperf" / "aiperf-gptoss20b-c100-cancel10-profile_export_aiperf.json"))
    for field in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
        csv_p50 = getattr(from_csv.metrics, field).p50
        json_p50 = getattr(from_json.metrics, field).p50
        assert csv_p50 == pytest.approx(json_p50, abs=0.005), field  # the CSV rounds to two decimals
    assert from_csv.metrics.requests_completed == from_json.metrics.requests_completed == 89
    assert from_csv.metrics.requests_failed == 11


def test_genai_perf_csv_thousands_separators_are_numbers() -> None:
    _, (run,) = parse(_read(INGEST / "genai_perf_csv" / "edge-thousands-separators-profile_export_genai_perf.csv"))
    assert run.metrics.ttft_ms.mean == pytest.approx(1146.31)
    assert run.metrics.e2e_ms.max == pytest.approx(9608.72)
    assert run.workload.prompt_tokens_mean == pytest.approx(3000.05)
    assert run.metrics.requests_completed == 40


def test_aiperf_records_leave_the_warmup_out_and_count_the_cancelled_request() -> None:
    path = INGEST / "aiperf_records" / "edge-warmup-record-and-cancelled-request.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    profiling = [r for r in records[1:] if not r["error"]]
    ttfts = [r["metrics"]["time_to_first_token"]["value"] for r in profiling]
    _, (run,) = parse(_read(path))
    assert run.metrics.ttft_ms.mean == pytest.approx(float(np.mean(ttfts)))
    assert run.metrics.ttft_ms.p50 == pytest.approx(float(np.percentile(ttfts, 50)))
    assert run.metrics.requests_completed == 3
    # The cancelled record is aiperf's --request-cancellation-rate at work: sent, not failed (issue 12).
    assert run.metrics.requests_failed == 0
    assert run.workload.num_requests == 4  # the warm-up is no request of the run
    assert run.source.notes[0] == "1 warm-up record(s) left out (benchmark_phase = warmup)"
    assert run.source.notes[1].startswith("1 request(s) cancelled on purpose (was_cancelled")


def test_llmperf_individual_responses_percentiles_are_numpys() -> None:
    path = INGEST / "llmperf_responses" / "leaderboard-groq-llama2-70b_550_150_individual_responses.json"
    rows = json.loads(path.read_text())
    ttft_ms = [r["ttft_s"] * 1000 for r in rows]
    _, (run,) = parse(_read(path))
    assert run.metrics.ttft_ms.p99 == pytest.approx(float(np.percentile(ttft_ms, 99)))
    assert run.metrics.e2e_per_token_ms.mean == pytest.approx(
        float(np.mean([r["inter_token_latency_s"] * 1000 for r in rows]))
    )
    assert run.metrics.tpot_ms.is_empty()  # llmperf's "inter token latency" includes TTFT


def test_llama_bench_markdown_depth_rows_and_measured_bits_per_weight() -> None:
    _, runs = parse(_read(INGEST / "llama_bench" / "llamacpp-readme-qwen2-7b-q4km-cuda-depth-d512.md.txt"))
    assert [r.labels["test"] for r in runs] == ["pp512", "tg128", "pp512 @ d512", "tg128 @ d512"]
    assert runs[3].workload.kv_depth_tokens == 512
    assert runs[3].metrics.decode_tok_s == pytest.approx(116.71)
    assert runs[0].metrics.prefill_tok_s == pytest.approx(7340.20)
    # 4.36 GiB × 8 / 7.62 B parameters.
    assert runs[0].labels["bits_per_weight"] == f"{4.36 * 2**30 * 8 / 7.62e9:.3f}"
    assert runs[0].setup.quantization == "Q4_K_M"


def test_llama_batched_bench_rows_are_runs_at_their_batch_size() -> None:
    _, runs = parse(
        _read(INGEST / "llama_batched_bench" / "llamacpp-readme-llama-7b-batched-bench-sample-results.md.txt")
    )
    assert len(runs) == 12
    b32 = runs[5]
    assert b32.workload.concurrency == 32
    assert b32.metrics.decode_tok_s == pytest.approx(128 / 8.801)  # per sequence: TG / T_TG
    assert b32.metrics.output_throughput_tok_s == pytest.approx(465.40)  # S_TG as printed
    assert b32.metrics.ttft_ms.mean == pytest.approx(3408.0)


def test_console_summary_blocks_keep_their_own_settings() -> None:
    _, runs = parse(
        _read(INGEST / "bench_console" / "yiliu30-vllm-fork-pp-local-test-res-two-blocks-hash-prefixed.txt")
    )
    assert [r.metrics.duration_s for r in runs] == [150.87, 198.68]
    assert [r.workload.concurrency for r in runs] == [32.0, 32.0]
    assert runs[1].metrics.tpot_ms.mean == pytest.approx(93.85)
    assert runs[0].workload.prompt_tokens_mean == pytest.approx(65536 / 32)


def test_vllm_offline_latency_is_the_batch_latency_in_ms() -> None:
    path = INGEST / "vllm_offline" / "edge-bench-latency-output-json-bs8.json"
    doc = json.loads(path.read_text())
    _, (run,) = parse(_read(path))
    assert run.metrics.e2e_ms.mean == pytest.approx(doc["avg_latency"] * 1000)
    assert run.metrics.e2e_ms.p90 == pytest.approx(doc["percentiles"]["90"] * 1000)
    _, (twin,) = parse(_read(INGEST / "vllm_offline" / "edge-bench-latency-bs8.pytorch.json"))
    assert twin.workload.concurrency == 8
    assert twin.setup.model == "meta-llama/Llama-3.1-8B-Instruct"


def test_vllm_v1_prompt_tokens_by_source_give_the_hit_rate_and_the_transfer() -> None:
    scrape = (
        "# TYPE vllm:prompt_tokens_by_source counter\n"
        'vllm:prompt_tokens_by_source_total{engine="0",model_name="m",source="local_compute"} 600\n'
        'vllm:prompt_tokens_by_source_total{engine="0",model_name="m",source="local_cache_hit"} 300\n'
        'vllm:prompt_tokens_by_source_total{engine="0",model_name="m",source="external_kv_transfer"} 100\n'
        "# TYPE vllm:num_requests_waiting_by_reason gauge\n"
        'vllm:num_requests_waiting_by_reason{engine="0",model_name="m",reason="capacity"} 5\n'
        'vllm:num_requests_waiting_by_reason{engine="0",model_name="m",reason="deferred"} 1\n'
        "# TYPE vllm:num_requests_running gauge\n"
        'vllm:num_requests_running{engine="0",model_name="m"} 8\n'
    )
    fmt, (run,) = parse(Input(scrape.encode()))
    assert fmt == "prometheus"
    assert run.metrics.prefix_cache_hit_rate == pytest.approx(300 / 1000)
    assert any(n.startswith("100 of 1000 prompt tokens arrived by KV transfer") for n in run.source.notes)
    assert any(
        "capacity (waiting for scheduling capacity: token budget, max-num-seqs or KV blocks) mean 5, max 5; "
        "deferred (held by a transient constraint: LoRA budget, KV transfer, blocked status) mean 1, max 1" in n
        for n in run.source.notes
    )


@pytest.mark.parametrize(
    ("path", "model", "quant"),
    [
        ("/models/Qwen3-30B-A3B-Instruct-2507-UD-Q4_K_XL.gguf", "Qwen3-30B-A3B-Instruct-2507", "Q4_K_XL"),
        ("GLM-4.5-Air-UD-Q4_K_XL-00001-of-00002.gguf", "GLM-4.5-Air", "Q4_K_XL"),
        ("Llama-3.1-8B-Instruct.i1-Q4_K_M.gguf", "Llama-3.1-8B-Instruct", "Q4_K_M"),
        ("model-q4_k_m-imat.gguf", "model", "Q4_K_M"),
        ("Meta-Llama-3-8B-Instruct.Q4_K_M.gguf", "Meta-Llama-3-8B-Instruct", "Q4_K_M"),
    ],
)
def test_gguf_file_names_lose_the_quant_tag_and_its_markers(path: str, model: str, quant: str) -> None:
    assert split_model_filename(path) == (model, quant)


def test_a_disaggregated_sglang_pair_keeps_each_workers_version() -> None:
    _, runs = parse(_read(INGEST / "sglang_bench" / "tonyli15-sglang-pd-1p1d-qwen2.5-3b-c64-bench_serving.jsonl"))
    run = runs[0]
    assert run.labels["runtime_version_prefill"] == "0.5.5.post3"
    assert run.labels["runtime_version_decode"] == "0.5.6"
    assert run.setup.runtime_version == "0.5.6"  # the decode worker's, which sets the per-token pace
    assert any("different SGLang versions (prefill 0.5.5.post3, decode 0.5.6)" in n for n in run.source.notes)


def test_a_disaggregated_llmd_report_keeps_each_roles_engine_version() -> None:
    import copy

    import yaml

    path = INGEST / "llmd_report" / "edge-br-v0.2-inference-perf-llmd-stage3.yaml"
    doc = yaml.safe_load(path.read_text())
    engine = doc["scenario"]["stack"][0]
    prefill, decode = copy.deepcopy(engine), copy.deepcopy(engine)
    prefill["standardized"].update(role="prefill", tool_version="ghcr.io/llm-d/llm-d-cuda:0.3.0")
    decode["standardized"].update(role="decode", tool_version="ghcr.io/llm-d/llm-d-cuda:0.3.1")
    doc["scenario"]["stack"][:1] = [prefill, decode]
    _, (run,) = parse(Input(json.dumps(doc, default=str).encode()))
    assert run.labels["engine_version_prefill"] == "ghcr.io/llm-d/llm-d-cuda:0.3.0"
    assert run.labels["engine_version_decode"] == "ghcr.io/llm-d/llm-d-cuda:0.3.1"


def test_a_jsonl_warmup_record_is_left_out_of_the_runs() -> None:
    lines = (INGEST / "vllm_bench" / "edge-append-result-two-runs.jsonl").read_text().splitlines()
    warmup = {**json.loads(lines[0]), "type": "warmup", "mean_ttft_ms": 9999.0}
    body = "\n".join([json.dumps(warmup), *lines]) + "\n"
    fmt, runs = parse(Input(body.encode()))
    _, plain = parse(Input(("\n".join(lines) + "\n").encode()))
    assert fmt == "vllm_bench"
    assert [r.metrics.ttft_ms.mean for r in runs] == [r.metrics.ttft_ms.mean for r in plain]
    assert runs[0].source.notes[0] == "1 warm-up record(s) left out"


def test_aiperf_schema_15_keeps_the_gpu_and_leaves_the_warmup_metrics_out() -> None:
    _, (v15,) = parse(_read(INGEST / "aiperf" / "edge-schema-1.5-nvidia-telemetry-warmup-metrics.json"))
    _, (original,) = parse(_read(INGEST / "aiperf" / "aiperf-qwen3-0.6b-rtx6000ada-c1-profile_export_aiperf.json"))
    assert v15.metrics.ttft_ms == original.metrics.ttft_ms  # not the ×10 warm-up block
    assert v15.setup.hardware == "NVIDIA RTX 6000 Ada Generation"
    assert v15.source.tool_version == "0.9.0"
