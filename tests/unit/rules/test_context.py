from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from advisor.canonical import SLO, CanonicalRun, decode_run
from advisor.rules import build_baseline, build_context
from advisor.rules.context import baseline_key, baseline_point, comparable, measure, normalise_kv_dtype

SETUP = {
    "runtime": "vllm",
    "hardware": "nvidia-a10g",
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "quantization": "bf16",
}


def run(**parts: Any) -> CanonicalRun:
    body: dict[str, Any] = {
        "setup": dict(SETUP),
        "workload": {"prompt_tokens_mean": 500, "output_tokens_mean": 200},
        "metrics": {},
    }
    for key, value in parts.items():
        if isinstance(value, dict) and isinstance(body.get(key), dict):
            body[key] = {**body[key], **value}
        else:
            body[key] = value
    return decode_run(body)


def test_resolves_names_and_computes_physics_and_expectations() -> None:
    ctx = build_context(run(metrics={"decode_tok_s": 33}, workload={"concurrency": 1}))
    assert ctx.hardware is not None and ctx.hardware.id == "nvidia-a10g"
    assert ctx.model is not None and ctx.model.id == "llama-3.1-8b"
    assert ctx.quant is not None and ctx.quant.bits_per_weight == 16
    assert ctx.roofline is not None and 35 < ctx.roofline.decode_ceiling_tok_s < 38  # the seed's 37.5
    assert ctx.expectations is not None and ctx.expectations.decode_tok_s is not None
    assert ctx.missing == ()


@pytest.mark.parametrize(
    ("setup", "field", "hint"),
    [
        ({"hardware": None}, "setup.hardware", "--hardware"),
        ({"hardware": "nvidia-a11g"}, "setup.hardware", "X-Advisor-Hardware"),
        ({"model": None}, "setup.model", "?model="),
        ({"quantization": None}, "setup.quantization", "bits_per_weight"),
        ({"runtime": None}, "setup.runtime", "--runtime"),
    ],
)
def test_missing_or_unknown_names_are_recorded_not_raised(setup: dict[str, Any], field: str, hint: str) -> None:
    ctx = build_context(run(setup={**SETUP, **setup}, metrics={"decode_tok_s": 30}))
    missing = {m.field: m for m in ctx.missing}
    assert field in missing
    assert hint in missing[field].how
    if field != "setup.runtime":
        assert ctx.roofline is None and ctx.expectations is None


def test_unknown_name_keeps_the_catalogs_suggestion() -> None:
    ctx = build_context(run(setup={**SETUP, "hardware": "nvidia-a10gg"}))
    assert "a10g" in ctx.missing[0].reason


def test_quantization_implied_by_the_model_name() -> None:
    ctx = build_context(
        run(setup={"runtime": "ollama", "hardware": "nvidia-rtx-4090", "model": "llama3.1:8b", "quantization": None})
    )
    assert ctx.quant is not None and ctx.quant.id == "gguf-q4_k_m"
    assert not ctx.is_missing("setup.quantization")


def test_missing_workload_fields_only_when_they_block_something() -> None:
    quiet = build_context(run(workload={"prompt_tokens_mean": None}, metrics={"decode_tok_s": 30}))
    assert not quiet.is_missing("workload.prompt_tokens_mean")  # no TTFT to judge
    loud = build_context(run(workload={"prompt_tokens_mean": None}, metrics={"ttft_ms": {"p50": 300}}))
    assert loud.is_missing("workload.prompt_tokens_mean")
    batch = build_context(run(workload={"num_requests": 300}, metrics={"decode_tok_s": 30}))
    assert batch.is_missing("workload.concurrency")


def test_slo_argument_wins_over_the_runs_own() -> None:
    r = run(slo={"ttft_p99_ms": 100})
    assert build_context(r).slo == SLO(ttft_p99_ms=100)
    assert build_context(r, slo=SLO(ttft_p99_ms=900)).slo == SLO(ttft_p99_ms=900)


def test_physics_concurrency_is_capped_by_the_engines_batch_limit() -> None:
    ctx = build_context(run(workload={"concurrency": 64}, setup={**SETUP, "engine_args": {"max_num_seqs": 16}}))
    assert ctx.roofline is not None and ctx.roofline.concurrency == 16


def test_memory_fraction_and_kv_dtype_reach_the_physics() -> None:
    base = build_context(run()).roofline
    more = build_context(run(setup={**SETUP, "engine_args": {"gpu_memory_utilization": 0.95}})).roofline
    fp8 = build_context(run(setup={**SETUP, "kv_cache_dtype": "fp8_e4m3"})).roofline
    assert base and more and fp8 and base.kv_pool_tokens and more.kv_pool_tokens and fp8.kv_pool_tokens
    assert more.kv_pool_tokens > base.kv_pool_tokens
    assert math.isclose(fp8.kv_pool_tokens / base.kv_pool_tokens, 2.0, rel_tol=0.01)


