"""End-to-end scenarios at the pure level: a realistic canonical run → build_context (real catalog,
real physics prior) → advise → the action that must come first (or in the top three).

Numbers follow the physics, not the implementation: decode ceilings are bandwidth ÷ bytes per
token (A10G 600 GB/s ÷ 16 GB ≈ 37.5 tok/s for Llama-3.1-8B bf16, DESIGN §1), prefill runs at
about half the dense tensor rate, KV is 128 KiB per token for Llama-3.1-8B. Healthy runs must stay
quiet: nothing above ``low`` and a ``pass`` verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import pytest

from advisor.canonical import SLO, decode_run
from advisor.rules import Advice, Severity, advise, build_context

LLAMA8 = "meta-llama/Llama-3.1-8B-Instruct"


@dataclass(frozen=True)
class Scenario:
    name: str
    run: dict[str, Any]
    first: str | None = None  # action that must rank first
    top3: tuple[str, ...] = ()  # actions that must appear in the top three
    #: The verdict the scenario implies: fail on a breached SLO or a failing rule, warn on a stable
    #: moderate-or-worse finding, pass otherwise (DESIGN §4). Required: every scenario states it.
    verdict: Literal["pass", "warn", "fail"] = field(kw_only=True)
    quiet: bool = False  # nothing above low
    slo: dict[str, float] | None = None
    baseline: list[dict[str, Any]] = field(default_factory=list)
    absent: tuple[str, ...] = ()  # rule ids that must not be recommended

    def advise(self) -> Advice:
        run = decode_run(self.run)
        baseline = [decode_run(b) for b in self.baseline]
        ctx = build_context(run, slo=SLO(**self.slo) if self.slo else None, baseline_runs=baseline)
        return advise(ctx, strict=True)


def vllm(
    hardware: str, *, model: str = LLAMA8, quant: str = "bf16", version: str = "0.11.0", **setup: Any
) -> dict[str, Any]:
    return {
        "runtime": "vllm",
        "runtime_version": version,
        "hardware": hardware,
        "model": model,
        "quantization": quant,
        **setup,
    }


def history(metrics: list[dict[str, Any]], base: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            **base,
            "measured_at": f"2026-11-2{i + 2}T08:00:00Z",
            "setup": {**base["setup"], "runtime_version": "0.11.0"},
            "metrics": m,
        }
        for i, m in enumerate(metrics)
    ]


REGRESSION_RUN = {
    "deployment": "chat-prod",
    "measured_at": "2026-11-29T08:00:00Z",
    "labels": {"git_sha": "abc123"},
    "setup": vllm("nvidia-h100-sxm", version="0.11.1"),
    "workload": {"num_requests": 1000, "concurrency": 16, "prompt_tokens_mean": 1000, "output_tokens_mean": 256},
    "metrics": {
        "decode_tok_s": 96,
        "itl_ms": {"p50": 10.4, "p99": 22},
        "ttft_ms": {"p50": 75, "p99": 160},
        "output_throughput_tok_s": 1480,
        "requests_completed": 1000,
    },
}

SCENARIOS = [
    Scenario(
        "a10g_bf16_chat_is_bandwidth_bound_quantize_first",
        # 600 GB/s ÷ 16.06 GB = 37.4 tok/s ceiling; 33.5 measured (90 %): only fewer bytes help.
        {
            "setup": vllm("nvidia-a10g"),
            "workload": {"num_requests": 500, "concurrency": 1, "prompt_tokens_mean": 400, "output_tokens_mean": 300},
            "metrics": {
                "decode_tok_s": 33.5,
                "ttft_ms": {"p50": 210, "p99": 260},
                "tpot_ms": {"p50": 29.9, "p99": 31.5},
            },
        },
        first="quantize-weights",
        slo={"decode_tok_s_min": 45},
        verdict="fail",
    ),
    Scenario(
        "healthy_h100_chat_stays_quiet",
        # 16 streams, 1,200-token context: ceiling ~158 tok/s per stream; 95 is a typical 60 %.
        {
            "setup": vllm("nvidia-h100-sxm", max_model_len=8192, engine_args={"max_num_seqs": 256}),
            "workload": {
                "num_requests": 2000,
                "concurrency": 16,
                "prompt_tokens_mean": 1000,
                "output_tokens_mean": 256,
            },
            "metrics": {
                "decode_tok_s": 95,
                "ttft_ms": {"mean": 62, "p50": 58, "p90": 90, "p99": 140, "max": 210},
                "itl_ms": {"p50": 10.5, "p99": 24},
                "output_throughput_tok_s": 1450,
                "queue_waiting_mean": 0,
                "queue_waiting_max": 0,
                "kv_cache_usage_mean": 0.08,
                "kv_cache_usage_max": 0.12,
                "prefix_cache_hit_rate": 0.05,
                "preemptions": 0,
                "requests_completed": 2000,
                "requests_failed": 0,
            },
        },
        quiet=True,
        slo={"ttft_p99_ms": 500, "itl_p99_ms": 100},
        verdict="pass",
    ),
    Scenario(
        "rag_prompt_with_a_shared_system_prompt_on_old_vllm",
        # vLLM 0.6 (V0) has prefix caching off by default: 3,000 of 3,500 tokens prefilled again each time.
        {
            "setup": vllm("nvidia-l4", version="0.6.3"),
            "workload": {
                "num_requests": 400,
                "concurrency": 1,
                "prompt_tokens_mean": 3500,
                "output_tokens_mean": 150,
                "shared_prefix_tokens": 3000,
            },
            "metrics": {"decode_tok_s": 16.3, "ttft_ms": {"p50": 950, "p99": 1100}},
        },
        first="enable-prefix-caching",
        verdict="warn",
    ),
    Scenario(
        "ollama_cold_model_load",
        # the seed's measurement: one call after the model was unloaded; load_duration dominates.
        {
            "setup": {
                "runtime": "ollama",
                "runtime_version": "0.12.3",
                "hardware": "nvidia-rtx-4090",
                "model": "mistral:7b",
            },
            "workload": {"num_requests": 1, "concurrency": 1, "prompt_tokens_mean": 26, "output_tokens_mean": 280},
            "metrics": {"load_ms": 2400, "ttft_ms": {"mean": 2450}, "prefill_tok_s": 1200, "decode_tok_s": 165},
        },
        first="warm-up-model",
        verdict="warn",
    ),
    Scenario(
        "ollama_default_parallelism_with_eight_users",
        # OLLAMA_NUM_PARALLEL defaults to 1: eight users take turns; TTFT is mostly waiting.
        {
            "setup": {
                "runtime": "ollama",
                "runtime_version": "0.12.3",
                "hardware": "nvidia-rtx-4090",
                "model": "llama3.1:8b",
            },
            "workload": {"num_requests": 400, "concurrency": 8, "prompt_tokens_mean": 500, "output_tokens_mean": 300},
            "metrics": {
                "decode_tok_s": 150,
                "output_throughput_tok_s": 145,
                "ttft_ms": {"p50": 14000, "p99": 16500},
                "queue_ms": {"p50": 13800},
            },
        },
        first="tune-runtime-parallelism",
        absent=("PRE005",),
        verdict="warn",
    ),
    Scenario(
        "a10g_kv_pool_full_at_0_8_memory",
        # 0.8 × 24 GB − 16 GB weights − 2 GiB reserve ≈ 1 GB of KV: 5 sequences; 27 wait.
        {
            "setup": vllm("nvidia-a10g", engine_args={"gpu_memory_utilization": 0.8}),
            "workload": {
                "num_requests": 2000,
                "concurrency": 32,
                "prompt_tokens_mean": 1500,
                "output_tokens_mean": 300,
            },
            "metrics": {
                "decode_tok_s": 31,
                "running_mean": 5,
                "queue_waiting_mean": 27,
                "kv_cache_usage_mean": 0.97,
                "output_throughput_tok_s": 155,
                "request_throughput_rps": 0.45,
                "ttft_ms": {"p50": 48000, "p99": 70000},
            },
        },
        first="raise-gpu-memory-utilization",
        absent=("PRE005",),
        verdict="warn",
    ),
    Scenario(
        "l4_preemptions_under_long_outputs",
        {
            "setup": vllm(
                "nvidia-l4", max_model_len=8192, engine_args={"max_num_seqs": 256, "gpu_memory_utilization": 0.9}
            ),
            "workload": {
                "num_requests": 1000,
                "concurrency": 64,
                "prompt_tokens_mean": 1000,
                "output_tokens_mean": 800,
            },
            "metrics": {
                "decode_tok_s": 9,
                "requests_completed": 1000,
                "duration_s": 600,
                "output_throughput_tok_s": 450,
                "preemptions": 380,
                "kv_cache_usage_mean": 0.98,
                "running_mean": 20,
                "queue_waiting_mean": 30,
                "ttft_ms": {"p50": 9000, "p99": 30000},
            },
        },
        top3=("raise-gpu-memory-utilization",),
        verdict="warn",
    ),
    Scenario(
        "a100_in_eager_mode",
        # 126 tok/s ceiling at batch 1; eager mode's per-step launch overhead leaves 37.
        {
            "setup": vllm("nvidia-a100-80gb-sxm", engine_args={"enforce_eager": True}),
            "workload": {"num_requests": 300, "concurrency": 1, "prompt_tokens_mean": 1000, "output_tokens_mean": 256},
            "metrics": {"decode_tok_s": 37, "ttft_ms": {"p50": 95, "p99": 120}},
        },
        first="fix-serving-stack",
        absent=("REG001", "DEC001"),
        verdict="warn",
    ),
    Scenario(
        "long_context_rag_on_h100",
        # 32 streams × ~12,100 tokens × 128 KiB = 51 GB of KV per step against 16 GB of weights.
        {
            "setup": vllm("nvidia-h100-sxm"),
            "workload": {
                "num_requests": 2000,
                "concurrency": 32,
                "prompt_tokens_mean": 12000,
                "output_tokens_mean": 256,
            },
            "metrics": {"decode_tok_s": 29, "itl_ms": {"p50": 34, "p99": 60}, "ttft_ms": {"p50": 700, "p99": 1400}},
        },
        top3=("quantize-kv-cache",),
        verdict="warn",
    ),
    Scenario(
        "llama_70b_q4_on_an_m2_ultra_is_out_of_bytes_to_shed",
        # 43 GB per token at 800 GB/s: 18.5 tok/s ceiling; 15 measured with 4.9-bit weights.
        # No Apple device reads 1.3x faster and server modules are not a Mac user's step up (issue 13),
        # so the bytes left to shed are the model's own.
        {
            "setup": {
                "runtime": "ollama",
                "runtime_version": "0.12.3",
                "hardware": "apple-m2-ultra",
                "model": "llama3.1:70b",
            },
            "workload": {"num_requests": 10, "concurrency": 1, "prompt_tokens_mean": 500, "output_tokens_mean": 256},
            "metrics": {"decode_tok_s": 15, "prefill_tok_s": 90},
        },
        first="smaller-model",
        verdict="warn",
    ),
    Scenario(
        "a_16k_budget_stalls_streams",
        # a whole 6,000-token prompt (~220 ms on an H100) lands in one step while 32 streams wait.
        {
            "setup": vllm("nvidia-h100-sxm", engine_args={"max_num_batched_tokens": 16384}),
            "workload": {
                "num_requests": 2000,
                "concurrency": 32,
                "prompt_tokens_mean": 6000,
                "output_tokens_mean": 300,
            },
            "metrics": {"decode_tok_s": 70, "itl_ms": {"p50": 12, "p99": 240}, "ttft_ms": {"p50": 350, "p99": 900}},
        },
        first="lower-batched-tokens",
        slo={"itl_p99_ms": 100},
        verdict="fail",
    ),
    Scenario(
        "trtllm_without_chunked_prefill",
        {
            "setup": {
                "runtime": "trtllm",
                "runtime_version": "1.0.0",
                "hardware": "nvidia-l40s",
                "model": LLAMA8,
                "quantization": "bf16",
            },
            "workload": {
                "num_requests": 1500,
                "concurrency": 16,
                "prompt_tokens_mean": 4000,
                "output_tokens_mean": 256,
            },
            "metrics": {"decode_tok_s": 34, "itl_ms": {"p50": 27, "p99": 330}, "ttft_ms": {"p50": 520, "p99": 1400}},
        },
        first="enable-chunked-prefill",
        verdict="warn",
    ),
    Scenario(
        "one_prefill_one_decode_gpu",
        {
            "setup": {
                "runtime": "sglang",
                "runtime_version": "0.5.5",
                "hardware": "nvidia-h100-sxm",
                "gpu_count": 2,
                "model": "Qwen/Qwen2.5-3B-Instruct",
                "quantization": "bf16",
                "engine_args": {"disaggregation_mode": "prefill"},
            },
            "workload": {"num_requests": 1000, "concurrency": 8, "prompt_tokens_mean": 1000, "output_tokens_mean": 300},
            "metrics": {"decode_tok_s": 180, "ttft_ms": {"p50": 60, "p99": 150}, "itl_ms": {"p50": 5.5, "p99": 9}},
        },
        first="avoid-disaggregation",
        verdict="warn",
    ),
    Scenario(
        "regression_after_an_engine_upgrade",
        REGRESSION_RUN,
        first="investigate-regression",
        verdict="fail",
        baseline=history(
            [
                {
                    "decode_tok_s": v,
                    "itl_ms": {"p50": 1000 / v, "p99": 21},
                    "ttft_ms": {"p50": 74, "p99": 158},
                    "output_throughput_tok_s": 1700,
                }
                for v in (112, 110, 113, 111, 112)
            ],
            REGRESSION_RUN,
        ),
    ),
    Scenario(
        "every_request_failed",
        {
            "setup": vllm("amd-mi300x", model="meta-llama/Llama-3.1-405B-Instruct", quant="fp8", version="0.6.3"),
            "workload": {
                "num_requests": 1000,
                "request_rate": 1000,
                "prompt_tokens_mean": 1000,
                "output_tokens_mean": 200,
            },
            "metrics": {"requests_completed": 0, "requests_failed": 1000},
        },
        first="improve-measurement",
        verdict="fail",
    ),
    Scenario(
        "a_benchmark_that_replays_one_prompt",
        # 3,000 tokens cannot be prefilled in 40 ms on an A10G (floor ~720 ms): every prompt was a cache hit.
        {
            "setup": vllm("nvidia-a10g"),
            "workload": {"num_requests": 500, "concurrency": 1, "prompt_tokens_mean": 3000, "output_tokens_mean": 200},
            "metrics": {"decode_tok_s": 32, "ttft_ms": {"p50": 40, "p99": 55}, "prefix_cache_hit_rate": 0.99},
        },
        first="improve-measurement",
        verdict="warn",
    ),
    Scenario(
        "a_4_bit_checkpoint_declared_as_bf16",
        # 95 tok/s is 2.5× what 16-bit weights allow on 600 GB/s: the physics findings must not fire.
        {
            "setup": vllm("nvidia-a10g"),
            "workload": {"num_requests": 300, "concurrency": 1, "prompt_tokens_mean": 500, "output_tokens_mean": 256},
            "metrics": {"decode_tok_s": 95, "ttft_ms": {"p50": 150, "p99": 190}},
        },
        first="improve-measurement",
        absent=("DEC001", "DEC002", "REG001"),
        verdict="warn",
    ),
    Scenario(
        "healthy_llamacpp_q4_on_a_4090_stays_quiet",
        # 4.9 GB per token at 1,008 GB/s: ~200 tok/s ceiling; 150 is a good llama.cpp run.
        {
            "setup": {
                "runtime": "llamacpp",
                "runtime_version": "b5606",
                "hardware": "nvidia-rtx-4090",
                "model": LLAMA8,
                "quantization": "Q4_K_M",
                "engine_args": {"-ngl": 99, "-fa": "on"},
            },
            "workload": {"num_requests": 1, "concurrency": 1, "prompt_tokens_mean": 512, "output_tokens_mean": 128},
            "metrics": {"decode_tok_s": 150, "prefill_tok_s": 9000},
        },
        quiet=True,
        verdict="pass",
    ),
    Scenario(
        "healthy_sglang_on_an_l40s_stays_quiet",
        {
            "setup": {
                "runtime": "sglang",
                "runtime_version": "0.5.5",
                "hardware": "nvidia-l40s",
                "model": "Qwen/Qwen2.5-7B-Instruct",
                "quantization": "fp8",
            },
            "workload": {"num_requests": 1000, "concurrency": 8, "prompt_tokens_mean": 800, "output_tokens_mean": 300},
            "metrics": {
                "decode_tok_s": 70,
                "ttft_ms": {"p50": 70, "p99": 160},
                "itl_ms": {"p50": 14, "p99": 30},
                "queue_waiting_mean": 0,
                "kv_cache_usage_mean": 0.1,
                "requests_completed": 1000,
            },
        },
        quiet=True,
        verdict="pass",
    ),
    Scenario(
        "a_bench_file_without_the_gpu",
        {
            "setup": {"runtime": "vllm", "model": LLAMA8, "quantization": "bf16"},
            "workload": {"num_requests": 500, "concurrency": 4, "prompt_tokens_mean": 1000, "output_tokens_mean": 200},
            "metrics": {"decode_tok_s": 40, "ttft_ms": {"p50": 300, "p99": 500}},
        },
        first="improve-measurement",
        absent=("DEC001", "DEC002"),
        verdict="warn",
    ),
    # ---- issue 12: read every run the way an expert would ----------------------------------------
    Scenario(
        "offered_32_served_0_4_is_a_queue_not_a_prompt",
        {
            "setup": vllm("nvidia-l4"),
            "workload": {
                "num_requests": 500,
                "request_rate": 32,
                "prompt_tokens_mean": 1000,
                "output_tokens_mean": 200,
            },
            "metrics": {
                "decode_tok_s": 14,
                "request_throughput_rps": 0.4,
                "requests_completed": 500,
                "ttft_ms": {"p50": 150000, "p99": 290000},
            },
        },
        first="add-capacity",
        absent=("PRE001", "PRE005", "REG002"),
        verdict="warn",
    ),
    Scenario(
        "inference_perf_stage_104_asked_73_served",
        {
            "setup": vllm("nvidia-h100-sxm"),
            "workload": {
                "num_requests": 6000,
                "request_rate": 104,
                "prompt_tokens_mean": 1000,
                "output_tokens_mean": 200,
            },
            "metrics": {
                "request_throughput_rps": 73,
                "requests_completed": 6000,
                "ttft_ms": {"p50": 4600, "p99": 9800},
                "tpot_ms": {"mean": 30, "p50": 30},
            },
        },
        first="add-capacity",
        absent=("PRE001", "REG002"),
        verdict="warn",
    ),
    Scenario(
        "a_reasoning_models_ttft_is_not_prefill",
        {
            "setup": vllm("nvidia-h100-sxm", model="openai/gpt-oss-20b", quant="mxfp4"),
            "workload": {"num_requests": 200, "concurrency": 1, "prompt_tokens_mean": 1000, "output_tokens_mean": 73},
            "metrics": {"decode_tok_s": 150, "ttft_ms": {"p50": 1400, "p99": 1700}, "requests_completed": 200},
        },
        first="improve-measurement",
        absent=("PRE001", "REG002"),
        verdict="warn",
    ),
    Scenario(
        "no_quantization_given_warns_but_never_fails",
        {
            "setup": {"runtime": "vllm", "hardware": "nvidia-a10g", "model": LLAMA8},
            "workload": {
                "num_requests": 300,
                "request_rate": 2.0,
                "prompt_tokens_mean": 512,
                "output_tokens_mean": 128,
            },
            "metrics": {
                "e2e_ms": {"mean": 4000},
                "tpot_ms": {"mean": 28, "p50": 28},
                "ttft_ms": {"p50": 200, "p99": 300},
            },
        },
        first="improve-measurement",
        verdict="warn",
    ),
    Scenario(
        "llama_bench_pp8192_is_an_engine_test",
        {
            "setup": {"runtime": "llamacpp", "hardware": "nvidia-rtx-4090", "model": LLAMA8, "quantization": "Q4_K_M"},
            "source": {"format": "llama_bench", "tool": "llama-bench"},
            "workload": {"num_requests": 5, "concurrency": 1, "prompt_tokens_mean": 8192},
            "metrics": {"prefill_tok_s": 6000, "ttft_ms": {"mean": 1365}},
        },
        absent=("PRE001", "PRE002", "PRE003", "PRE005", "PRE007"),
        verdict="pass",
    ),
    Scenario(
        "an_itl_of_chunk_arrivals_is_a_measurement_problem",
        {
            "setup": vllm("nvidia-h100-sxm", engine_args={"max_num_batched_tokens": 8192}),
            "workload": {
                "num_requests": 1000,
                "concurrency": 12,
                "prompt_tokens_mean": 8000,
                "output_tokens_mean": 200,
            },
            "metrics": {
                "ttft_ms": {"p50": 400, "p99": 900},
                "tpot_ms": {"mean": 12, "p50": 12},
                "itl_ms": {"p50": 0.03, "p99": 217},
                "requests_completed": 1000,
            },
        },
        first="improve-measurement",
        absent=("SCH001",),  # its p99 ÷ p50 would rest on the 0.03 ms median
        verdict="warn",
    ),
    Scenario(
        "a_breached_ttft_slo_fails_and_says_which",
        {
            "setup": vllm("nvidia-h100-sxm"),
            "workload": {"num_requests": 1000, "concurrency": 1, "prompt_tokens_mean": 500, "output_tokens_mean": 200},
            "metrics": {
                "decode_tok_s": 150,
                "ttft_ms": {"p50": 40, "p99": 261.7},
                "itl_ms": {"p50": 6.6, "p99": 9},
                "requests_completed": 1000,
            },
        },
        slo={"ttft_p99_ms": 200},
        verdict="fail",
    ),
]


def check(scenario: Scenario) -> None:
    """Advise on the scenario's run and assert everything it expects (shared by the scenario files)."""
    advice = scenario.advise()
    summary = [(r.rule_id, r.action, r.severity.label, r.title) for r in advice.recommendations]
    if scenario.first is not None:
        assert advice.recommendations, f"nothing recommended; expected {scenario.first}"
        assert advice.recommendations[0].action == scenario.first, summary
    for action in scenario.top3:
        assert action in [r.action for r in advice.recommendations[:3]], summary
    assert advice.verdict == scenario.verdict, (advice.verdict_reasons, summary)
    if scenario.quiet:
        assert all(r.severity <= Severity.LOW for r in advice.recommendations), summary
    for rule_id in scenario.absent:
        assert rule_id not in [r.rule_id for r in advice.recommendations], summary


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_scenario(scenario: Scenario) -> None:
    check(scenario)


