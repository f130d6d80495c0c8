"""No rule may crash, or emit a malformed recommendation, on any valid canonical run."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.canonical import decode_run
from advisor.rules import ACTIONS, Severity, advise, build_context, get_rules
from advisor.rules.base import EVIDENCE_SOURCES, FIX_KEYS

RUNTIMES = ["vllm", "sglang", "tgi", "trtllm", "ollama", "llamacpp", "mlx", "other", None]
HARDWARE = [
    "nvidia-a10g",
    "nvidia-h100-sxm",
    "nvidia-l4",
    "apple-m2-max",
    "cpu-desktop-2ch-ddr5-5600",
    "nvidia-a11g",
    None,
]
MODELS = ["meta-llama/Llama-3.1-8B-Instruct", "llama3.1:70b", "Qwen/Qwen3-30B-A3B", "deepseek-v3", None]
QUANTS = ["bf16", "fp8", "Q4_K_M", "awq-int4-g128", "Q8_0", None]
ARGS = st.dictionaries(
    st.sampled_from(
        [
            "max_num_batched_tokens",
            "max_num_seqs",
            "gpu_memory_utilization",
            "enable_prefix_caching",
            "enable_chunked_prefill",
            "enforce_eager",
            "cpu_offload_gb",
            "OLLAMA_NUM_PARALLEL",
            "OLLAMA_KV_CACHE_TYPE",
            "OLLAMA_FLASH_ATTENTION",
            "num_ctx",
            "-np",
            "-c",
            "-ngl",
            "chunked_prefill_size",
            "kv_transfer_config",
            "speculative_config",
        ]
    ),
    st.one_of(
        st.integers(-1, 65536), st.booleans(), st.sampled_from(["q8_0", "0", "1", "on", "auto"]), st.floats(0.05, 1.0)
    ),
    max_size=6,
)


def positive(high: float) -> st.SearchStrategy[float]:
    return st.floats(min_value=0.0, max_value=high, allow_nan=False)


def percentiles(high: float) -> st.SearchStrategy[dict[str, float]]:
    return (
        st.lists(positive(high), min_size=4, max_size=4)
        .map(sorted)
        .map(lambda v: {"p50": v[0], "p90": v[1], "p99": v[2], "max": v[3]})
    )


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), strategy)


@st.composite
def runs(draw: st.DrawFn) -> dict[str, Any]:
    prompt = draw(maybe(st.floats(1, 64000)))
    return {
        "deployment": "fuzz",
        "setup": {
            "runtime": draw(st.sampled_from(RUNTIMES)),
            "runtime_version": draw(st.sampled_from([None, "0.6.3", "0.11.0", "b5606", "2.4.0"])),
            "hardware": draw(st.sampled_from(HARDWARE)),
            "model": draw(st.sampled_from(MODELS)),
            "quantization": draw(st.sampled_from(QUANTS)),
            "gpu_count": draw(maybe(st.integers(1, 64))),
            "tensor_parallel": draw(maybe(st.integers(1, 8))),
            "kv_cache_dtype": draw(st.sampled_from([None, "auto", "fp8", "q8_0", "nonsense"])),
            "max_model_len": draw(maybe(st.integers(128, 262144))),
            "engine_args": draw(ARGS),
        },
        "labels": draw(st.sampled_from([{}, {"planned_hardware": "nvidia-l40s"}, {"planned_hardware": "nope"}])),
        "workload": {
            "num_requests": draw(maybe(st.integers(1, 10000))),
            "concurrency": draw(maybe(st.floats(1, 512))),
            "request_rate": draw(maybe(st.floats(0.01, 1000))),
            "prompt_tokens_mean": prompt,
            "output_tokens_mean": draw(maybe(st.floats(1, 8000))),
            "shared_prefix_tokens": draw(maybe(st.floats(0, prompt or 1))),
            "kv_depth_tokens": draw(maybe(st.floats(0, 32000))),
        },
        "metrics": {
            "ttft_ms": draw(maybe(percentiles(60000))) or {},
            "itl_ms": draw(maybe(percentiles(2000))) or {},
            "tpot_ms": draw(maybe(percentiles(2000))) or {},
            "decode_tok_s": draw(maybe(positive(5000))),
            "prefill_tok_s": draw(maybe(positive(200000))),
            "output_throughput_tok_s": draw(maybe(positive(100000))),
            "request_throughput_rps": draw(maybe(positive(1000))),
            "queue_waiting_mean": draw(maybe(positive(500))),
            "running_mean": draw(maybe(positive(512))),
            "kv_cache_usage_mean": draw(maybe(st.floats(0, 1))),
            "kv_cache_usage_max": draw(maybe(st.floats(0, 1))),
            "prefix_cache_hit_rate": draw(maybe(st.floats(0, 1))),
            "preemptions": draw(maybe(positive(10000))),
            "load_ms": draw(maybe(positive(60000))),
            "requests_completed": draw(maybe(st.integers(0, 10000))),
            "requests_failed": draw(maybe(st.integers(0, 10000))),
            "duration_s": draw(maybe(positive(10000))),
        },
        "slo": draw(maybe(st.fixed_dictionaries({"ttft_p99_ms": positive(5000), "decode_tok_s_min": positive(200)}))),
    }


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(runs())
def test_every_rule_survives_any_valid_run(body: dict[str, Any]) -> None:
    run = decode_run(body)
    advice = advise(build_context(run), rules=get_rules(), strict=True)
    assert advice.verdict in ("pass", "warn", "fail")
    ids = [r.rule_id for r in advice.recommendations]
    assert len(ids) == len(set(ids))
    for rec in advice.recommendations:
        assert rec.severity >= Severity.LOW
        assert rec.action in ACTIONS
        assert 0.0 <= rec.confidence <= 1.0 and 0.0 <= rec.score <= 1.0
        assert rec.evidence and all(e.source in EVIDENCE_SOURCES for e in rec.evidence)
        assert rec.fix and set(rec.fix) <= set(FIX_KEYS) and rec.fix_for_runtime
        if rec.expected_gain is not None:
            assert math.isfinite(rec.expected_gain.from_) and math.isfinite(rec.expected_gain.to)
            assert rec.expected_gain.to >= 0
        rec.to_dict()
    advice.to_dict()