@pytest.mark.parametrize(
    ("metrics", "workload", "decode", "source", "concurrency"),
    [
        ({"decode_tok_s": 40, "tpot_ms": {"mean": 10}}, {}, 40, "metrics.decode_tok_s", None),
        ({"tpot_ms": {"mean": 25, "p50": 20}}, {}, 40, "1000 / tpot_ms.mean", None),
        ({"itl_ms": {"p50": 20}}, {}, 50, "1000 / itl_ms.p50", None),
        ({"e2e_per_token_ms": {"mean": 20}}, {}, None, None, None),  # includes TTFT: never a decode rate
        ({"running_mean": 12.5}, {"concurrency": 32}, None, None, 12.5),
        ({"e2e_ms": {"mean": 4000}}, {"request_rate": 2}, None, None, 8.0),  # Little's law
        ({}, {"num_requests": 1}, None, None, 1.0),
    ],
)
def test_measure(
    metrics: dict[str, Any],
    workload: dict[str, Any],
    decode: float | None,
    source: str | None,
    concurrency: float | None,
) -> None:
    m = measure(run(metrics=metrics, workload=workload))
    assert m.decode_tok_s == decode and m.decode_source == source
    assert m.concurrency == concurrency


def test_uncached_prompt_tokens() -> None:
    assert measure(run(metrics={"cached_prompt_tokens_mean": 300})).uncached_prompt_tokens == 200
    assert measure(run(metrics={"prefix_cache_hit_rate": 0.5})).uncached_prompt_tokens == 250
    assert measure(run()).uncached_prompt_tokens == 500


@pytest.mark.parametrize(
    ("given", "expected"),
    [(None, "auto"), ("FP8_E4M3FN", "fp8_e4m3"), ("bfloat16", "bf16"), ("q8_0", "q8_0"), ("weird", "auto")],
)
def test_normalise_kv_dtype(given: str | None, expected: str) -> None:
    assert normalise_kv_dtype(given) == expected


T0 = datetime(2026, 11, 29, 8, tzinfo=UTC)


def history(values: list[float], **overrides: Any) -> list[CanonicalRun]:
    return [
        run(
            deployment="chat",
            measured_at=(T0 - timedelta(days=len(values) - i)).isoformat(),
            metrics={"decode_tok_s": v, "ttft_ms": {"p50": 100 + i}},
            **overrides,
        )
        for i, v in enumerate(values)
    ]


def test_baseline_median_and_robust_spread() -> None:
    current = run(deployment="chat", measured_at=T0.isoformat())
    base = build_baseline(history([100, 102, 98, 101, 250]), current=current)
    assert base is not None and base.n == 5
    decode = base.get("decode_tok_s")
    assert decode is not None and decode.median == 101 and decode.higher_is_better
    assert math.isclose(decode.spread, 1.4826 * 1.0)  # the 250 outlier does not inflate it
    ttft = base.get("ttft_ms.p50")
    assert ttft is not None and ttft.higher_is_better is False


def test_baseline_keeps_the_most_recent_comparable_runs() -> None:
    current = run(deployment="chat", measured_at=T0.isoformat())
    runs = history([10.0] * 5 + [100.0] * 20)
    base = build_baseline(runs, current=current, max_runs=20)
    assert base is not None and base.n == 20 and base.metrics["decode_tok_s"].median == 100.0


def test_baseline_needs_three_runs() -> None:
    current = run(deployment="chat", measured_at=T0.isoformat())
    assert build_baseline(history([100, 101]), current=current) is None


def test_engine_upgrades_stay_comparable_other_changes_do_not() -> None:
    a = run(deployment="chat", setup={**SETUP, "runtime_version": "0.10.0"})
    assert comparable(a, run(deployment="chat", setup={**SETUP, "runtime_version": "0.11.0"}))
    assert not comparable(a, run(deployment="chat", setup={**SETUP, "quantization": "fp8"}))
    assert not comparable(a, run(deployment="other", setup=SETUP))
    assert not comparable(a, run(deployment="chat", workload={"prompt_tokens_mean": 1000}))
    assert comparable(a, run(deployment="chat", workload={"prompt_tokens_mean": 550}))


def test_comparable_takes_runs_or_baseline_points() -> None:
    a, b = run(deployment="chat"), run(deployment="chat", workload={"prompt_tokens_mean": 1000})
    for x in (a, baseline_point(a), baseline_key(a)):
        assert comparable(x, run(deployment="chat"))
        assert not comparable(x, baseline_point(b))


def test_the_baseline_leaves_out_runs_that_are_not_comparable() -> None:
    current = run(deployment="chat", measured_at=T0.isoformat())
    kept = history([100.0, 101.0, 102.0])
    longer = history([10.0] * 3, workload={"prompt_tokens_mean": 2000})  # other traffic
    quantised = history([10.0] * 3, setup={**SETUP, "quantization": "fp8"})  # other setup
    base = build_baseline([*kept, *longer, *quantised], current=current)
    assert base is not None and base.n == 3 and base.metrics["decode_tok_s"].median == 101.0
    assert all(comparable(current, r) for r in kept)
    assert not any(comparable(current, r) for r in (*longer, *quantised))