def test_at_least_fifteen_scenarios() -> None:
    assert len(SCENARIOS) >= 15
    assert sum(s.quiet for s in SCENARIOS) >= 3


def test_the_verdict_says_which_slo_broke() -> None:
    scenario = next(s for s in SCENARIOS if s.name == "a_breached_ttft_slo_fails_and_says_which")
    reasons = [r.to_dict() for r in scenario.advise().verdict_reasons]
    assert [(r["kind"], r["name"], r["limit"], r["found"]) for r in reasons] == [("slo", "ttft_p99_ms", 200.0, 261.7)]


def test_the_overloaded_setup_reports_its_capacity() -> None:
    scenario = next(s for s in SCENARIOS if s.name == "offered_32_served_0_4_is_a_queue_not_a_prompt")
    top = scenario.advise().recommendations[0]
    assert top.rule_id == "PRE007"
    assert dict(top.details) == {"capacity_rps": 0.4, "offered_rps": 32.0, "needed": 80.0}
    assert "this setup serves about 0.4 req/s" in top.title and "needs about 80× of it" in top.title


def test_missing_context_derives_the_concurrency_and_says_so() -> None:
    scenario = next(s for s in SCENARIOS if s.name == "no_quantization_given_warns_but_never_fails")
    ctx = build_context(decode_run(scenario.run))
    assert ctx.measured.concurrency == 8.0  # 2 req/s × 4 s in the system (Little's law)
    assert ctx.notes == (
        "workload.concurrency derived: 8 streams by Little's law: workload.request_rate × e2e_ms.mean",
    )
    assert not ctx.is_missing("workload.concurrency")
    top = scenario.advise().recommendations[0]
    assert (top.rule_id, top.severity) == ("MEAS004", Severity.MODERATE)


def test_a_sweeps_knee_is_named_as_the_capacity() -> None:
    from advisor.rules.context import SweepCapacity

    scenario = next(s for s in SCENARIOS if s.name == "inference_perf_stage_104_asked_73_served")
    sweep = SweepCapacity("request_rate", 64.0, 62.5, 5, 104.0)
    ctx = build_context(decode_run(scenario.run), sweep=sweep)
    top = advise(ctx, strict=True).recommendations[0]
    assert top.rule_id == "PRE007"
    assert top.title.endswith(
        "; across the sweep's 5 rates it keeps up to 64 req/s offered (serving 62.5 req/s), its capacity at these lengths"
    )
    assert top.details["sweep"] == sweep.to_dict()
