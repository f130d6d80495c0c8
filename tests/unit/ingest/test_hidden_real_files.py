"""Real files from repositories the project had not read (issue 14, "hidden real files from other
repositories are accepted with the right values"), and the parser fixes they called for.

Expectations are computed from each fixture's own text, not copied from the golden files, so a parser
that drifts fails here even after the goldens are regenerated. Provenance:
tests/fixtures/ingest/PROVENANCE.md.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from advisor.canonical import CanonicalRun
from advisor.errors import AdvisorError, IngestError
from advisor.ingest.base import Input
from advisor.ingest.formats.trtllm_bench import parse_report, report_from_log
from advisor.ingest.registry import detect, parse
from advisor.ingest.side_files import llamacpp_offload, ollama_resident_share
from advisor.ingest.submission import parse_submission
from advisor.rules.knobs import engine_config

INGEST = Path(__file__).resolve().parents[2] / "fixtures" / "ingest"
REAL_SIDE = Path(__file__).resolve().parents[2] / "fixtures" / "side_files"
TRTLLM_1_1 = (
    INGEST / "trtllm_bench" / "ericgong2005-trtllm-1.1.0rc2-pytorch-llama-3.2-3b-rtx-pro-6000-c8-stepbystep.md.txt"
)
TRTLLM_0_17 = INGEST / "trtllm_bench" / "trtllm-docs-0.17-throughput-trt-engine-llama31-8b-fp8.log"
CONSOLE_ONE = (
    INGEST
    / "bench_console"
    / "dennislee22-vllm0.10.1.1-a100-qwen2-7b-benchmark_serving-1024-1024-with-command-and-server-log.txt"
)
CONSOLE_SWEEP = (
    INGEST
    / "bench_console"
    / "dennislee22-vllm0.10.1.1-a100-qwen2-7b-benchmark_serving-sweep-1-to-1000-prompts-section.md.txt"
)


def _runs(path: Path | None, expected_format: str, text: str | None = None) -> list[CanonicalRun]:
    data = path.read_bytes() if path is not None else (text or "").encode()
    inp = Input(data, file_name=path.name if path is not None else "pasted.txt")
    assert detect(inp).format_id == expected_format
    format_id, runs = parse(inp)
    assert format_id == expected_format
    return runs


def _label(text: str, label: str) -> float:
    """The number after ``label:`` on its last line in ``text``."""
    values = re.findall(re.escape(label) + r":\s+([0-9.]+)", text)
    assert values, label
    return float(values[-1])


# --- trtllm-bench 1.1.0rc2, PyTorch backend (ericgong2005/NVFP4_Quantized_LLM) ---


def test_trtllm_1_1_pytorch_report_pasted_below_other_summaries_reads_the_report() -> None:
    text = TRTLLM_1_1.read_text()
    (run,) = _runs(TRTLLM_1_1, "trtllm_bench")
    # The author's vLLM-client summary above the report prints its own "Request Throughput" and
    # "Total Latency": the values are the report's, after "= PYTORCH BACKEND".
    report = text[text.index("= PYTORCH BACKEND") :]
    assert run.metrics.request_throughput_rps == _label(report, "Request Throughput (req/sec)") == 4.7501
    assert run.metrics.output_throughput_tok_s == _label(report, "Total Output Throughput (tokens/sec)")
    assert run.metrics.total_throughput_tok_s == _label(report, "Total Token Throughput (tokens/sec)")
    assert run.metrics.duration_s == pytest.approx(_label(report, "Total Latency (ms)") / 1000)
    assert run.workload.num_requests == run.metrics.requests_completed == 16
    assert run.workload.concurrency == _label(report, "Number of concurrent requests") == 7.994
    assert run.workload.prompt_tokens_mean == 13.0 and run.workload.output_tokens_mean == 256.0
    # 16 requests in 3.368 s is the printed rate; 16 × 256 output tokens over it, the output rate.
    assert run.metrics.duration_s is not None
    assert 16 / run.metrics.duration_s == pytest.approx(run.metrics.request_throughput_rps, rel=1e-3)
    assert 16 * 256 / run.metrics.duration_s == pytest.approx(run.metrics.output_throughput_tok_s, rel=1e-3)
    e2e = run.metrics.e2e_ms
    assert (e2e.p50, e2e.p90, e2e.p99, e2e.min, e2e.max, e2e.mean) == (
        1683.3179, 1683.8753, 1683.9602, 1678.1686, 1683.9602, 1682.9355,
    )  # fmt: skip
    assert run.metrics.ttft_ms.p50 is None and run.metrics.decode_tok_s is None  # not streamed
    setup = run.setup
    assert (setup.runtime, setup.runtime_version, setup.model) == (
        "trtllm",
        "1.1.0rc2",
        "meta-llama/Llama-3.2-3B-Instruct",
    )
    assert setup.engine_args == {"max_batch_size": 2816, "max_num_tokens": 3072, "pp_size": 1, "backend": "pytorch"}
    # "Quantization: None", "Dtype: bfloat16": unquantized bf16 weights, not an unknown quantization
    # (and not the NVFP4 engine the author built: it was never loaded without --backend tensorrt).
    assert setup.quantization == "bfloat16"
    assert setup.kv_cache_dtype is None and setup.hardware is None
    assert any("Quantization is None" in n for n in run.source.notes)
    assert any("unless --concurrency caps" in n for n in run.source.notes)


def test_the_log_header_names_the_backend_as_report_json_does() -> None:
    pytorch = report_from_log(
        "= PYTORCH BACKEND\nModel: m\n= PERFORMANCE OVERVIEW\nRequest Throughput (req/sec): 1.0\n"
    )
    assert pytorch["engine"]["backend"] == "pytorch"
    (old,) = _runs(TRTLLM_0_17, "trtllm_bench")  # "= ENGINE DETAILS": a TensorRT engine
    assert old.setup.engine_args["backend"] == "trt"
    assert old.setup.quantization == "FP8"  # a quantization the report names is kept as named
    no_header = report_from_log("= PERFORMANCE OVERVIEW\nRequest Throughput (req/sec): 1.0\n")
    assert "engine" not in no_header  # a pasted overview alone says nothing of the backend


@pytest.mark.parametrize(
    ("engine", "expected"),
    [
        ({"quantization": None, "dtype": "bfloat16"}, "bfloat16"),
        ({"quantization": "None", "dtype": "float16"}, "float16"),
        ({"quantization": "NVFP4", "dtype": "bfloat16"}, "NVFP4"),
        ({"dtype": "bfloat16"}, None),  # no quantization field at all: not said, not guessed
        ({"quantization": None, "dtype": "None"}, None),
        ({"quantization": None}, None),
    ],
)
def test_trtllm_quantization_none_is_the_dtype_only_when_the_report_says_both(
    engine: dict[str, object], expected: str | None
) -> None:
    report = {"engine": engine, "world_info": {}, "request_info": {"num_requests": 1}, "performance": {}}
    assert parse_report(report).setup.quantization == expected


# --- benchmark_serving.py console summaries with their commands (dennislee22/vLLM-benchmarking) ---


def test_console_block_with_its_command_reads_the_model_and_requested_length() -> None:
    (run,) = _runs(CONSOLE_ONE, "bench_console")
    text = CONSOLE_ONE.read_text()
    assert run.setup.model == "Qwen2-7B-Instruct"
    assert run.workload.output_tokens_requested == 1024.0
    assert run.workload.num_requests == run.metrics.requests_completed == 10
    assert run.metrics.requests_failed is None  # --num-prompts 10, 10 successful: nothing to derive
    assert run.workload.prompt_tokens_mean == _label(text, "Total input tokens") / 10 == 1023.9
    assert run.workload.output_tokens_mean == _label(text, "Total generated tokens") / 10 == 1024.0
    assert run.metrics.duration_s == 46.96
    assert run.metrics.ttft_ms.mean == 2111.51 and run.metrics.ttft_ms.p50 == 2244.91
    assert run.metrics.ttft_ms.p99 == 3346.14
    assert (run.metrics.tpot_ms.mean, run.metrics.itl_ms.p99) == (43.77, 51.04)
    assert run.metrics.decode_tok_s == pytest.approx(1000 / 43.77)
    # The vLLM server's loggers.py lines after the block ("Running: 10 reqs, Waiting: 0 reqs") are
    # not read as the benchmark's values.
    assert run.workload.concurrency is None and run.metrics.queue_waiting_max is None


def test_a_sections_blocks_each_take_the_command_above_them() -> None:
    text = CONSOLE_SWEEP.read_text()
    runs = _runs(CONSOLE_SWEEP, "bench_console")
    prompts = [int(n) for n in re.findall(r"--num-prompts (\d+)", text)]
    successful = [int(n) for n in re.findall(r"Successful requests:\s+(\d+)", text)]
    assert prompts == [1, 10, 20, 30, 50, 75, 100, 200, 500, 1000]
    assert [r.metrics.requests_completed for r in runs] == successful
    assert [r.workload.num_requests for r in runs] == prompts
    assert {r.setup.model for r in runs} == {"Qwen2-7B-Instruct"}
    assert {r.workload.output_tokens_requested for r in runs} == {1024.0}
    durations = [float(d) for d in re.findall(r"Benchmark duration \(s\):\s+([0-9.]+)", text)]
    assert [r.metrics.duration_s for r in runs] == durations
    medians = [float(d) for d in re.findall(r"Median TTFT \(ms\):\s+([0-9.]+)", text)]
    assert [r.metrics.ttft_ms.p50 for r in runs] == medians


def test_failures_without_a_failed_line_come_from_the_commands_prompt_count() -> None:
    runs = _runs(CONSOLE_SWEEP, "bench_console")
    last = runs[-1]
    # 1,000 prompts sent, 894 successful, and this script version prints no "Failed requests".
    assert (last.workload.num_requests, last.metrics.requests_completed, last.metrics.requests_failed) == (
        1000,
        894,
        106,
    )
    assert any("--num-prompts 1000 - 894 successful" in n for n in last.source.notes)
    assert all(r.metrics.requests_failed is None for r in runs[:-1])


COMMAND = """python benchmarks/benchmark_serving.py --backend vllm \\
  --model meta-llama/Llama-3.1-8B-Instruct {dataset} \\
  --num-prompts 20 --random-output-len 256
