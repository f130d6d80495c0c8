"""The advice on shipped real benchmark files, end to end (POST /api/v1/advise, both databases),
read the way an operator would: the top recommendation, the verdict and its reasons (issue 12).

Each case names the file, the context a new user would give (as query parameters) and what an
expert would put first. Provenance of the files: tests/fixtures/ingest/PROVENANCE.md.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, NamedTuple

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ingest"

#: Advice for user traffic; an engine microbenchmark must never get it.
WORKLOAD_ACTIONS = {"shorten-prompt", "enable-prefix-caching", "reorder-prompt-prefix", "add-capacity"}


#: Engine tests: no prompt, prefix or queue advice on any of their runs.
MICROBENCHMARK_DIRS = (
    "llama_bench", "llama_batched_bench", "vllm_offline", "sglang_one_batch", "sglang_offline", "trtllm_bench",
    "llama_sweep_bench", "llama_benchy",
)  # fmt: skip

SEVERITIES = ("low", "moderate", "severe", "critical")


def _real_files() -> list[str]:
    """Every row of kind ``real`` in PROVENANCE.md, as ``<format dir>/<file name>``."""
    files: list[str] = []
    section = ""
    for line in (FIXTURES / "PROVENANCE.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
        elif m := re.match(r"\|\s*`([^`]+)`\s*\|\s*real\s*\|", line):
            files.append(f"{section}/{m.group(1)}")
    return files


class Case(NamedTuple):
    path: str
    top: tuple[str, str, str] | None  # rule, severity, action of the first recommendation
    verdict: str | None
    why: str
    query: str = ""
    #: Which runs of the file the top and verdict are asserted on: an index, or None for every run.
    run: int | None = 0
    #: Rules that must not speak (a prefill blame on a queue, a failure that was a cancellation).
    absent: tuple[str, ...] = ()
    #: The highest severity any finding of the asserted runs may have (a healthy run: "moderate").
    cap: str | None = None
    #: Rules that must appear, with the text their title must contain.
    present: tuple[tuple[str, str], ...] = ()


MEAS004 = ("MEAS004", "moderate", "improve-measurement")
DGX_SPARK_REASONING = (
    "Poisson 0.2 req/s of ~1k-token prompts asking for 4,096 tokens at 7 tok/s per stream: 49 of 50 reque"
    "sts end up in flight and 0.05 req/s is served; the JSON, its stdout log and the runner's markdown give the same advice"
)
SMALL_SAMPLE = ("MEAS001", "moderate", "improve-measurement")


def _id(case: Case) -> str:
    name: str = case.path.split("/")[-1]
    return name + ("+context" if case.query else "")


def _xfail(case: Case, reason: str) -> Any:
    return pytest.param(case, marks=pytest.mark.xfail(strict=True, reason=reason), id=_id(case) + "-xfail")


CASES: list[Any] = [  # Case, or a pytest.param of one (_xfail)
    # --- samples (not real files, kept from the first round) ---
    Case(
        "ollama/ollama_chat.json",
        ("PRE006", "severe", "warm-up-model"),
        "warn",
        "the model load is 97 % of the TTFT: warm it up, the prompt is not the problem",
    ),
    Case(
        "vllm_bench/vllm_bench_serve.json",
        SMALL_SAMPLE,
        "warn",
        "no hardware or quantization: say what to add, at most moderate, never fail; the small sample, "
        "as severe and something to change, comes first",
        cap="moderate",
    ),
    Case(
        "llama_bench/llamacpp-readme-llama-7b-q4_0-cuda-ngl-10-to-35-partial-offload.md.txt",
        MEAS004,
        "warn",
        "an -ngl 10..35 sweep of LLaMA 7B Q4_0 without the GPU or a model the catalog knows ('llama 7B mostly "
        "Q4_0'): ask for them, at most moderate, on every row; an engine test gets no workload advice",
        run=None,
        cap="moderate",
    ),
    Case(
        "llama_batched_bench/ik-llama-cpp-issue389-cpu-epyc-qwen3-235b-a22b-q4km-log-crash-after-b2.log",
        MEAS004,
        "warn",
        "a CPU-only batched-bench of Qwen3-235B-A22B Q4_K_M that crashed after B = 2: the older loader's "
        "'model ftype' gives the quantization, so only the hardware is missing, on both rows",
        run=None,
        cap="moderate",
        present=(("MEAS004", "setup.hardware"),),
    ),
    Case(
        "llama_bench/ik-llama-cpp-issue437-xeon-amx-cpu-llama31-8b-q4km-llama.cpp-b5389-vs-ik-3702.md.txt",
        ("MEAS004", "moderate", "improve-measurement"),
        "warn",
        "llama.cpp and ik_llama.cpp on one AMX Xeon, CPU only, the model from the pasted -m: only the CPU is "
        "missing; each table keeps its own build",
        run=None,
        cap="moderate",
        present=(("MEAS004", "setup.hardware"),),
    ),
    Case(
        "llama_bench/ik-llama-cpp-issue437-cropped-model-column-qwen3-235b-hybrid-and-30b-cpu.md.txt",
        MEAS004,
        "warn",
        "tables pasted without their model column: the bits per weight still come from size and params, and "
        "the model and hardware are asked for",
        run=None,
        cap="moderate",
    ),
    Case(
        "llama_bench/llama_bench.json",
        None,
        "pass",
        "llama-bench pp/tg tests are engine tests: no prompt, prefix or queue advice",
    ),
    # --- vllm bench serve / benchmark_serving.py ---
    Case(
        "vllm_bench/dstack-2025-09-bench-serve-gpt-oss-120b-pd-1p3d-c128.json",
        MEAS004,
        "warn",
        "gpt-oss-120b at 128 streams, TTFT p50 227 ms, TPOT 10.7 ms: nothing wrong shows; without the GPU "
        "nothing can be judged, and that is at most moderate",
        cap="moderate",
    ),
    Case(
        "vllm_bench/vllm-0.25.1-bench-serve-all-requests-failed-opt125m.json",
        ("MEAS005", "critical", "improve-measurement"),
        "fail",
        "every request failed: the benchmark measured nothing, and that fails the verdict",
    ),
    Case(
        "vllm_bench/vllm-0.25.1-bench-sweep-run0-opt125m.json",
        SMALL_SAMPLE,
        "warn",
        "8 requests: a p99 of 8 samples is the maximum, first say the sample is too small; facebook/opt-125m is "
        "known, so only the setup around it is asked for",
        cap="moderate",
        present=(("MEAS004", "Missing setup."),),  # the model resolves (models_added.csv / aliases.toml)
    ),
    Case(
        "vllm_bench/vllm-0.25.1-bench-sweep-summary-opt125m.json",
        SMALL_SAMPLE,
        "warn",
        "each of the two sweep points has 8 requests",
        run=None,
        cap="moderate",
    ),
    Case(
        "vllm_legacy/dstack-2024-11-mi300x-405b-1000qps-mostly-failed.json",
        ("MEAS005", "critical", "add-capacity"),
        "fail",
        "98 % of 1,000 requests at 1,000 qps failed: the setup was overrun",
    ),
    Case(
        "vllm_legacy/gunther520-2024-11-benchmark_serving-per-request-arrays-llama31-8b.json",
        SMALL_SAMPLE,
        "warn",
        "20 requests sent at once: the percentiles are of 20 samples",
        cap="moderate",
    ),
    Case(
        "vllm_legacy/llmd-exp7-a100-llmd-1p1d-llama31-8b.json",
        MEAS004,
        "warn",
        "8,000-token prompts and a 1 s TTFT at about 18 streams, no GPU named: the TTFT cannot be split, so "
        "the prompt advice is only a low note and asking for the hardware comes first",
        cap="moderate",
        present=(("PRE001", "cannot be told without the hardware"),),
    ),
    Case(
        "vllm_legacy/llmd-exp7-h100-vllm-2replicas-llama31-8b.json",
        MEAS004,
        "warn",
        "a healthy 8B run with 8,000-token prompts; without the GPU only the missing context is said",
        cap="moderate",
    ),
    Case(
        "vllm_legacy/llmd-exp7-h100-vllm-2replicas-llama31-8b.json",
        ("SCH001", "moderate", "lower-batched-tokens"),
        "warn",
        "on the H100 the directory names, 8,000-token prompts prefilled in one step stall every stream "
        "(ITL p99 217 ms against a p50 of 10 ms): a smaller step budget is the fix",
        query="?hardware=nvidia-h100-sxm&quantization=bf16&runtime=vllm",
        cap="moderate",
    ),
    # --- guidellm ---
    Case(
        "guidellm/danielkorat-guidellm-0.5.0dev0-qwen3-4b-thinking-tp4-fp8-concurrent.json",
        SMALL_SAMPLE,
        "warn",
        "a sanity run of 4 requests: nothing can be concluded from its percentiles; Qwen3-4B-Thinking-2507 is "
        "known (its own 256k-context row)",
        cap="moderate",
        absent=("PRE001",),
        present=(("MEAS004", "Missing setup."),),  # the model resolves (models_added.csv / aliases.toml)
    ),
    Case(
        "guidellm/guidellm-0.8.0dev18-v2-report-mock-backend.json",
        SMALL_SAMPLE,
        "warn",
        "a mock backend, two rates of 2 requests each",
        run=None,
        cap="moderate",
    ),
    Case(
        "guidellm/jhurlocker-guidellm-0.2-format-llama-3.2-3b-synchronous.yaml",
        SMALL_SAMPLE,
        "warn",
        "14 synchronous requests; the served name llama-3-2-3b is Llama 3.2 3B",
        cap="moderate",
        present=(("MEAS004", "Missing setup."),),  # the model resolves (models_added.csv / aliases.toml)
    ),
    Case(
        "guidellm/rsevilla87-guidellm-0.3-format-qwen3-0.6b-llmd-constant10.json",
        MEAS004,
        "warn",
        "a constant 10 req/s served at 10 req/s: no overload, no queue; only the missing GPU to report",
        cap="moderate",
        absent=("PRE007", "MEAS007"),
    ),
    # --- SGLang bench_serving ---
    Case(
        "sglang_bench/tonyli15-sglang-pd-1p1d-qwen2.5-3b-c64-bench_serving.jsonl",
        SMALL_SAMPLE,
        "warn",
        "100 requests at 64 streams",
        cap="moderate",
    ),
    Case(
        "sglang_bench/tonyli15-sglang-pd-internode-gh200-a100-bench_serving.jsonl",
        ("SCH004", "severe", "avoid-disaggregation"),
        "warn",
        "a 3B model with 60-token prompts split across two nodes at 8 streams: the KV transfer costs more "
        "than the isolation gains (TTFT p50 112 ms for 60 tokens)",
    ),
    Case(
        "sglang_bench/tonyli15-sglang0.5.5post3-qwen2.5-3b-agg-c8-bench_serving.jsonl",
        SMALL_SAMPLE,
        "warn",
        "the aggregated baseline: 100 requests at 8 streams, nothing wrong",
        cap="moderate",
    ),
    # --- llmperf ---
    Case(
        "llmperf/hongxuan-llama2-7b-chat_550_150_summary.json",
        SMALL_SAMPLE,
        "warn",
        "80 requests; llama2-7b-chat is Llama 2 7B",
        cap="moderate",
        present=(("MEAS004", "Missing setup."),),  # the model resolves (models_added.csv / aliases.toml)
    ),
    Case(
        "llmperf/leaderboard-bedrock-llama2-70b_550_150_summary.json",
        ("MEAS005", "severe", "add-capacity"),
        "warn",
        "a third of the requests failed: the other numbers describe a biased sample; Bedrock's "
        "meta.llama2-70b-chat-v1 is Llama 2 70B",
        present=(("MEAS004", "Missing setup."),),  # the model resolves (models_added.csv / aliases.toml)
    ),
    Case(
        "llmperf/leaderboard-groq-llama2-70b_550_150_summary.json",
        MEAS004,
        "warn",
        "150 requests, none failed, a hosted API: only the missing setup to report (Groq's llama2-70b-4096 is "
        "Llama 2 70B)",
        cap="moderate",
        present=(("MEAS004", "Missing setup."),),  # the model resolves (models_added.csv / aliases.toml)
    ),
    Case(
        "llmperf/triton-llm-llama2-7b_550_150_summary.json",
        SMALL_SAMPLE,
        "warn",
        "2 requests; meta-llama/Llama-2-7b-chat-hf is Llama 2 7B",
        cap="moderate",
        present=(("MEAS004", "Missing setup."),),  # the model resolves (models_added.csv / aliases.toml)
    ),
    # --- genai-perf / aiperf (gpt-oss reasons: the TTFT is not prefill) ---
    Case(
        "genai_perf/wellflat-gptoss20b-vllm-c1-per_request-key-profile_export_genai_perf.json",
        SMALL_SAMPLE,
        "warn",
        "gpt-oss-20b at one stream, 150-token prompts, TTFT 2.1 s: hidden reasoning tokens, not prefill; "
        "400 output tokens were asked for (input_config.output_tokens_mean) and 124 counted",
        cap="moderate",
        absent=("PRE001", "PRE004", "SCH001", "CFG005"),
        present=(("MEAS007", "first visible token (400 output tokens requested, 124 counted)"),),
    ),
    Case(
        "genai_perf/wellflat-gptoss20b-vllm-c1-telemetry-profile_export_genai_perf.json",
        SMALL_SAMPLE,
        "warn",
        "the same setup, 35 requests, TTFT 1.4 s: reasoning tokens again (300 requested, 74 counted)",
        cap="moderate",
        absent=("PRE001", "PRE004", "SCH001", "CFG005"),
        present=(("MEAS007", "(300 output tokens requested, 74 counted)"),),
    ),
    Case(
        "aiperf/aiperf-2025-06-early-schema-profile_export_aiperf.json",
        MEAS004,
        "warn",
        "an early-schema file from a mock server: it names nothing to judge",
        cap="moderate",
    ),
    Case(
        "aiperf/aiperf-gptoss20b-c100-cancel10-profile_export_aiperf.json",
        SMALL_SAMPLE,
        "warn",
        "89 completed requests at 100 streams; no queue figure, so the reasoning note stays low",
        cap="moderate",
        absent=("PRE001",),
    ),
    Case(
        "aiperf/aiperf-qwen3-0.6b-rtx6000ada-c1-profile_export_aiperf.json",
        SMALL_SAMPLE,
        "warn",
        "64 requests at one stream",
        cap="moderate",
    ),
    Case(
        "aiperf/wellflat-gptoss20b-vllm-c1-profile_export_aiperf.json",
        SMALL_SAMPLE,
        "warn",
        "100 requests of gpt-oss-20b at one stream on an A100 (from the telemetry)",
        cap="moderate",
        absent=("PRE001",),
    ),
    Case(
        "aiperf_csv/aiperf-gptoss20b-c100-cancel10-profile_export_aiperf.csv",
        SMALL_SAMPLE,
        "warn",
        "the CSV twin of the 100-stream run",
        cap="moderate",
    ),
    Case(
        "aiperf_records/aiperf-qwen3-0.6b-rtx6000ada-c1-profile_export.jsonl",
        SMALL_SAMPLE,
        "warn",
        "10 per-request records",
        cap="moderate",
    ),
    Case(
        "genai_perf_analyze_csv/perf_analyzer-repo-gpt2-triton-vllm-analyze_export_genai_perf-2024-12.csv",
        MEAS004,
        "warn",
        "a five-config sweep of gpt2 with no model, GPU or runtime: say what to add",
        cap="moderate",
    ),
    Case(
        "genai_perf_csv/cloudai-ai-dynamo-doc-profile_export_genai_perf-isl3000.csv",
        SMALL_SAMPLE,
        "warn",
        "40 requests of 3,000 tokens; without the GPU the 640 ms TTFT cannot be split, no prompt advice above low",
        cap="moderate",
    ),
    # --- inference-perf / llm-d ---
    Case(
        "inference_perf/kubecon25-vllm0.11-h100-batch_size-stage_0_lifecycle_metrics.json",
        SMALL_SAMPLE,
        "warn",
        "60 requests at 1 req/s; the 0.03 ms ITL is chunk arrival (MEAS008), said next",
        cap="moderate",
        present=(("MEAS008", "not a token gap"),),
    ),
    Case(
        "inference_perf/kubecon25-vllm0.11-h100-batch_size-summary_lifecycle_metrics.json",
        ("MEAS008", "moderate", "improve-measurement"),
        "warn",
        "an ITL p50 of 0.05 ms is the client timing chunks, not tokens",
        cap="moderate",
    ),
    Case(
        "llmd_report/llmd-guide-wide-ep-lws-br-v0.2-inference-perf-c2048-h200-deepseek-r1.yaml",
        ("MEAS008", "moderate", "improve-measurement"),
        "warn",
        "2,048 streams and an 11 s TTFT: a queue, not a prompt to trim; the ITL is chunk timing",
        cap="moderate",
    ),
    # --- llama-bench, llama-batched-bench and other engine tests ---
    Case(
        "llama_bench/asoldano-b8067-rocm-strixhalo-step3.5-flash-q4km.json",
        MEAS004,
        "warn",
        "a model the catalog lacks: engine tests, nothing about prompts",
        run=None,
        cap="moderate",
    ),
    Case(
        "llama_bench/kyuz0-b9927-rocm-strixhalo-qwen3.6-27b-q8-curve-generation.jsonl",
        ("DEC001", "critical", "quantize-weights"),
        "warn",
        "a generation curve of Qwen3.6-27B Q8_0 on Strix Halo (qwen3.6-27b, models_added.csv): 7.8 tok/s is 87-88 "
        "% of the 256 GB/s ceiling for 27B 8.5-bit weights at every depth (the ceiling falls with the 64 KiB/token "
        "of its 16 attention layers), so fewer bits per weight are the lever: Q4_K_M",
        run=None,
        present=(("DEC001", "8.5-bit weights"),),
    ),
    Case(
        "llama_bench/orionzhen-b7951-vulkan-radv-7900xtx-gpt-oss-20b.json",
        None,
        "pass",
        "84 engine tests of gpt-oss-20b on a 7900 XTX, pp up to 8192: nothing about trimming prompts",
    ),
    Case(
        "llama_bench/orionzhen-b7951-vulkan-radv-7900xtx-gpt-oss-20b.json",
        None,
        None,
        "on every one of the 84 tests, at most a low note",
        run=None,
        cap="low",
    ),
    Case(
        "llama_bench/llamacpp-readme-qwen2-7b-q4km-cuda-depth-d512.md.txt",
        MEAS004,
        "warn",
        "the README's table names neither GPU nor model id",
        run=None,
        cap="moderate",
    ),
    Case(
        "llama_bench/llamacpp-readme-llama-7b-13b-q4_0-cuda-tg-old-labels.md.txt",
        MEAS004,
        "warn",
        "an older README table, two models, no GPU",
        run=None,
        cap="moderate",
    ),
    Case(
        "llama_batched_bench/llamacpp-readme-llama-7b-batched-bench-sample-results.md.txt",
        MEAS004,
        "warn",
        "batched-bench at B 1-32: engine tests with no GPU named",
        run=None,
        cap="moderate",
    ),
    # --- ik_llama.cpp llama-sweep-bench and llama-benchy (issue 14): engine tests over KV depth ---
    Case(
        "llama_sweep_bench/ik-llama-cpp-discussion334-sweep-bench-log-gemma3-27b-qat-q4km-a6000-cut-after-two-rows.log",
        MEAS004,
        "warn",
        "the log names the A6000, Q4_K_M and 'Gemma 3 27b It Qat', a general.name the catalog cannot place: say "
        "the model is unknown, by name, on both rows",
        run=None,
        cap="moderate",
        present=(("MEAS004", "'Gemma 3 27b It Qat' (setup.model) is unknown to the catalog"),),
    ),
    Case(
        "llama_sweep_bench/ik-llama-cpp-discussion334-sweep-bench-log-gemma3-27b-qat-q4km-a6000-cut-after-two-rows.log",
        ("DEC004", "moderate", "upgrade-bandwidth"),
        "warn",
        "with the model named, 34 tok/s at batch 1 is about three quarters of the A6000's bandwidth ceiling for "
        "4.9-bit weights: quantization is spent, a faster card is the lever",
        query="?model=gemma-3-27b",
        run=None,
        cap="moderate",
    ),
    Case(
        "llama_sweep_bench/ik-llama-cpp-discussion385-sweep-bench-xeon-cpu-only-qwen3-235b-and-30b-q8-two-tables-crlf.md.txt",
        MEAS004,
        "warn",
        "two CPU-only sweeps whose models are named only in the headings: ask for model, quantization and CPU on all "
        "64 rows",
        run=None,
        cap="moderate",
    ),
    Case(
        "llama_sweep_bench/ik-llama-cpp-pr494-sweep-bench-rtx4080-llama3-8b-iq1m-pp2048.md.txt",
        MEAS004,
        "warn",
        "a bare sweep table: nothing names the GPU, model or quantization",
        run=None,
        cap="moderate",
    ),
    Case(
        "llama_benchy/llama-benchy-readme-0.2.2-gpt-oss-120b-depth-0-to-32768-no-prefix-caching.md.txt",
        MEAS004,
        "warn",
        "gpt-oss-120b is known, the endpoint's GPU, quantization and engine are not: ask for them",
        run=None,
        cap="moderate",
        present=(("MEAS004", "setup.hardware"),),
    ),
    Case(
        "llama_benchy/llama-benchy-readme-0.2.2-gpt-oss-120b-depth-0-to-32768-no-prefix-caching.md.txt",
        None,
        None,
        "on the DGX Spark its URL names, MXFP4 under vLLM: prompts of 2,048 + depth tokens up to 34,816 prefilled at "
        "6.9-9.5k tok/s and decode near 70 tok/s; at most low notes (the step budget, the KV reads at 34k)",
        query="?hardware=nvidia-dgx-spark-gb10&quantization=mxfp4&runtime=vllm",
        run=None,
        cap="low",
    ),
    Case(
        "llama_benchy/llama-benchy-readme-0.2.2-gpt-oss-120b-prefix-caching-ctx-rows-c1-c2.md.txt",
        MEAS004,
        "warn",
        "prefix caching, ctx_pp/ctx_tg rows and two concurrencies: the device and engine are still what to add",
        run=None,
        cap="moderate",
    ),
    Case(
        "llama_benchy/djangodevreng-llama-benchy0.4.0-dgx-spark-gb10-nemotron3-nano-30b-bf16-01-chat-c1-5-10.log",
        MEAS004,
        "warn",
        "a whole llama-benchy stdout against vLLM: the served name resolves to Nemotron-3-Nano-30B-A3B, the GPU is "
        "not in the log",
        run=None,
        cap="moderate",
        present=(("MEAS004", "setup.hardware"),),
    ),
    Case(
        "llama_benchy/djangodevreng-llama-benchy0.4.0-dgx-spark-gb10-nemotron3-nano-30b-bf16-01-chat-c1-5-10.log",
        ("DEC001", "severe", "quantize-weights"),
        "warn",
        "on the DGX Spark in BF16, 29 tok/s per stream is 77% of the 38 tok/s a 3.6B-active MoE can read at 273 "
        "GB/s: 8-bit weights are the lever (the run used BF16; the repo's FP8 profile exists)",
        query="?hardware=nvidia-dgx-spark-gb10&quantization=bf16&runtime=vllm",
        run=1,
    ),
    Case(
        "llama_benchy/djangodevreng-llama-benchy0.4.0-dgx-spark-gb10-gemma4-26b-a4b-bf16-04-multi-turn-depth4-runner-report.md.txt",
        MEAS004,
        "warn",
        "the runner's report around the table; gemma-4-26b-a4b is not in the catalog",
        run=None,
        cap="moderate",
    ),
    Case(
        "llama_benchy/llama-benchy-schemas-sample-0.2.2-mock-server-c1-c2-json.json",
        MEAS004,
        "warn",
        "the tool's JSON sample, from its mock server (model 'test'): nothing to judge until a setup is named",
        run=None,
        cap="moderate",
    ),
    Case(
        "vllm_offline/cmontemuino-vllm0.9.1-rocm-mi300x-llama31-8b-bench-latency-bs1-in128-out128-fp16.json",
        MEAS004,
        "warn",
        "vllm bench latency at batch 1: an engine test, no workload advice",
        cap="moderate",
    ),
    Case(
        "vllm_offline/cmontemuino-vllm0.9.1-rocm-mi300x-llama31-8b-bench-latency-bs8-in128-out128-fp16-slow-first-iter.json",
        MEAS004,
        "warn",
        "vllm bench latency at batch 8 with a slow first iteration",
        cap="moderate",
    ),
    Case(
        "vllm_offline/zhangxinyuehfad-vllm-nightly-latency_llama8B_tp1-15-iters-dummy-weights.json",
        MEAS004,
        "warn",
        "vLLM's nightly latency test (dummy weights): an engine test with nothing named to judge",
        cap="moderate",
    ),
    Case(
        "vllm_offline/zhangxinyuehfad-vllm-nightly-throughput_llama8B_tp1-sharegpt-200-dummy-weights.json",
        MEAS004,
        "warn",
        "vLLM's nightly throughput test, 200 ShareGPT prompts at once: offline, no queue or prompt advice",
        cap="moderate",
    ),
    Case(
        "sglang_one_batch/sglang-gb200-qwen3-30b-a3b-tp1-in1024-out8192-b1-to-64-bench_one_batch.jsonl",
        MEAS004,
        "warn",
        "bench_one_batch at batch 1-64: engine tests",
        run=None,
        cap="moderate",
    ),
    Case(
        "sglang_offline/sglang-gb200-qwen3-30b-a3b-tp1-sharegpt-osl8192-1-prompt-bench_offline_throughput.jsonl",
        MEAS004,
        "warn",
        "bench_offline_throughput names neither model nor hardware: say what is missing, nothing else",
        cap="moderate",
    ),
    Case(
        "sglang_offline/sglang-gb200-qwen3-30b-a3b-tp1-sharegpt-osl8192-1-prompt-bench_offline_throughput.jsonl",
        None,
        "pass",
        "one prompt on a GB200 with the readme's setup: 358 tok/s decode of a 3B-active MoE, no false alarm",
        query="?model=qwen3-30b-a3b&hardware=nvidia-gb200-per-gpu&quantization=bf16",
        cap="low",
    ),
    Case(
        "sglang_offline/sglang-gb200-qwen3-30b-a3b-tp1-sharegpt-osl8192-32-prompts-bench_offline_throughput.jsonl",
        MEAS004,
        "warn",
        "32 prompts through the offline engine: aggregate rates only, and the setup is missing",
        cap="moderate",
    ),
    Case(
        "sglang_offline/sglang-qwen3.5-35b-a3b-fp8-random-isl1024-osl1024-128-prompts-bench_offline_throughput.jsonl",
        MEAS004,
        "warn",
        "128 random prompts through the offline engine, setup missing",
        cap="moderate",
    ),
    Case(
        "sglang_bench/datacrunch-h200-sglang-2024-12-llama31-405b-online-rates-1-to-8-no-request-throughput.jsonl",
        ("PRE007", "critical", "add-capacity"),
        "warn",
        "8 req/s offered of 1k/1k prompts to a 405B: 3.58 served, a median TTFT of 124 s; the request rate the "
        "record lacks is completed / duration, as bench_serving computes it",
        run=3,
        present=(("PRE007", "offered 8 req/s"),),
    ),
    Case(
        "sglang_bench/datacrunch-h200-sglang-2024-12-llama31-405b-online-rates-1-to-8-no-request-throughput.jsonl",
        ("DEC001", "low", "quantize-weights"),
        "pass",
        "at 1 req/s on the 8 x H200 at TP 8 its script names: decode at about half the bf16 bandwidth ceiling, "
        "FP8 weights the one low note",
        query="?hardware=nvidia-h200-sxm&model=llama-3.1-405b&quantization=bf16&tensor_parallel=8",
        cap="low",
    ),
    Case(
        "trtllm_bench/trtllm-docs-0.17-throughput-trt-engine-llama31-8b-fp8.log",
        MEAS004,
        "warn",
        "trtllm-bench throughput with no GPU named",
        cap="moderate",
    ),
    Case(
        "trtllm_bench/trtllm-docs-pytorch-multimodal-qwen2-vl-request-details-latency-breakdown.txt",
        SMALL_SAMPLE,
        "warn",
        "10 multimodal requests",
        cap="moderate",
    ),
    Case(
        "trtllm_bench/ericgong2005-trtllm-1.1.0rc2-pytorch-llama-3.2-3b-rtx-pro-6000-c8-stepbystep.md.txt",
        SMALL_SAMPLE,
        "warn",
        "16 requests at --concurrency 8 (7.99 measured) on the PyTorch backend: the p99 is of 16 samples; the "
        "report's bfloat16 weights resolve, so only the GPU and the decode rate are asked for",
        cap="moderate",
        present=(("MEAS004", "setup.hardware"),),
    ),
    Case(
        "trtllm_bench/gpu-recipes-a3ultra-trtllm-0.17-build-and-throughput-llama31-405b-fp8-tp8-h200.log",
        MEAS004,
        "warn",
        "a whole build-and-throughput pod log: the report after the build blocks names the 405B FP8 engine at TP 8, "
        "not the GPU, so the hardware is what to add",
        cap="moderate",
        present=(("MEAS004", "setup.hardware"),),
    ),
    Case(
        "trtllm_bench/gpu-recipes-a3ultra-trtllm-0.17-build-and-throughput-llama31-405b-fp8-tp8-h200.log",
        None,
        "pass",
        "on the 8 x H200 its README names: 30,000 requests of 128/128 tokens at 3,914 output tok/s, an offline "
        "engine test without per-request latencies; no rule has a finding to make",
        query="?hardware=nvidia-h200-sxm",
    ),
    # --- llama-server, Ollama ---
    Case(
        "llama_server/danbev-llama-server-completion-llama2-7b-q4km-jq.json",
        MEAS004,
        "warn",
        "one /completion on a Mac: no GPU named; the model (llama-2-7b) is known",
        cap="moderate",
        present=(("MEAS004", "Missing setup."),),  # the model resolves (models_added.csv / aliases.toml)
    ),
    Case(
        "ollama/cokacho-gemma4-generate-nonstream-prettyprinted-2026-04.json",
        ("PRE006", "critical", "warm-up-model"),
        "warn",
        "13 s of model loading in a 13.9 s TTFT",
    ),
    Case(
        "ollama/hank2333-qwen3.5-4b-generate-nonstream-2026-04.json",
        MEAS004,
        "warn",
        "Qwen3.5-4B (qwen3.5-4b, models_added.csv): 239 ms of loading in a 771 ms TTFT is a low note; the "
        "missing GPU and file type are the moderate one",
        cap="moderate",
        present=(("MEAS004", "setup.quantization, setup.hardware"),),
    ),
    Case(
        "ollama/kgthepm-mistral-generate-nonstream-2025-03.json",
        MEAS004,
        "warn",
        "a warm call, no GPU named",
        cap="moderate",
    ),
    Case(
        "ollama/satyamsh04-qwen2.5-coder-7b-generate-powershell-bom-2026-06.json",
        ("PRE006", "critical", "warm-up-model"),
        "warn",
        "10 s of model loading in a 10.4 s TTFT (Qwen2.5-Coder-7B, qwen2.5-coder-7b in models_added.csv; its "
        "file type is asked for)",
        present=(("MEAS004", "setup.quantization"),),
    ),
    # --- /metrics scrapes ---
    Case(
        "prometheus/vllm-0.25.1-cpu-opt125m-idle-metrics.txt",
        MEAS004,
        "warn",
        "an idle server: nothing runs, nothing waits; its served name opt-125m-tp2 is OPT-125M (aliases.toml), so "
        "only the GPU and the weights' format are asked for",
        cap="moderate",
        present=(("MEAS004", "Missing setup.quantization, setup.hardware"),),
    ),
    Case(
        "prometheus/vllm-0.25.1-cpu-opt125m-loaded-metrics.txt",
        ("CFG001", "moderate", "tune-runtime-parallelism"),
        "warn",
        "64 running at the cap, 64 waiting, KV 11 % full: raise --max-num-seqs, ahead of the missing context",
        cap="moderate",
    ),
    Case(
        "prometheus/vllm-v1-qwen1.5-0.5b-idle-metrics-2025-11.txt",
        MEAS004,
        "warn",
        "an idle V1 server",
        cap="moderate",
    ),
    # --- console summaries, llmperf responses ---
    Case(
        "llmperf_responses/leaderboard-groq-llama2-70b_550_150_individual_responses.json",
        MEAS004,
        "warn",
        "150 responses with no model or concurrency: the summary beside it has them",
        cap="moderate",
    ),
    Case(
        "llmperf_responses/triton-llm-llama2-7b_550_150_individual_responses.json",
        SMALL_SAMPLE,
        "warn",
        "2 responses",
        cap="moderate",
    ),
    Case(
        "bench_console/yiliu30-vllm-fork-pp-local-test-res-two-blocks-hash-prefixed.txt",
        SMALL_SAMPLE,
        "warn",
        "32 requests at 32 streams, 2,048-token prompts, TTFT 7 s, no GPU: the TTFT may be a queue, so "
        "the prompt advice stays a low note",
        run=None,
        cap="moderate",
        present=(("PRE001", "may queue"),),
    ),
    Case(
        "bench_console/dennislee22-vllm0.10.1.1-a100-qwen2-7b-benchmark_serving-1024-1024-with-command-and-server-log.txt",
        SMALL_SAMPLE,
        "warn",
        "10 requests of 1,024 tokens each way, the command pasted above the summary: 10 samples first",
        cap="moderate",
    ),
    Case(
        "bench_console/dennislee22-vllm0.10.1.1-a100-qwen2-7b-benchmark_serving-sweep-1-to-1000-prompts-section.md.txt",
        ("MEAS005", "moderate", "improve-measurement"),
        "warn",
        "the 1,000-prompt point of the sweep: 894 succeeded and the summary has no failed line; the command's "
        "--num-prompts 1000 says 106 failed, so the rest is a biased sample",
        run=9,
        cap="moderate",
        present=(("MEAS005", "106 of 1,000 requests failed"),),
    ),
    Case(
        "bench_console/dennislee22-vllm0.10.1.1-a100-qwen2-7b-benchmark_serving-sweep-1-to-1000-prompts-section.md.txt",
        SMALL_SAMPLE,
        "warn",
        "the sweep's first point, one request, on the A100 its README names: one sample, nothing else to judge",
        query="?hardware=nvidia-a100-80gb-pcie&runtime=vllm&quantization=bf16",
        cap="moderate",
        absent=("MEAS005",),
    ),
    Case(
        "vllm_bench/djangodevreng-vllm0.26-dgx-spark-gb10-nemotron3-nano-30b-bf16-09-reasoning-poisson0.2.json",
        ("PRE007", "moderate", "add-capacity"),
        "warn",
        DGX_SPARK_REASONING,
        cap="moderate",
        present=(("PRE007", "offered 0.2"),),
    ),
    Case(
        "bench_console/djangodevreng-vllm0.26-dgx-spark-gb10-nemotron3-nano-30b-bf16-09-reasoning-namespace-progress.log",
        ("PRE007", "moderate", "add-capacity"),
        "warn",
        DGX_SPARK_REASONING,
        cap="moderate",
        present=(("PRE007", "offered 0.2"),),
    ),
    Case(
        "bench_console/djangodevreng-vllm0.26-dgx-spark-gb10-nemotron3-nano-30b-bf16-09-reasoning-docker-exec-command.md.txt",
        ("PRE007", "moderate", "add-capacity"),
        "warn",
        DGX_SPARK_REASONING,
        cap="moderate",
        present=(("PRE007", "offered 0.2"),),
    ),
    # --- once strict xfails (issue 12/13, fixed): unified memory, engine tests, cancellations ---
    Case(
        "llama_bench/lhl-b6865-rocm-gfx1151-llama32-1b-tg128.jsonl",
        None,
        "pass",
        "Llama-3.2-1B Q4_K_M at 193 tok/s on Strix Halo is 57 % of the ceiling: healthy",
    ),
    Case(
        "llama_bench/lhl-b6865-rocm-gfx1151-quick-test-mixed-stderr.jsonl",
        None,
        None,
        "Llama-3.2-1B tg tests on Strix Halo: no offload finding on a unified-memory APU",
        run=None,
        absent=("DEC006",),
    ),
    Case(
        "llama_bench/lhl-b6865-rocm-gfx1151-gpt-oss-20b-default-hip.jsonl",
        None,
        None,
        "gpt-oss-20b tg tests on Strix Halo: no 'weights in system memory' on a unified-memory APU",
        query="?hardware=amd-ryzen-ai-max-plus-395",
        run=None,
        absent=("DEC006",),
    ),
    Case(
        "llama_bench/brayniac-b5606-cuda-rtx4090-snowpiercer-15b-q3kl.json",
        None,
        None,
        "pp8192 with flash attention off on an RTX 4090 at 3,024 tok/s: '-fa 1' is engine advice worth a "
        "moderate note, but an engine test's pp time is not a user's TTFT and is never critical",
        cap="moderate",
        present=(("CFG009", "The engine prefills 8,192-token tests with flash attention off"),),
    ),
    Case(
        "aiperf/aiperf-gptoss20b-c100-cancel10-profile_export_aiperf.json",
        None,
        None,
        "the 11 'failures' are aiperf's deliberate RequestCancellationError (request_cancellation_rate 10): "
        "not a biased sample",
        absent=("MEAS005",),
    ),
    # --- issue 14: hidden real files from repositories not read before ---
    Case(
        "trtllm_bench/leiwu0812-trtllm-1.1.0rc2-report-json-pytorch-gpt-oss-120b-eagle3-tp8-ep4.json",
        ("CFG001", "critical", "tune-runtime-parallelism"),
        "warn",
        "a real --report_json: 1,000 requests queued at once (505 in flight on average) against --max_batch_size 10",
        present=(("MEAS004", "setup.hardware"),),
    ),
    Case(
        "trtllm_bench/leiwu0812-trtllm-1.1.0rc2-report-json-pytorch-gpt-oss-120b-eagle3-tp8-ep4.json",
        None,
        None,
        "Eagle3 at --max_batch_size 10: at most 10 streams share a weight read, not the 505 queued, so no "
        "'speculative decoding costs more than it saves'",
        absent=("DEC007",),
    ),
    Case(
        "aiperf/anud18-aiperf0.10-schema1.3-rtx5090-qwen3.6-35b-a3b-nvfp4-vllm-agent-c2-warmup-phase-profile_export_aiperf.json",
        SMALL_SAMPLE,
        "warn",
        "96 multi-turn agent requests at concurrency 2 (the warm-up phase left out) on an RTX 5090",
        cap="moderate",
    ),
    Case(
        "aiperf/aiperf-0.8-schema1.0-mock-server-not-streamed-c4-profile_export_aiperf.json",
        ("MEAS001", "moderate", "improve-measurement"),
        "warn",
        "64 unstreamed requests to aiperf's mock server: request latency only, nothing to judge but the sample",
        cap="moderate",
    ),
    Case(
        "aiperf/databloom-aiperf-0.8-qwen3.5-4b-q4km-all-20-requests-timed-out-profile_export_aiperf.json",
        ("MEAS005", "critical", "improve-measurement"),
        "fail",
        "every one of the 20 requests timed out: the benchmark measured nothing",
    ),
    Case(
        "aiperf_csv/databloom-aiperf-0.8-llama-3.2-3b-q4km-two-endpoints-10-of-20-timed-out-profile_export_aiperf.csv",
        ("MEAS005", "critical", "improve-measurement"),
        "fail",
        "10 of 20 requests timed out: the other numbers describe a biased sample",
    ),
    Case(
        "llama_bench/1337hero-b7361-vulkan-rx7900xtx-llama2-7b-q4_0-three-tables-gpu0-gpu1-then-both.txt",
        None,
        "pass",
        "LLaMA-2 7B Q4_0 (llama-2-7b, models_added.csv, from the file name) on one and two RX 7900 XTX under "
        "Vulkan: tg128 at 52-69 % of the 251 tok/s bandwidth ceiling and pp512 inside the expected band, on all "
        "six rows: nothing to change and nothing to ask for",
        run=None,
    ),
    Case(
        "llama_bench/llamacpp-readme-b5163-cuda-rtx4080-qwen2.5-7b-q4km-csv.csv",
        MEAS004,
        "warn",
        "the README's -o csv output of Qwen2.5-7B Q4_K_M on an RTX 4080: the catalog has no RTX 4080, so the "
        "hardware is asked for",
        run=None,
        cap="moderate",
        present=(("MEAS004", "setup.hardware"),),
    ),
    # --- session 7: aiperf schema 1.5 written here, hidden real files from five more repositories ---
    Case(
        "aiperf/aiperf-0.13.0.dev20261023-schema1.5-llama-server-tiny-random-llama-c1-profile_export_aiperf.json",
        SMALL_SAMPLE,
        "warn",
        "a real schema 1.5 export: 24 streamed requests at one stream against the random tiny Llama on llama-server; "
        "only measurement advice, and the model is no catalogued one",
        cap="moderate",
        present=(("MEAS004", "unknown to the catalog"),),
    ),
    Case(
        "aiperf_csv/aiperf-0.13.0.dev20261023-schema1.5-llama-server-tiny-random-llama-c1-profile_export_aiperf.csv",
        SMALL_SAMPLE,
        "warn",
        "the CSV twin of the 1.5 run: no model or config in it, so the missing setup is asked for",
        cap="moderate",
    ),
    Case(
        "aiperf_records/aiperf-0.13.0.dev20261023-schema1.5-llama-server-tiny-random-llama-c1-warmup-4-profile_export.jsonl",
        SMALL_SAMPLE,
        "warn",
        "the 24 profiling records of the 1.5 run, its 4 warm-up records left out",
        cap="moderate",
    ),
    Case(
        "bench_console/wentao274-vllm-bench-serve-minimax-m2.5-fp8-tp8-h100-c4-in10240-out256.log",
        MEAS004,
        "warn",
        "MiniMax-M2.5 (minimax-m2.5, models_added.csv) at 4 streams of 10k-token prompts on 8 H100 (the "
        "repository's config, not the log): the log names neither the GPU nor the weights' format, so they are "
        "asked for and the 582 ms TTFT is only noted, at low",
        cap="moderate",
        present=(("MEAS004", "setup.hardware"), ("PRE001", "10,279 tokens")),
    ),
    Case(
        "bench_console/wentao274-vllm-bench-serve-minimax-m2.5-fp8-tp8-h100-c4-in10240-out256.log",
        ("CFG008", "low", "tune-runtime-parallelism"),
        "pass",
        "with the repository's deployment named (TP 8 on H100, an SXM node assumed; the official FP8 weights; "
        "vLLM): a 10B-active MoE at 4 streams has nothing to fix, expert parallelism is the one low note",
        query="?hardware=nvidia-h100-sxm&quantization=fp8&runtime=vllm&tensor_parallel=8",
        cap="low",
    ),
    Case(
        "bench_console/wentao274-vllm-bench-serve-minimax-m2.5-w8a8-tp8-hygon-bw1000-c4-in10240-out256.log",
        MEAS004,
        "warn",
        "the same scenario on a Hygon BW1000: the W8A8 path names the weights' format, the device is asked for, "
        "a 4.1 s median TTFT",
        cap="moderate",
        present=(("PRE001", "10,240 tokens"),),
    ),
    Case(
        "bench_console/wentao274-vllm-kunlun-bench-serve-minimax-m2.5-w8a8-p800-c10-in194560-62-of-100-no-failed-line.log",
        ("MEAS005", "severe", "add-capacity"),
        "warn",
        "195k-token prompts at 10 streams on a Kunlun P800: 38 of the 100 prompts the argument dump names never "
        "succeeded (no 'Failed requests' line), so the rest is a biased sample",
        present=(("MEAS005", "38 of 100 requests failed"),),
    ),
    Case(
        "bench_console/vllm-ascend-docs-performance-benchmark-qwen3-8b-vl-no-stream-embedding-three-summaries.md.txt",
        SMALL_SAMPLE,
        "warn",
        "three guide examples of 10 requests each (chat, vision without streaming, embeddings): small samples, "
        "and nothing about prompts or decode",
        run=None,
        cap="moderate",
    ),
    Case(
        "bench_console/william-qmul-sglang-lora-bench-not-streamed-itl-zero-six-rates.md.txt",
        MEAS004,
        "warn",
        "SGLang LoRA serving whose responses came whole: only response times are kept, so no TTFT, ITL or decode "
        "rule speaks and the decode rate is asked for",
        run=None,
        cap="moderate",
        absent=("MEAS008", "DEC002", "DEC003", "PRE001", "PRE004"),
        present=(("MEAS004", "metrics.decode_tok_s"),),
    ),
    Case(
        "llama_benchy/gabe298-vllm-qwen3.8-27b-int4a16-autoround-depth-0-to-230000.md.txt",
        MEAS004,
        "warn",
        "an int4a16 AutoRound checkpoint of Qwen3.8-27B (qwen3.8-27b, models_added.csv) on an unnamed GPU: the "
        "quantization, hardware and runtime are asked for",
        run=None,
        cap="moderate",
        present=(("MEAS004", "setup.quantization, setup.hardware"),),
    ),
    Case(
        "llama_benchy/gabe298-vllm-qwen3.8-27b-nvfp4a16-awq-depth-0-to-200000.md.txt",
        MEAS004,
        "warn",
        "the NVFP4a16 checkpoint of the same model: the same questions",
        run=None,
        cap="moderate",
    ),
    Case(
        "llmperf/philschmid-tgi-2.0.1-llama3-8b-tp1-concurrency-1-to-128-collected-summaries.json",
        SMALL_SAMPLE,
        "warn",
        "100 requests at one stream against TGI: Meta-Llama-3-8B-Instruct is Llama 3 8B (not 3.1); the GPU is asked for",
        cap="moderate",
        present=(("MEAS004", "Missing setup."),),
    ),
    Case(
        "llmperf/philschmid-tgi-2.0.1-mistral-7b-v0.2-tp1-concurrency-1-to-128-collected-summaries.json",
        SMALL_SAMPLE,
        "warn",
        "the Mistral 7B v0.2 sweep (mistral-7b-v0.2, models_added.csv, not v0.3): a small sample; the GPU is asked for",
        cap="moderate",
        present=(("MEAS004", "Missing setup."),),
    ),
]


def test_every_real_file_has_a_case() -> None:
    covered = {(c.values[0] if hasattr(c, "values") else c).path for c in CASES}
    assert [f for f in _real_files() if f not in covered] == []


def _sev(label: str) -> int:
    return SEVERITIES.index(label)


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_top_recommendation_of_a_real_file(client: Any, case: Case) -> None:
    response = client.post("/api/v1/advise" + case.query, content=(FIXTURES / case.path).read_bytes())
    assert response.status_code == 200, response.text
    body = response.json()
    results: list[dict[str, Any]] = body.get("runs", [body])
    checked = results if case.run is None else [results[case.run]]
    for result in checked:
        recs = result["recommendations"]
        seen = [(r["rule_id"], r["severity"], r["title"]) for r in recs]
        if case.verdict is not None:
            assert result["verdict"] == case.verdict, (case.why, result["verdict_reasons"], seen)
            if case.verdict != "pass":
                assert result["verdict_reasons"], "a verdict other than pass says why"
                assert result["verdict_reasons"][0]["kind"] == "finding"
        if case.verdict is not None or case.top is not None:
            top = (recs[0]["rule_id"], recs[0]["severity"], recs[0]["action"]) if recs else None
            assert top == case.top, (case.why, seen)
        assert not {r["rule_id"] for r in recs} & set(case.absent), (case.why, seen)
        if case.cap is not None:
            assert all(_sev(r["severity"]) <= _sev(case.cap) for r in recs), (case.why, seen)
        for rule_id, text in case.present:
            assert any(r["rule_id"] == rule_id and text in r["title"] for r in recs), (case.why, rule_id, seen)
    if case.path.split("/")[0] in MICROBENCHMARK_DIRS:
        for result in results:
            actions = {r["action"] for r in result["recommendations"]}
            assert not actions & WORKLOAD_ACTIONS, (result["run"]["source"], actions)


def test_missing_context_never_trips_a_severe_gate(client: Any) -> None:
    """A file without hardware or quantization: the finding asks for them at moderate, so a CI
    job gating on severe passes, and the fix names flags that exist."""
    data = (FIXTURES / "vllm_bench" / "vllm_bench_serve.json").read_bytes()
    body = client.post("/api/v1/advise", content=data).json()
    severities = {r["rule_id"]: r["severity"] for r in body["recommendations"]}
    assert severities["MEAS004"] == "moderate"
    assert not {s for s in severities.values()} & {"severe", "critical"}
    fix = next(r for r in body["recommendations"] if r["rule_id"] == "MEAS004")["fix"]["other"]
    assert "`advisor submit --hardware <id>`" in fix
    assert "?quantization=<id>" in fix
    assert body["verdict"] == "warn"
    reason = next(r for r in body["verdict_reasons"] if r["name"] == "MEAS004")
    assert reason == {
        "kind": "finding",
        "name": "MEAS004",
        "limit": "moderate",
        "found": "moderate",
        "text": reason["text"],
    }


def test_the_ttft_breakdown_of_a_real_file_adds_up(client: Any) -> None:
    data = (FIXTURES / "vllm_bench" / "vllm_bench_serve.json").read_bytes()
    body = client.post("/api/v1/advise?hardware=nvidia-h100-sxm&quantization=bf16&runtime=vllm", content=data).json()
    parts = body["analysis"]["ttft_breakdown"]
    # vllm bench serve at max concurrency 8 reports no queue time, waiting count or offered rate:
    # the queue stays unknown rather than guessed, and the known parts make up the rest.
    assert parts["queueing"] == {
        "ms": None,
        "source": "no queue time, waiting count or offered rate reported",
        "confidence": 0.0,
    }
    total = sum(parts[k]["ms"] for k in ("prefill", "cache", "remainder"))
    assert total == pytest.approx(parts["total_ms"], abs=0.3)
    assert parts["basis"] == "ttft_ms.p50"
    assert parts["dominant"] == "prefill"  # 1,017 prompt tokens on an H100 in a 47 ms TTFT
    assert body["run"]["metrics"]["ttft_ms"]["p50"] == pytest.approx(parts["total_ms"], abs=0.05)


def test_a_gguf_named_f16_with_mxfp4_experts_is_judged_at_its_measured_bits(client: Any) -> None:
    """llama-bench of gpt-oss-20b "F16" on Strix Halo: model_size × 8 / model_n_params is 5.27 bits
    (the experts are MXFP4). At 16 bits tg128's 50 tok/s would beat the physics; with the experts
    at what the size leaves and the rest at 16 it does not, so nothing may say the declared setup
    is not what ran."""
    data = (FIXTURES / "llama_bench" / "lhl-b6865-rocm-gfx1151-gpt-oss-20b-default-hip.jsonl").read_bytes()
    response = client.post("/api/v1/advise?hardware=amd-ryzen-ai-max-plus-395", content=data)
    assert response.status_code == 200, response.text
    runs = response.json()["runs"]
    assert len(runs) == 10
    for result in runs:
        assert "MEAS006" not in {r["rule_id"] for r in result["recommendations"]}
        assert result["analysis"]["notes"][0].startswith("bits per weight derived: 5.27 from the file's model_size")
        assert not {r["action"] for r in result["recommendations"]} & WORKLOAD_ACTIONS
        # gpt-oss's experts are MXFP4 in that file and every other tensor F16: the experts take
        # what the file's size leaves, (5.27 × 21 − 1.11 × 16) / 19.89 ≈ 4.67 bits, and the F16
        # tensors, read by every token, keep 16 (not 5.27 bits for every weight).
        assert "the routed experts are stored at 4.67 bits" in result["analysis"]["notes"][0]
        # Only the experts are narrow: the F16 tensors every token reads could be quantized, so
        # nothing may say quantization is exhausted.
        assert "DEC004" not in {r["rule_id"] for r in result["recommendations"]}


def test_a_vllm_scrape_queued_at_the_sequence_cap_is_told_to_raise_it(client: Any) -> None:
    """vLLM 0.25.1 /metrics: 64 running, 64 waiting for scheduling capacity, the KV cache 11 % full.
    The cap binds, not memory: raise --max-num-seqs to 128. The scrape names no hardware or
    catalogued model; the missing-context finding is as severe (moderate) but asks rather than
    fixes, so the cap ranks first, and nothing speaks of memory."""
    path = FIXTURES / "prometheus" / "vllm-0.25.1-cpu-opt125m-loaded-metrics.txt"
    response = client.post("/api/v1/advise", content=path.read_bytes())
    assert response.status_code == 200, response.text
    first = response.json()["runs"][0] if "runs" in response.json() else response.json()
    recs = first["recommendations"]
    assert [(r["rule_id"], r["severity"], r["action"]) for r in recs] == [
        ("CFG001", "moderate", "tune-runtime-parallelism"),
        ("MEAS004", "moderate", "improve-measurement"),
    ], [(r["rule_id"], r["severity"], r["title"]) for r in recs]
    cap = recs[0]
    assert any("waiting for scheduling capacity" in n for n in first["run"]["source"]["notes"])
    assert cap["title"] == (
        "64 requests run at the sequence cap (max_num_seqs 64, read from the running count) while 64 wait "
        "and the KV cache is 11% full: the cap binds, not memory"
    )
    assert "--max-num-seqs 128" in str(cap["fix"])
    assert first["verdict"] == "warn", first["verdict_reasons"]


def _first(body: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = body["runs"][0] if "runs" in body else body
    return result


def test_aiperf_deliberate_cancellations_are_not_failures(client: Any) -> None:
    """aiperf --request-cancellation-rate 10 at 100 streams: 11 requests end in RequestCancellationError
    (code 499) by design. They were sent (num_requests 100) but did not fail, and the note says so."""
    path = FIXTURES / "aiperf" / "aiperf-gptoss20b-c100-cancel10-profile_export_aiperf.json"
    first = _first(client.post("/api/v1/advise", content=path.read_bytes()).json())
    run = first["run"]
    assert run["metrics"]["requests_completed"] == 89
    assert run["metrics"]["requests_failed"] == 0
    assert run["workload"]["num_requests"] == 100
    assert run["workload"]["output_tokens_requested"] == 250  # --osl 250
    assert any(
        n.startswith("11 request(s) cancelled on purpose (--request-cancellation-rate 10 %)")
        for n in run["source"]["notes"]
    ), run["source"]["notes"]
    assert "MEAS005" not in {r["rule_id"] for r in first["recommendations"]}


def test_an_engine_tests_flash_attention_note_is_a_stack_fix(client: Any) -> None:
    """brayniac llama-bench pp8192 -fa 0 on an RTX 4090: the note is moderate, in engine words, and its
    action is the stack fix (flash attention is a runtime setting, not a token budget)."""
    path = FIXTURES / "llama_bench" / "brayniac-b5606-cuda-rtx4090-snowpiercer-15b-q3kl.json"
    first = _first(client.post("/api/v1/advise", content=path.read_bytes()).json())
    note = next(r for r in first["recommendations"] if r["rule_id"] == "CFG009")
    assert (note["severity"], note["action"]) == ("moderate", "fix-serving-stack")
    assert "llama-bench takes -fa 1" in note["fix"]["llamacpp"]
    assert "TTFT" not in note["title"]


def test_a_reasoning_models_far_below_ceiling_decode_is_hedged(client: Any) -> None:
    """wellflat aiperf, gpt-oss-20b MXFP4 on the A100 its telemetry names: 55 tok/s is 5 % of the
    bandwidth ceiling, but a reasoning model's timed tokens may not all be counted. DEC002 says so,
    at half its confidence."""
    path = FIXTURES / "aiperf" / "wellflat-gptoss20b-vllm-c1-profile_export_aiperf.json"
    query = "?hardware=nvidia-a100-80gb-sxm&quantization=mxfp4&runtime=vllm"
    first = _first(client.post("/api/v1/advise" + query, content=path.read_bytes()).json())
    dec = next(r for r in first["recommendations"] if r["rule_id"] == "DEC002")
    assert "the count may also miss hidden reasoning tokens (gpt-oss-20b reasons before it answers)" in dec["title"]
    assert dec["confidence"] < 0.3
    assert _sev(dec["severity"]) <= _sev("moderate")