"""
BLOCK = """============ Serving Benchmark Result ============
Successful requests:                     {ok}
{failed}Benchmark duration (s):                  10.00
Total input tokens:                      2000
Total generated tokens:                  {out}
Request throughput (req/s):              1.80
---------------Time to First Token----------------
Mean TTFT (ms):                          100.00
==================================================
"""


def _block(ok: int = 18, failed: str = "", out: int = 4608) -> str:
    return BLOCK.format(ok=ok, failed=failed, out=out)


def test_requested_length_needs_the_random_dataset_named() -> None:
    (random,) = _runs(None, "bench_console", COMMAND.format(dataset="--dataset-name random") + _block())
    assert random.workload.output_tokens_requested == 256.0
    # The legacy script's default dataset was ShareGPT: --random-output-len alone requested nothing.
    (default,) = _runs(None, "bench_console", COMMAND.format(dataset="") + _block())
    assert default.workload.output_tokens_requested is None
    assert default.setup.model == "meta-llama/Llama-3.1-8B-Instruct"
    (equals,) = _runs(None, "bench_console", "vllm bench serve --model=Qwen/Qwen3-8B --dataset-name=random "
                      "--random-output-len=64 --num-prompts=18\n" + _block())  # fmt: skip
    assert (equals.setup.model, equals.workload.output_tokens_requested) == ("Qwen/Qwen3-8B", 64.0)


def test_a_printed_failed_count_wins_over_the_prompt_count() -> None:
    (run,) = _runs(None, "bench_console", COMMAND.format(dataset="") + _block(failed="Failed requests:    1\n"))
    assert (run.metrics.requests_failed, run.workload.num_requests) == (1, 19)
    assert not any("--num-prompts" in n for n in run.source.notes)
    (derived,) = _runs(None, "bench_console", COMMAND.format(dataset="") + _block())
    assert (derived.metrics.requests_failed, derived.workload.num_requests) == (2, 20)


def test_a_server_command_or_an_earlier_blocks_command_is_not_read() -> None:
    server = "vllm serve meta-llama/Llama-3.1-8B-Instruct --model other/model --num-prompts 99\n"
    (run,) = _runs(None, "bench_console", server + _block())
    assert run.setup.model is None and run.metrics.requests_failed is None
    # One command, then two blocks: only the first block is that command's.
    first, second = _runs(None, "bench_console", COMMAND.format(dataset="") + _block() + "\n" + _block(ok=5, out=1280))
    assert first.setup.model == "meta-llama/Llama-3.1-8B-Instruct" and first.metrics.requests_failed == 2
    assert second.setup.model is None and second.metrics.requests_failed is None


# --- llama-batched-bench from the one-binary builds ---


def test_the_settings_line_is_read_under_either_function_name() -> None:
    directory = INGEST / "llama_batched_bench"
    old = _runs(directory / "edge-log-with-loader-lines-and-settings.txt", "llama_batched_bench")
    new = _runs(directory / "edge-llama-binary-function-prefix-settings-line.txt", "llama_batched_bench")
    assert (
        "llama_batched_bench: n_kv_max = 8192"
        in (directory / "edge-llama-binary-function-prefix-settings-line.txt").read_text()
    )
    assert [r.setup.engine_args for r in new] == [r.setup.engine_args for r in old]
    assert new[0].setup.engine_args["ctx_size"] == 8192 and new[0].setup.engine_args["n_gpu_layers"] == 99


# --- AI-Hypercomputer/gpu-recipes: a whole pod log, and reports printed as templates ---

TRTLLM_A3ULTRA = (
    INGEST / "trtllm_bench" / "gpu-recipes-a3ultra-trtllm-0.17-build-and-throughput-llama31-405b-fp8-tp8-h200.log"
)
TRTLLM_A4_TEMPLATE = INGEST / "trtllm_bench" / "edge-gpu-recipes-a4-trtllm-1.2-b200-report-template-x.xx-values.txt"
CONSOLE_TEMPLATE = INGEST / "bench_console" / "edge-gpu-recipes-a3mega-vllm-summary-template-xxx.xx-values.txt"


def test_a_build_and_throughput_log_is_read_from_its_report_not_its_build_blocks() -> None:
    text = TRTLLM_A3ULTRA.read_text()
    (run,) = _runs(TRTLLM_A3ULTRA, "trtllm_bench")
    # The build prints "= DATASET DETAILS", "= ENGINE BUILD INFO" and "TensorRT-LLM version: 0.16.0"
    # before the run; the report after "= ENGINE DETAILS" is 0.17.0.post1.
    assert "TensorRT-LLM version: 0.16.0" in text
    assert run.setup.runtime_version == "0.17.0.post1"
    assert (run.setup.model, run.setup.quantization, run.setup.kv_cache_dtype) == (
        "meta-llama/Llama-3.1-405B",
        "FP8",
        "FP8",
    )
    assert (run.setup.tensor_parallel, run.setup.gpu_count, run.setup.engine_args["backend"]) == (8, 8, "trt")
    assert run.workload.num_requests == run.metrics.requests_completed == 30000
    assert run.metrics.duration_s == pytest.approx(980980.5121 / 1000)
    # Before 0.18 "Token Throughput" was output tokens ÷ total latency: 30,000 × 128 / 980.98 s.
    assert run.metrics.output_throughput_tok_s == _label(text, "Token Throughput (tokens/sec)") == 3914.4509
    assert run.metrics.duration_s is not None
    assert 30000 * 128 / run.metrics.duration_s == pytest.approx(run.metrics.output_throughput_tok_s, rel=1e-6)
    assert run.metrics.request_throughput_rps == 30.5816
    assert run.workload.concurrency is None  # the 0.17 overview prints no measured concurrency
    assert run.setup.hardware is None  # an a3-ultragpu-8g per the README; the log names no GPU


def test_the_1_2_machine_details_line_names_the_gpu() -> None:
    text = TRTLLM_A4_TEMPLATE.read_text()
    assert "NVIDIA B200, memory 178.35 GB, 4.00 GHz" in text
    filled = text.replace("X.XX", "1.5")  # the template's layout with numbers where its placeholders are
    (run,) = _runs(None, "trtllm_bench", filled)
    assert run.setup.hardware == "NVIDIA B200"
    assert (run.setup.runtime_version, run.setup.quantization, run.setup.engine_args["ep_size"]) == ("1.2", "NVFP4", 4)
    assert run.workload.concurrency == 752.9244
    report = {"engine": {}, "machine": {"name": "NVIDIA GB10"}, "world_info": {}, "request_info": {}, "performance": {}}
    assert parse_report(report).setup.hardware == "NVIDIA GB10"


@pytest.mark.parametrize(
    ("path", "field"),
    [
        (TRTLLM_A4_TEMPLATE, "performance.request_throughput_req_s"),
        (CONSOLE_TEMPLATE, "[0].Benchmark duration (s)"),
    ],
    ids=["trtllm-X.XX", "console-xxx.xx"],
)
def test_a_report_printed_as_a_template_is_refused_naming_the_field(path: Path, field: str) -> None:
    inp = Input(path.read_bytes(), file_name=path.name)
    with pytest.raises(IngestError) as refused:
        parse(inp)
    assert refused.value.field == field
    assert "placeholder" in str(refused.value)


@pytest.mark.parametrize("value", ["XX", "...", "[result]", "X.XX", "xxxx.xx"])
def test_every_placeholder_spelling_in_a_console_summary_is_refused(value: str) -> None:
    text = _block().replace("Mean TTFT (ms):                          100.00", f"Mean TTFT (ms):  {value}")
    with pytest.raises(IngestError) as refused:
        parse(Input(text.encode(), file_name="t.txt"))
    assert refused.value.field == "[0].Mean TTFT (ms)"


def test_sglang_not_set_is_a_value_not_a_placeholder() -> None:
    text = "Backend:  sglang\nMax request concurrency:  not set\n" + _block()
    (run,) = _runs(None, "bench_console", text)
    assert run.workload.concurrency is None and run.metrics.ttft_ms.mean == 100.0


# --- djangodevreng/dgx-spark-benchmarks: one run as JSON, stdout log and markdown report ---

SPARK = "djangodevreng-vllm0.26-dgx-spark-gb10-nemotron3-nano-30b-bf16-09-reasoning"
SPARK_JSON = INGEST / "vllm_bench" / f"{SPARK}-poisson0.2.json"
SPARK_LOG = INGEST / "bench_console" / f"{SPARK}-namespace-progress.log"
SPARK_MD = INGEST / "bench_console" / f"{SPARK}-docker-exec-command.md.txt"


def test_the_three_forms_of_one_run_agree_to_the_consoles_two_decimals() -> None:
    (from_json,) = _runs(SPARK_JSON, "vllm_bench")
    (from_log,) = _runs(SPARK_LOG, "bench_console")
    (from_md,) = _runs(SPARK_MD, "bench_console")
    doc = json.loads(SPARK_JSON.read_text())
    for run in (from_json, from_log, from_md):
        assert run.setup.model == doc["model_id"] == "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16"
        assert run.workload.num_requests == doc["completed"] + doc["failed"] == 50
        assert run.workload.request_rate == doc["request_rate"] == 0.2
        assert run.workload.concurrency == doc["max_concurrent_requests"] == 49  # no --max-concurrency cap
        assert run.workload.prompt_tokens_mean == pytest.approx(doc["total_input_tokens"] / 50)
        assert run.workload.output_tokens_mean == pytest.approx(doc["total_output_tokens"] / 50)
        metrics = run.metrics
        assert metrics.duration_s == pytest.approx(doc["duration"], abs=0.005)
        assert metrics.output_throughput_tok_s == pytest.approx(doc["output_throughput"], abs=0.005)
        for key, got in (
            ("median_ttft_ms", metrics.ttft_ms.p50),
            ("p99_ttft_ms", metrics.ttft_ms.p99),
            ("mean_tpot_ms", metrics.tpot_ms.mean),
            ("p90_itl_ms", metrics.itl_ms.p90),
            ("p50_e2el_ms", metrics.e2e_ms.p50),
        ):
            assert got == pytest.approx(doc[key], abs=0.005), key
        assert metrics.decode_tok_s == pytest.approx(1000 / doc["mean_tpot_ms"], rel=1e-3)
    # The JSON holds no requested length; the log's argument dump and the markdown's command do.
    assert from_json.workload.output_tokens_requested is None
    assert from_log.workload.output_tokens_requested == from_md.workload.output_tokens_requested == 4096.0
    assert "random_output_len=4096" in SPARK_LOG.read_text() and "dataset_name='random'" in SPARK_LOG.read_text()


def test_a_namespace_dump_for_another_dataset_requests_no_length() -> None:
    dump = "Namespace(dataset_name='sharegpt', random_output_len=128, model='m/x')\n"
    (run,) = _runs(None, "bench_console", dump + _block())
    assert run.setup.model == "m/x" and run.workload.output_tokens_requested is None


# --- real Ollama /api/ps answers, read beside a generate response ---

PS_PARTIAL = REAL_SIDE / "adamdoherty-arc-zero-api-ps-qwen3-coder-next-80b-q4km-42pct-in-vram-2026-04.json"
PS_WHOLE = REAL_SIDE / "openclaw-a-end-api-ps-qwen3.6-27b-q4km-all-in-vram-2026-05.json"
GENERATE = INGEST / "ollama" / "cokacho-gemma4-generate-nonstream-prettyprinted-2026-04.json"


def _beside_generate(ps: Path, model: str) -> CanonicalRun:
    generate = json.loads(GENERATE.read_text())
    generate["model"] = model
    body = {
        "files": [
            {"name": "generate.json", "content": json.dumps(generate)},
            {"name": "ps.json", "content": ps.read_text()},
        ]
    }
    parsed = parse_submission(json.dumps(body).encode(), content_type="application/json", format_id="auto")
    assert parsed.format_id == "ollama"
    (run,) = parsed.runs
    return run


def test_a_real_partial_offload_from_api_ps_is_the_runs_gpu_share() -> None:
    doc = json.loads(PS_PARTIAL.read_text())
    coder = next(m for m in doc["models"] if m["name"] == "qwen3-coder-next:latest")
    share = coder["size_vram"] / coder["size"]
    assert share == pytest.approx(0.4230, abs=1e-4)  # 23.87 GB of 56.43 GB in VRAM
    assert ollama_resident_share(coder) == pytest.approx(share)
    run = _beside_generate(PS_PARTIAL, "qwen3-coder-next:latest")
    assert run.metrics.gpu_resident_share == pytest.approx(share)
    # The embedding model loaded beside it (wholly in VRAM) is not this run's share.
    embed = _beside_generate(PS_PARTIAL, "nomic-embed-text-v2-moe:latest")
    assert embed.metrics.gpu_resident_share == 1.0


def test_a_real_api_ps_alone_is_refused_naming_it_a_side_file() -> None:
    for path in (PS_PARTIAL, PS_WHOLE):
        with pytest.raises(IngestError) as refused:
            parse(Input(path.read_bytes(), file_name=path.name))
        assert "/api/ps" in str(refused.value) and "side file" in str(refused.value)
    assert _beside_generate(PS_WHOLE, "qwen3.6:27b").metrics.gpu_resident_share == 1.0


# --- llama-bench markdown: the command above the table, and the README's -ngl sweep ---

LLAMA_BENCH = INGEST / "llama_bench"


def test_the_command_above_the_table_names_the_model_when_it_names_one() -> None:
    runs = _runs(LLAMA_BENCH / "edge-md-command-line-above-banner-names-the-model.md.txt", "llama_bench")
    assert {r.setup.model for r in runs} == {"Meta-Llama-3.1-8B-Instruct"}
    assert {r.setup.hardware for r in runs} == {"NVIDIA GeForce RTX 4090"}
    assert all("model_filename from the llama-bench command above the table (-m)" in r.source.notes for r in runs)
    # The README's two-model command: the rows' model types differ, and no row gets either file.
    two = _runs(LLAMA_BENCH / "edge-md-command-line-two-models-not-assigned.md.txt", "llama_bench")
    assert {r.setup.model for r in two} == {None}
    assert {r.labels["model_type"] for r in two} == {"llama 7B mostly Q4_0", "llama 13B mostly Q4_0"}


def test_a_paste_of_several_commands_for_one_model_names_it_for_every_table() -> None:
    block = (LLAMA_BENCH / "edge-md-command-line-above-banner-names-the-model.md.txt").read_text()
    runs = _runs(None, "llama_bench", block + "\n" + block.replace("-ub 1024", "-ub 512"))
    assert len(runs) == 6 and {r.setup.model for r in runs} == {"Meta-Llama-3.1-8B-Instruct"}
    other = block + "\n" + block.replace("Meta-Llama-3.1-8B-Instruct-Q4_K_M", "Qwen2.5-7B-Instruct-Q4_K_M")
    assert {r.setup.model for r in _runs(None, "llama_bench", other)} == {None}  # two models named: neither


def test_the_readme_ngl_sweep_keeps_each_rows_offload_and_rates() -> None:
    path = LLAMA_BENCH / "llamacpp-readme-llama-7b-q4_0-cuda-ngl-10-to-35-partial-offload.md.txt"
    runs = _runs(path, "llama_bench")
    rows = [line.split("|")[1:-1] for line in path.read_text().splitlines()[2:]]
    assert len(runs) == len(rows) == 16
    for run, cells in zip(runs, rows, strict=True):
        ngl, test, rate = int(cells[4]), cells[5].strip(), float(cells[6].split("±")[0])
        assert run.setup.engine_args["n_gpu_layers"] == ngl
        if test.startswith("pp"):
            assert run.metrics.prefill_tok_s == rate and run.workload.prompt_tokens_mean == 512
        else:
            assert run.metrics.decode_tok_s == rate and run.workload.output_tokens_mean == 128
        assert run.setup.quantization == "Q4_0"


# --- ik_llama.cpp issue 389: a batched-bench log that crashed after its second row ---


def test_a_log_that_crashed_mid_table_keeps_its_rows_and_says_why_the_rest_is_missing() -> None:
    path = INGEST / "llama_batched_bench" / "ik-llama-cpp-issue389-cpu-epyc-qwen3-235b-a22b-q4km-log-crash-after-b2.log"
    text = path.read_text()
    one, two = _runs(path, "llama_batched_bench")
    assert "llm_load_print_meta: model ftype      = Q4_K - Medium" in text and "file type" not in text
    for run in (one, two):
        assert (run.setup.model, run.setup.quantization) == ("Qwen3-235B-A22B", "Q4_K_M")
        assert run.setup.engine_args["n_gpu_layers"] == 0 and run.setup.engine_args["threads"] == 64
        assert run.metrics.gpu_resident_share is None  # a CPU build: no "offloaded N/M" line at all
        assert any("GGML_ASSERT(fms.S[j] > 0) failed" in n and "later cases did not run" in n for n in run.source.notes)
    # |   128 |    128 |    2 |    512 |    2.265 |   113.01 |    7.968 |    32.13 |   10.233 |    50.03 |
    assert (two.workload.concurrency, two.metrics.prefill_tok_s, two.metrics.output_throughput_tok_s) == (
        2.0,
        113.01,
        32.13,
    )
    assert two.metrics.decode_tok_s == pytest.approx(128 / 7.968)
    assert two.metrics.ttft_ms.mean == pytest.approx(2265.0) and two.metrics.e2e_ms.mean == pytest.approx(10233.0)


def test_a_clean_log_gets_no_crash_note() -> None:
    runs = _runs(INGEST / "llama_batched_bench" / "edge-log-with-loader-lines-and-settings.txt", "llama_batched_bench")
    assert not any("did not run" in n for r in runs for n in r.source.notes)


# --- a real partial-offload llama-server log (ik_llama.cpp issue 305) as a side file ---

SERVER_LOG = REAL_SIDE / "ik-llama-cpp-issue305-llama-server-log-deepseek-v3-iq2k-r4-ngl27-of-62-four-gpus.log"
COMPLETION = INGEST / "llama_server" / "danbev-llama-server-completion-llama2-7b-q4km-jq.json"


def _beside_completion(model_path: str) -> CanonicalRun:
    completion = json.loads(COMPLETION.read_text())
    completion["model"] = model_path
    files = [
        {"name": "completion.json", "content": json.dumps(completion)},
        {"name": "server.log", "content": SERVER_LOG.read_text()},
    ]
    parsed = parse_submission(json.dumps({"files": files}).encode(), content_type="application/json", format_id="auto")
    assert parsed.format_id == "llama_server"
    (run,) = parsed.runs
    return run


def test_a_real_partial_offload_log_gives_its_layer_share() -> None:
    text = SERVER_LOG.read_text()
    assert "offloaded 27/62 layers to GPU" in text and text.count("CUDA") >= 4
    found = llamacpp_offload(text, "server.log")
    assert found is not None and found[0] == pytest.approx(27 / 62)
    run = _beside_completion("/GGUFs/DeepSeek-V3-0324-IQ2_K_R4-00001-of-00005.gguf")
    assert run.metrics.gpu_resident_share == pytest.approx(27 / 62)
    assert not any("check they are the same model" in n for n in run.source.notes)


def test_a_log_of_another_model_is_applied_with_a_warning() -> None:
    run = _beside_completion("models/llama-2-7b.Q4_K_M.gguf")
    assert run.metrics.gpu_resident_share == pytest.approx(27 / 62)
    assert any(
        "loaded 'DeepSeek V3 0324' and the run names 'llama-2-7b'" in n and "check they are the same model" in n
        for n in run.source.notes
    )


# --- ik_llama.cpp issue 437: two builds in one paste, and tables cropped of their model column ---


def test_each_table_of_a_paste_keeps_its_own_build() -> None:
    path = LLAMA_BENCH / "ik-llama-cpp-issue437-xeon-amx-cpu-llama31-8b-q4km-llama.cpp-b5389-vs-ik-3702.md.txt"
    runs = _runs(path, "llama_bench")
    assert [(r.labels["build_commit"], r.setup.runtime_version) for r in runs] == [
        ("e3a9421b", "b5389"), ("e3a9421b", "b5389"), ("2ec2229f", "b3702"), ("2ec2229f", "b3702"),
    ]  # fmt: skip
    assert [r.labels["backends"] for r in runs] == ["CPU", "CPU", "CUDA", "CUDA"]
    assert [r.setup.engine_args.get("n_gpu_layers") for r in runs] == [None, None, 0, 0]
    assert [r.metrics.prefill_tok_s or r.metrics.decode_tok_s for r in runs] == [228.18, 37.28, 348.0, 42.48]
    assert {r.setup.model for r in runs} == {"Meta-Llama-3.1-8B-Instruct"}  # both commands name one file


def test_a_table_cropped_of_its_model_column_is_still_read() -> None:
    path = LLAMA_BENCH / "ik-llama-cpp-issue437-cropped-model-column-qwen3-235b-hybrid-and-30b-cpu.md.txt"
    runs = _runs(path, "llama_bench")
    assert len(runs) == 8
    big, small = runs[:4], runs[4:]
    assert {r.labels["bits_per_weight"] for r in big} == {f"{124.91 * 2**30 * 8 / 235.09e9:.3f}"}
    assert {r.setup.engine_args["n_gpu_layers"] for r in big} == {93} and {
        r.setup.engine_args["n_gpu_layers"] for r in small
    } == {0}
    assert [r.metrics.prefill_tok_s for r in big[:2]] == [192.02, 185.33]
    assert [r.workload.prompt_tokens_mean for r in big[:2]] == [2048, 16384]
    assert [r.metrics.decode_tok_s for r in small[2:]] == [69.77, 69.15]
    assert {r.setup.model for r in runs} == {None}  # the prose "Model used: …" is not the tool's output


# --- SGLang bench_serving console: its misspelt label and its measured concurrency ---

SGLANG_BLOCK = """============ Serving Benchmark Result ============
Backend:                                 sglang
Traffic request rate:                    10.0
Max reqeuest concurrency:                {cap}
Successful requests:                     1000
Benchmark duration (s):                  619.25
Total input tokens:                      302118
Total generated tokens:                  195775
Request throughput (req/s):              1.61
Concurrency:                             60.32
---------------Time to First Token----------------
Median TTFT (ms):                        1029.83
==================================================
"""


def test_sglang_misspelt_max_concurrency_is_read() -> None:
    # The label of older SGLang releases, as real pastes carry it (bench_serving.py @ 0033168f spells it right).
    (capped,) = _runs(None, "bench_console", SGLANG_BLOCK.format(cap="1024"))
    assert capped.workload.concurrency == 1024.0
    assert not any("observed mean" in n for n in capped.source.notes)


def test_sglang_observed_concurrency_stands_in_when_no_cap_was_set() -> None:
    (uncapped,) = _runs(None, "bench_console", SGLANG_BLOCK.format(cap="not set"))
    assert uncapped.workload.concurrency == 60.32
    assert any("observed mean (SGLang's Concurrency" in n for n in uncapped.source.notes)


# --- datacrunch-research/h200-benchmarks: an early SGLang JSONL without the derived rates ---


def test_an_early_sglang_record_gets_its_rates_computed_as_the_tool_does() -> None:
    path = (
        INGEST
        / "sglang_bench"
        / "datacrunch-h200-sglang-2024-12-llama31-405b-online-rates-1-to-8-no-request-throughput.jsonl"
    )
    docs = [json.loads(line) for line in path.read_text().splitlines()]
    runs = _runs(path, "sglang_bench")
    assert len(runs) == len(docs) == 6
    assert all("request_throughput" not in d and "total_throughput" not in d for d in docs)
    for run, doc in zip(runs, docs, strict=True):
        duration = doc["duration"]
        assert run.metrics.request_throughput_rps == pytest.approx(doc["completed"] / duration)
        assert run.metrics.input_throughput_tok_s == pytest.approx(doc["total_input_tokens"] / duration)
        assert run.metrics.total_throughput_tok_s == pytest.approx(
            (doc["total_input_tokens"] + doc["total_output_tokens"]) / duration
        )
        assert run.metrics.output_throughput_tok_s == doc["output_throughput"]  # written: kept as written
        assert run.workload.request_rate == doc["request_rate"] and run.metrics.requests_completed == doc["completed"]
        assert any("computed as the tool does" in n for n in run.source.notes)
    # 8 req/s offered, 3.58 served: the overload is in the numbers, not only in the advice.
    assert runs[3].metrics.request_throughput_rps == pytest.approx(3.5848, abs=1e-4)


def test_a_record_that_writes_its_rates_keeps_them() -> None:
    runs = _runs(
        INGEST / "sglang_bench" / "tonyli15-sglang0.5.5post3-qwen2.5-3b-agg-c8-bench_serving.jsonl", "sglang_bench"
    )
    assert not any("computed as the tool does" in n for r in runs for n in r.source.notes)


def test_a_command_with_only_a_prompt_count_adds_no_empty_note() -> None:
    command = "python benchmarks/benchmark_serving.py --backend vllm --num-prompts 20\n"
    (run,) = _runs(None, "bench_console", command + _block())
    assert run.metrics.requests_failed == 2 and run.setup.model is None
    assert not any(n.startswith(" read from") or "read from the benchmark command" in n for n in run.source.notes)


# --- leiwu0812/gpt_oss_eagle3_bench: a real trtllm-bench --report_json of a speculative run ---

TRTLLM_REPORT_JSON = (
    INGEST / "trtllm_bench" / "leiwu0812-trtllm-1.1.0rc2-report-json-pytorch-gpt-oss-120b-eagle3-tp8-ep4.json"
)


def test_a_real_report_json_gives_the_files_own_values() -> None:
    doc = json.loads(TRTLLM_REPORT_JSON.read_text())
    (run,) = _runs(TRTLLM_REPORT_JSON, "trtllm_bench")
    perf, req, world = doc["performance"], doc["request_info"], doc["world_info"]
    assert run.metrics.request_throughput_rps == perf["request_throughput_req_s"]
    assert run.metrics.output_throughput_tok_s == perf["system_output_throughput_tok_s"]
    assert run.metrics.total_throughput_tok_s == perf["system_total_throughput_tok_s"]
    assert run.metrics.duration_s == pytest.approx(perf["total_latency_ms"] / 1000)
    # The file's own arithmetic: 1,000 requests over the total latency is the printed rate.
    assert req["num_requests"] / run.metrics.duration_s == pytest.approx(run.metrics.request_throughput_rps)
    latency = perf["request_latency_percentiles_ms"]
    e2e = run.metrics.e2e_ms
    assert (e2e.min, e2e.p50, e2e.p99, e2e.max, e2e.mean) == (
        latency["minimum"], latency["p50"], latency["p99"], latency["maximum"], latency["average"],
    )  # fmt: skip
    assert run.workload.num_requests == run.metrics.requests_completed == req["num_requests"] == 1000
    assert run.workload.concurrency == req["avg_num_concurrent_requests"]
    assert (run.workload.prompt_tokens_mean, run.workload.output_tokens_mean) == (512.0, 512.0)
    assert run.metrics.ttft_ms.mean is None and run.metrics.decode_tok_s is None  # not streamed
    setup = run.setup
    assert (setup.runtime, setup.runtime_version, setup.model) == ("trtllm", "1.1.0rc2", "openai/gpt-oss-120b")
    assert setup.quantization == doc["engine"]["quantization"] == "W4A8_MXFP4_MXFP8"
    assert setup.kv_cache_dtype is None  # null in the file: not guessed
    assert (setup.tensor_parallel, setup.gpu_count) == (world["tp_size"], world["tp_size"] * world["pp_size"])
    assert setup.engine_args["ep_size"] == world["ep_size"] == 4
    assert setup.hardware is None  # the README says 8 × B200; the report does not


def test_a_speculative_report_says_so_in_engine_args_for_the_rules() -> None:
    doc = json.loads(TRTLLM_REPORT_JSON.read_text())
    (run,) = _runs(TRTLLM_REPORT_JSON, "trtllm_bench")
    assert run.setup.engine_args["speculative_algorithm"] == doc["decoding_stats"]["mode"] == "Eagle"
    assert engine_config(run).speculative.value is True  # what MEAS006 and DEC004 read
    length = doc["decoding_stats"]["acceptance_length_percentiles"]["average"]
    assert any(f"{length:.2f} tokens per step" in n for n in run.source.notes)
    # Without decoding_stats (no speculative_config) nothing is claimed.
    del doc["decoding_stats"]
    assert "speculative_algorithm" not in parse_report(doc).setup.engine_args


def test_the_log_form_of_a_speculative_report_reads_the_mode_too() -> None:
    log = (
        "= PYTORCH BACKEND\nModel:\t\t\tm\n= PERFORMANCE OVERVIEW\nRequest Throughput (req/sec):   1.0\n"
        "===========================================================\n= DECODING STATISTICS (Eagle)\n"
        "-- Acceptance Length Details --------------------------------\n\n[AL] MINIMUM: 1.23\n[AL] AVERAGE: 2.36\n"
    )
    report = report_from_log(log)
    assert report["decoding_stats"] == {"mode": "Eagle", "acceptance_length_percentiles": {"average": 2.36}}
    assert parse_report(report).setup.engine_args["speculative_algorithm"] == "Eagle"


# --- aiperf 0.8+ input_config (models.items, phases): anud18/qwen36-vllm-aiperf-benchmark, ai-dynamo/aiperf ---

AIPERF_0_10 = (
    INGEST
    / "aiperf"
    / "anud18-aiperf0.10-schema1.3-rtx5090-qwen3.6-35b-a3b-nvfp4-vllm-agent-c2-warmup-phase-profile_export_aiperf.json"
)
AIPERF_0_8_NOT_STREAMED = (
    INGEST / "aiperf" / "aiperf-0.8-schema1.0-mock-server-not-streamed-c4-profile_export_aiperf.json"
)


def _avg(doc: dict[str, object], name: str) -> float:
    block = doc[name]
    assert isinstance(block, dict)
    return float(block["avg"])


def test_aiperf_0_10_reads_the_model_and_the_profiling_phase_not_the_warmup() -> None:
    doc = json.loads(AIPERF_0_10.read_text())
    (run,) = _runs(AIPERF_0_10, "aiperf")
    config = doc["input_config"]
    assert run.setup.model == config["models"]["items"][0]["name"] == "qwen3.6-nvfp4"
    assert run.labels["tokenizer"] == config["tokenizer"]["name"] == "nvidia/Qwen3.6-35B-A3B-NVFP4"
    warmup, profiling = config["phases"]
    assert warmup["exclude_from_results"] is True and "exclude_from_results" not in profiling
    assert run.workload.concurrency == profiling["concurrency"] == 2
    # The 96 profiling requests, not the 16 warm-up ones.
    assert run.workload.num_requests == run.metrics.requests_completed == profiling["requests"] == 96
    assert run.metrics.requests_failed == 0
    assert run.workload.streaming is True
    assert run.metrics.request_throughput_rps == _avg(doc, "request_throughput")
    assert run.metrics.output_throughput_tok_s == _avg(doc, "output_token_throughput")
    assert run.metrics.total_throughput_tok_s == _avg(doc, "total_token_throughput")
    assert run.metrics.duration_s == _avg(doc, "benchmark_duration")
    assert run.metrics.ttft_ms.p50 == doc["time_to_first_token"]["p50"]
    assert run.metrics.tpot_ms.mean == doc["inter_token_latency"]["avg"]
    assert run.metrics.itl_ms.p99 == doc["inter_chunk_latency"]["p99"]
    assert run.metrics.e2e_ms.max == doc["request_latency"]["max"]
    assert run.metrics.decode_tok_s == pytest.approx(1000 / doc["inter_token_latency"]["avg"])
    # The file's arithmetic: total tokens over the duration are its throughputs.
    assert _avg(doc, "total_osl") / run.metrics.duration_s == pytest.approx(
        run.metrics.output_throughput_tok_s, rel=1e-2
    )
    assert run.source.tool_version == doc["aiperf_version"] == "0.10.0"
    assert run.setup.hardware is None  # telemetry_data.endpoints is empty: no GPU name in the file


def test_aiperf_without_streaming_is_accepted_with_request_latency_only() -> None:
    doc = json.loads(AIPERF_0_8_NOT_STREAMED.read_text())
    assert "time_to_first_token" not in doc and "inter_token_latency" not in doc
    (run,) = _runs(AIPERF_0_8_NOT_STREAMED, "aiperf")
    assert run.setup.model == "mock-model" and run.labels == {"tokenizer": "gpt2"}
    assert run.workload.concurrency == doc["input_config"]["phases"][0]["concurrency"] == 4
    assert run.workload.num_requests == run.metrics.requests_completed == 64
    latency = doc["request_latency"]
    assert (run.metrics.e2e_ms.mean, run.metrics.e2e_ms.p50, run.metrics.e2e_ms.p99) == (
        latency["avg"], latency["p50"], latency["p99"],
    )  # fmt: skip
    assert run.metrics.ttft_ms.is_empty() and run.metrics.decode_tok_s is None  # not streamed: not invented
    assert run.metrics.output_throughput_tok_s == _avg(doc, "output_token_throughput")
    assert run.metrics.total_throughput_tok_s == _avg(doc, "total_token_throughput")


def test_an_older_loadgen_concurrency_wins_over_phases() -> None:
    doc = json.loads(AIPERF_0_8_NOT_STREAMED.read_text())
    doc["input_config"]["loadgen"] = {"concurrency": 8}
    (run,) = _runs(None, "aiperf", json.dumps(doc))
    assert run.workload.concurrency == 8
    doc["input_config"].pop("loadgen")
    doc["input_config"]["phases"] = [{"name": "profiling", "type": "poisson", "rate": 5.0, "requests": 64}]
    (run,) = _runs(None, "aiperf", json.dumps(doc))
    assert (run.workload.concurrency, run.workload.request_rate) == (None, 5.0)


AIPERF_ALL_TIMED_OUT = (
    INGEST / "aiperf" / "databloom-aiperf-0.8-qwen3.5-4b-q4km-all-20-requests-timed-out-profile_export_aiperf.json"
)


def test_an_aiperf_run_whose_every_request_timed_out_is_a_run_with_nothing_completed() -> None:
    doc = json.loads(AIPERF_ALL_TIMED_OUT.read_text())
    assert "request_count" not in doc and "request_latency" not in doc  # before: "no parser recognises"
    (run,) = _runs(AIPERF_ALL_TIMED_OUT, "aiperf")
    (error,) = doc["error_summary"]
    assert run.metrics.requests_failed == _avg(doc, "error_request_count") == error["count"] == 20
    assert run.metrics.requests_completed == 0 and run.workload.num_requests == 20
    assert run.metrics.ttft_ms.is_empty() and run.metrics.request_throughput_rps is None
    assert run.setup.model == doc["input_config"]["endpoint"]["model_names"][0]
    assert run.workload.concurrency == doc["input_config"]["loadgen"]["concurrency"] == 1
    assert any("TimeoutError ×20" in n for n in run.source.notes)


def test_a_metric_less_json_with_error_summary_alone_is_still_not_aiperf() -> None:
    # error_request_count needs an aiperf marker beside it; a lone {unit, avg} object is no profile.
    with pytest.raises(IngestError):
        _runs(None, "aiperf", json.dumps({"error_request_count": {"unit": "requests", "avg": 3.0}}))


AIPERF_CSV_HALF_FAILED = (
    INGEST
    / "aiperf_csv"
    / "databloom-aiperf-0.8-llama-3.2-3b-q4km-two-endpoints-10-of-20-timed-out-profile_export_aiperf.csv"
)


def _csv_row(text: str, metric: str) -> list[str]:
    (line,) = [ln for ln in text.splitlines() if ln.startswith(metric + ",")]
    return line.split(",")[1:]


def test_a_real_aiperf_csv_with_failed_requests_gives_its_own_values() -> None:
    text = AIPERF_CSV_HALF_FAILED.read_text()
    (run,) = _runs(AIPERF_CSV_HALF_FAILED, "aiperf_csv")
    header = text.splitlines()[0].split(",")[1:]
    ttft = dict(zip(header, map(float, _csv_row(text, "Time to First Token (ms)")), strict=True))
    assert (run.metrics.ttft_ms.mean, run.metrics.ttft_ms.p50, run.metrics.ttft_ms.p99) == (
        ttft["avg"], ttft["p50"], ttft["p99"],
    )  # fmt: skip
    e2e = dict(zip(header, map(float, _csv_row(text, "Request Latency (ms)")), strict=True))
    assert run.metrics.e2e_ms.max == e2e["max"]
    assert run.metrics.requests_completed == float(_csv_row(text, "Request Count")[0]) == 10
    assert run.metrics.requests_failed == float(_csv_row(text, "Error Request Count")[0]) == 10
    assert run.workload.num_requests == 20
    assert run.metrics.duration_s == float(_csv_row(text, "Benchmark Duration (sec)")[0])
    assert run.metrics.total_throughput_tok_s == float(_csv_row(text, "Total Token Throughput (tokens/sec)")[0])


# --- 1337hero/rx7900xtx-llama-bench-vulcan: one script, three llama-bench tables, each with its banner ---

LLAMA_BENCH_THREE_BANNERS = (
    INGEST / "llama_bench" / "1337hero-b7361-vulkan-rx7900xtx-llama2-7b-q4_0-three-tables-gpu0-gpu1-then-both.txt"
)


def test_each_llama_bench_table_takes_the_device_banner_above_it() -> None:
    text = LLAMA_BENCH_THREE_BANNERS.read_text()
    runs = _runs(LLAMA_BENCH_THREE_BANNERS, "llama_bench")
    found = [int(n) for n in re.findall(r"Found (\d+) Vulkan devices", text)]
    assert found == [1, 1, 2]
    rates = [float(r) for r in re.findall(r"\|\s+([0-9.]+) ± [0-9.]+ \|", text)]
    assert [r.metrics.prefill_tok_s or r.metrics.decode_tok_s for r in runs] == rates
    assert [r.setup.gpu_count for r in runs] == [None, None, None, None, 2, 2]  # the dual-GPU table: both cards
    assert {r.setup.hardware for r in runs} == {"AMD Radeon RX 7900 XTX (RADV NAVI31)"}
    assert {r.setup.runtime_version for r in runs} == {"b7361"}
    # The script's header names the one GGUF file: the table prints only "llama 7B Q4_0".
    assert {r.setup.model for r in runs} == {"llama-2-7b"} and {r.setup.quantization for r in runs} == {"Q4_0"}
    assert runs[4].metrics.prefill_tok_s == 2546.13 and runs[5].metrics.decode_tok_s == 129.80


# --- llama-bench -o csv as the maintainers pasted it (ggml-org/llama.cpp README, build 5163) ---

LLAMA_BENCH_CSV = INGEST / "llama_bench" / "llamacpp-readme-b5163-cuda-rtx4080-qwen2.5-7b-q4km-csv.csv"


def test_a_real_llama_bench_csv_gives_its_own_values() -> None:
    rows = list(csv.DictReader(LLAMA_BENCH_CSV.read_text().splitlines()))
    pp, tg = _runs(LLAMA_BENCH_CSV, "llama_bench")
    assert pp.metrics.prefill_tok_s == float(rows[0]["avg_ts"]) == 7285.676949
    assert pp.metrics.ttft_ms.mean == pytest.approx(int(rows[0]["avg_ns"]) / 1e6)
    assert tg.metrics.decode_tok_s == float(rows[1]["avg_ts"]) == 119.915244
    assert tg.metrics.tpot_ms.mean == pytest.approx(int(rows[1]["avg_ns"]) / 1e6 / 128)
    assert (pp.workload.prompt_tokens_mean, tg.workload.output_tokens_mean) == (512, 128)
    for run in (pp, tg):
        assert run.setup.hardware == rows[0]["gpu_info"] == "NVIDIA GeForce RTX 4080"
        assert (run.setup.model, run.setup.quantization) == ("Qwen2.5-7B-Instruct", "Q4_K_M")
        assert run.setup.runtime_version == "b" + rows[0]["build_number"]
        assert run.setup.engine_args["flash_attn"] == "off" and run.setup.engine_args["n_gpu_layers"] == 99
        bpw = int(rows[0]["model_size"]) * 8 / int(rows[0]["model_n_params"])
        assert any(f"{bpw:.3f}" in n for n in run.source.notes)  # measured bits per weight, 4.913


def test_a_llama_bench_table_row_whose_rate_is_no_number_is_refused_not_dropped() -> None:
    text = LLAMA_BENCH_THREE_BANNERS.read_text().replace("150.97 ± 0.05", "inf ± 0.05")
    with pytest.raises(IngestError) as raised:
        _runs(None, "llama_bench", text)
    assert raised.value.field == "[1].avg_ts" and "'inf ± 0.05', not a rate" in str(raised.value.detail)


# --- aiperf schema 1.5: a real export written by aiperf-nightly 0.13.0.dev20261023 against llama-server ---

AIPERF_15 = "aiperf-0.13.0.dev20261023-schema1.5-llama-server-tiny-random-llama-c1"
AIPERF_15_JSON = INGEST / "aiperf" / f"{AIPERF_15}-profile_export_aiperf.json"
AIPERF_15_CSV = INGEST / "aiperf_csv" / f"{AIPERF_15}-profile_export_aiperf.csv"
AIPERF_15_RECORDS = INGEST / "aiperf_records" / f"{AIPERF_15}-warmup-4-profile_export.jsonl"


def test_a_real_aiperf_schema_1_5_export_gives_its_own_profiling_values() -> None:
    doc = json.loads(AIPERF_15_JSON.read_text())
    assert doc["schema_version"] == "1.5" and doc["runtime_submission_invalid_reasons"] == []
    assert "full_decode_duration" in doc and "warmup_metrics" in doc  # the 1.5 and 1.4 additions
    (run,) = _runs(AIPERF_15_JSON, "aiperf")
    assert run.metrics.requests_completed == int(doc["request_count"]["avg"]) == 24
    assert run.metrics.ttft_ms.mean == doc["time_to_first_token"]["avg"]
    assert run.metrics.ttft_ms.mean != doc["warmup_metrics"]["time_to_first_token"]["avg"]
    assert run.metrics.tpot_ms.p99 == doc["inter_token_latency"]["p99"]
    assert run.metrics.itl_ms.mean == doc["inter_chunk_latency"]["avg"]
    assert run.workload.prompt_tokens_mean == doc["input_sequence_length"]["avg"] == 200
    # aiperf 0.8+ echoes --output-tokens-mean as datasets[].prompts.osl.mean
    assert run.workload.output_tokens_requested == doc["input_config"]["datasets"][0]["prompts"]["osl"]["mean"] == 64
    assert (run.setup.model, run.workload.concurrency, run.workload.streaming) == ("tiny-random-llama", 1, True)
    assert run.source.tool_version == doc["aiperf_version"] == "0.13.0.dev20261023"


def test_the_real_schema_1_5_csv_and_records_agree_with_the_json() -> None:
    doc = json.loads(AIPERF_15_JSON.read_text())
    (from_csv,) = _runs(AIPERF_15_CSV, "aiperf_csv")
    assert from_csv.metrics.ttft_ms.mean == round(doc["time_to_first_token"]["avg"], 2)
    assert from_csv.metrics.e2e_ms.p99 == round(doc["request_latency"]["p99"], 2)
    records = [json.loads(line) for line in AIPERF_15_RECORDS.read_text().splitlines()]
    phases = [r["metadata"]["benchmark_phase"] for r in records]
    assert phases.count("warmup") == 4 and phases.count("profiling") == 24
    (from_records,) = _runs(AIPERF_15_RECORDS, "aiperf_records")
    profiling = [
        r["metrics"]["time_to_first_token"]["value"] for r in records if r["metadata"]["benchmark_phase"] == "profiling"
    ]
    assert from_records.metrics.requests_completed == 24  # the warm-up records stay out
    assert from_records.metrics.ttft_ms.mean == pytest.approx(sum(profiling) / len(profiling))
    assert from_records.metrics.ttft_ms.mean == pytest.approx(doc["time_to_first_token"]["avg"])


# --- vllm bench serve logs of one scenario on two machines (Wentao274/vllm-benchmark-test) ---

WENTAO_H100 = INGEST / "bench_console" / "wentao274-vllm-bench-serve-minimax-m2.5-fp8-tp8-h100-c4-in10240-out256.log"
WENTAO_BW1000 = (
    INGEST / "bench_console" / "wentao274-vllm-bench-serve-minimax-m2.5-w8a8-tp8-hygon-bw1000-c4-in10240-out256.log"
)


@pytest.mark.parametrize("path", [WENTAO_H100, WENTAO_BW1000], ids=lambda p: p.name[:60])
def test_a_real_vllm_bench_serve_log_gives_its_own_summary(path: Path) -> None:
    text = path.read_text()
    (run,) = _runs(path, "bench_console")
    assert run.metrics.requests_completed == _label(text, "Successful requests") == 320
    assert run.metrics.requests_failed == _label(text, "Failed requests") == 0
    assert run.workload.concurrency == _label(text, "Maximum request concurrency") == 4
    assert run.metrics.ttft_ms.mean == _label(text, "Mean TTFT (ms)")
    assert run.metrics.ttft_ms.p95 == _label(text, "P95 TTFT (ms)")  # --metric-percentiles 95,99
    assert run.metrics.tpot_ms.p99 == _label(text, "P99 TPOT (ms)")
    assert run.metrics.itl_ms.p50 == _label(text, "Median ITL (ms)")
    assert run.metrics.decode_tok_s == pytest.approx(1000 / _label(text, "Mean TPOT (ms)"))
    assert run.workload.prompt_tokens_mean == _label(text, "Total input tokens") / 320
    assert run.workload.output_tokens_requested == 256  # the Namespace dump's random_output_len
    assert run.setup.model == re.search(r"\bmodel='([^']+)'", text).group(1)  # type: ignore[union-attr]


# --- the vllm-ascend benchmark guide: three pasted summaries, one not streamed, one of embeddings ---

ASCEND_GUIDE = (
    INGEST
    / "bench_console"
    / "vllm-ascend-docs-performance-benchmark-qwen3-8b-vl-no-stream-embedding-three-summaries.md.txt"
)


def test_a_real_benchmark_guide_gives_each_pasted_summary() -> None:
    serve, vision, embedding = _runs(ASCEND_GUIDE, "bench_console")
    assert [r.setup.model for r in (serve, vision, embedding)] == [
        "Qwen/Qwen3-8B",
        "Qwen/Qwen2.5-VL-7B-Instruct",
        "Qwen/Qwen3-Embedding-8B",
    ]  # each from the `vllm bench serve --model` command above its summary
    assert (serve.metrics.ttft_ms.mean, serve.metrics.tpot_ms.mean, serve.metrics.itl_ms.p99) == (127.10, 25.85, 28.85)
    assert (vision.metrics.ttft_ms.p99, vision.metrics.request_throughput_rps) == (1377.02, 2.05)
    # The embeddings summary has no generated tokens: end-to-end latency only, nothing invented.
    assert embedding.metrics.e2e_ms.mean == 154.06 and embedding.metrics.ttft_ms.mean is None
    assert embedding.metrics.output_throughput_tok_s is None and embedding.metrics.decode_tok_s is None


# --- SGLang bench_serving summaries of a run that was not streamed (WILLIAM-qmul/SGLang-dLoRA) ---

NOT_STREAMED = INGEST / "bench_console" / "william-qmul-sglang-lora-bench-not-streamed-itl-zero-six-rates.md.txt"


def test_a_run_whose_every_token_gap_is_zero_keeps_only_its_response_time() -> None:
    """Its ITL is 0.00 at every statistic and the median TPOT -0.00 over responses of ~219 tokens: each
    answer came whole, the "TTFT" is the response time (1,955.72 against an E2E of 1,979.33 ms), and
    1000 / mean TPOT would be a decode rate of 565 tok/s that nothing measured."""
    text = NOT_STREAMED.read_text()
    runs = _runs(NOT_STREAMED, "bench_console")
    e2e = [float(v) for v in re.findall(r"Mean E2E Latency \(ms\):\s+([0-9.]+)", text)]
    assert len(runs) == len(e2e) == 6
    assert set(re.findall(r"Mean ITL \(ms\):\s+([0-9.\-]+)", text)) == {"0.00"}
    for run, mean in zip(runs, e2e, strict=True):
        assert run.metrics.e2e_ms.mean == mean
        assert run.metrics.ttft_ms.mean is None and run.metrics.itl_ms.mean is None and run.metrics.tpot_ms.mean is None
        assert run.metrics.decode_tok_s is None and run.metrics.prefill_tok_s is None
        assert any(n.startswith("not streamed: every inter-token latency is 0") for n in run.source.notes)
        assert run.setup.runtime == "sglang"


def test_a_one_token_run_keeps_its_ttft_although_its_token_gaps_are_zero() -> None:
    """Zero gaps are what a prefill test (one output token) reports too: its TTFT is real."""
    text = NOT_STREAMED.read_text()
    block = text[text.index("============ Serving Benchmark Result") :].split(
        "=================================================="
    )[0]
    one_token = block.replace(
        "Total generated tokens:                  218257", "Total generated tokens:                  996"
    )
    (run,) = _runs(None, "bench_console", one_token + "==================================================\n")
    assert run.workload.output_tokens_mean == 1
    assert run.metrics.ttft_ms.mean == 1955.72 and run.metrics.itl_ms.mean == 0.0


# --- llama-benchy tables of llm-compressor checkpoints served by vLLM (Gabe298) ---

BENCHY_AUTOROUND = INGEST / "llama_benchy" / "gabe298-vllm-qwen3.8-27b-int4a16-autoround-depth-0-to-230000.md.txt"


def test_a_real_llama_benchy_table_to_230k_depth() -> None:
    text = BENCHY_AUTOROUND.read_text()
    rows = [line for line in text.splitlines() if line.startswith("| Qwen3.8")]
    runs = _runs(BENCHY_AUTOROUND, "llama_benchy")
    assert len(runs) == len(rows) == 20
    assert {r.setup.model for r in runs} == {"Qwen3.8-27B-int4a16-autoround"}
    rates = [float(re.split(r"\s*\|\s*", row)[3].split(" ± ")[0]) for row in rows]
    assert [r.metrics.prefill_tok_s or r.metrics.decode_tok_s for r in runs] == rates
    deepest = runs[-2]  # pp2048 @ d230000, no prefix caching: the context is part of the prompt
    assert deepest.workload.prompt_tokens_mean == 2048 + 230000
    assert deepest.metrics.ttft_ms.mean == 229255.52


# --- llmperf summaries collected by a sweep driver (philschmid/llmperf-bench) ---

LLMPERF_COLLECTED = (
    INGEST / "llmperf" / "philschmid-tgi-2.0.1-llama3-8b-tp1-concurrency-1-to-128-collected-summaries.json"
)


def test_llmperf_summaries_collected_by_concurrency_are_one_run_each() -> None:
    doc = json.loads(LLMPERF_COLLECTED.read_text())
    runs = _runs(LLMPERF_COLLECTED, "llmperf")
    assert len(runs) == len(doc) == 8
    for run, (key, summary) in zip(runs, doc.items(), strict=True):
        assert run.workload.concurrency == summary["num_concurrent_requests"] == int(key)
        assert run.metrics.ttft_ms.mean == pytest.approx(summary["results_ttft_s_mean"] * 1000)
        assert run.metrics.e2e_ms.p99 == pytest.approx(summary["results_end_to_end_latency_s_quantiles_p99"] * 1000)
        assert run.metrics.requests_completed == summary["results_num_completed_requests"]
        assert run.setup.model == "meta-llama/Meta-Llama-3-8B-Instruct"
        assert any(f"under '{key}'" in n for n in run.source.notes)


def test_a_bad_value_in_one_collected_summary_names_its_key() -> None:
    doc = json.loads(LLMPERF_COLLECTED.read_text())
    doc["64"]["results_number_errors"] = -1
    with pytest.raises(IngestError) as raised:
        parse(Input(json.dumps(doc).encode(), file_name="results.json"))
    assert raised.value.field == "64.results_number_errors"


def test_an_object_holding_something_besides_summaries_is_not_llmperf() -> None:
    doc = json.loads(LLMPERF_COLLECTED.read_text())
    doc["notes"] = {"gpu": "A10G"}
    inp = Input(json.dumps(doc).encode(), file_name="results.json")
    with pytest.raises(AdvisorError) as raised:
        detect(inp)
    assert raised.value.status == 422 and "no parser recognises this file" in str(raised.value.detail)


def test_the_sglang_jsonl_of_an_unstreamed_run_keeps_only_its_response_time() -> None:
    """The same tool's --output-file record for a run whose token gaps are all 0 (the JSONL twin of the
    summaries above): TonyLi15's real record with its ITL zeroed and TTFT set to the E2E latency."""
    path = INGEST / "sglang_bench" / "tonyli15-sglang0.5.5post3-qwen2.5-3b-agg-c8-bench_serving.jsonl"
    record = json.loads(path.read_text().splitlines()[0])
    for key in ("mean_itl_ms", "median_itl_ms", "std_itl_ms", "p95_itl_ms", "p99_itl_ms"):
        record[key] = 0.0
    record["mean_ttft_ms"] = record["mean_e2e_latency_ms"]
    (run,) = _runs(None, "sglang_bench", json.dumps(record) + "\n")
    assert run.metrics.e2e_ms.mean == record["mean_e2e_latency_ms"]
    assert run.metrics.ttft_ms.mean is None and run.metrics.tpot_ms.mean is None and run.metrics.decode_tok_s is None
    assert any(n.startswith("not streamed:") for n in run.source.notes)
    (streamed,) = _runs(path, "sglang_bench")  # the record as it is: streamed, TPOT kept
    assert streamed.metrics.tpot_ms.mean == json.loads(path.read_text())["mean_tpot_ms"]


WENTAO_KUNLUN = (
    INGEST
    / "bench_console"
    / "wentao274-vllm-kunlun-bench-serve-minimax-m2.5-w8a8-p800-c10-in194560-62-of-100-no-failed-line.log"
)


def test_a_summary_without_a_failed_line_counts_the_argument_dumps_prompts_that_did_not_succeed() -> None:
    text = WENTAO_KUNLUN.read_text()
    assert "Failed requests" not in text
    prompts = int(re.search(r"Namespace\(.*?\bnum_prompts=(\d+)", text).group(1))  # type: ignore[union-attr]
    (run,) = _runs(WENTAO_KUNLUN, "bench_console")
    assert run.metrics.requests_completed == _label(text, "Successful requests") == 62
    assert run.metrics.requests_failed == prompts - 62 == 38
    assert run.workload.num_requests == prompts
    assert run.workload.prompt_tokens_mean == _label(text, "Total input tokens") / 62 == 194560


def test_a_table_comparing_runs_is_not_taken_for_an_aiperf_csv() -> None:
    """Wentao274/vllm-benchmark-test tabulates its vllm bench serve summaries per chip
    (analysis/chip_comparison/…/concurrency10_comparison_test_01_nvidia_h100_vs_hygon_bw1000.csv,
    @ 21f4d96f): "Metric,<run>,<run>" rows with the console labels. Its "Benchmark duration" row made
    it look like an aiperf export, refused with "no Time To First Token … row"; no parser claims it."""
    text = (
        "Metric,10 并发,10 并发\n[[Serving Benchmark Result]],,\nSuccessful requests,320,320\n"
        "Failed requests,0,0\nBenchmark duration (s),153.26,526.27\nTotal input tokens,3289280,3276800\n"
    )
    with pytest.raises(AdvisorError) as raised:
        detect(Input(text.encode(), file_name="concurrency10_comparison.csv"))
    assert raised.value.status == 422 and "no parser recognises this file" in str(raised.value.detail)
    (run,) = _runs(AIPERF_15_CSV, "aiperf_csv")  # the tool's own export still is one
    assert run.metrics.requests_completed == 24


def test_a_config_quoting_a_loader_line_in_a_comment_is_no_llama_cpp_log() -> None:
    """Sergey-Kit/Local-inference-benchmark-Ollama-vs-llama.cpp-vs-vLLM `configs/experiment.yaml`
    (@ 0b2f7ed2) explains a setting with the loader's line in a YAML comment; it was answered as "a
    llama.cpp start-up log … a side file". A config is no benchmark and no side file: a plain 422."""
    text = (
        "model:\n  hf_id: Qwen/Qwen3-0.6B\n  gguf: models/Qwen3-0.6B-f16.gguf\nruntimes:\n  llamacpp:\n"
        "      # llama-server's fit step moved layers to the CPU on its own:\n"
        "      #     load_tensors: offloaded 20/29 layers to GPU\n      args: ['-ngl', '99']\n"
    )
    with pytest.raises(AdvisorError) as raised:
        detect(Input(text.encode(), file_name="experiment.yaml"))
    assert raised.value.status == 422 and "no parser recognises this file" in str(raised.value.detail)
    log = text.replace("      #     load_tensors:", "load_tensors:")  # the line as the loader prints it
    with pytest.raises(AdvisorError) as raised:
        detect(Input(log.encode(), file_name="server.log"))
    assert "a llama.cpp start-up log" in str(raised.value.detail)
