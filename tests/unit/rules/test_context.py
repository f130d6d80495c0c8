from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from advisor.canonical import SLO, CanonicalRun, decode_run
from advisor.rules import build_baseline, build_context
from advisor.rules.context import (
    baseline_key,
    baseline_point,
    comparable,
    measure,
    normalise_kv_dtype,
    sweep_capacity,
)

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


# ------------------------------------------------------------------------------------------------
# issue 12: derived context, the TTFT breakdown, engine tests and implausible ITLs


def test_littles_law_uses_the_served_rate_and_the_latency() -> None:
    m = measure(run(workload={"request_rate": 10.0}, metrics={"request_throughput_rps": 4.0, "e2e_ms": {"mean": 3000}}))
    assert m.concurrency == 12.0  # 4 req/s served × 3 s in the system
    assert m.concurrency_source == "Little's law: metrics.request_throughput_rps × e2e_ms.mean"


def test_littles_law_without_e2e_uses_ttft_and_tpot() -> None:
    m = measure(run(workload={"request_rate": 2.0}, metrics={"ttft_ms": {"mean": 500}, "tpot_ms": {"mean": 25}}))
    assert m.concurrency == pytest.approx(2.0 * (500 + 200 * 25) / 1000)
    assert m.concurrency_source == "Little's law: workload.request_rate × (ttft + output_tokens × tpot)"


def test_littles_law_gives_nothing_when_the_latency_is_infinite() -> None:
    """A denormal decode rate makes the derived latency infinite (found by tests/unit/rules/test_fuzz.py):
    no concurrency is inferred, and the context and every rule still build."""
    body = {"output_tokens_mean": 1.0}
    metrics = {"ttft_ms": {"p50": 1.0, "p90": 1.0, "p99": 1.0, "max": 1.0}, "decode_tok_s": 5e-324}
    m = measure(run(workload=body, metrics={**metrics, "request_throughput_rps": 1.0}))
    assert m.concurrency is None and m.concurrency_source is None
    ctx = build_context(run(workload=body, metrics={**metrics, "request_throughput_rps": 1.0}))
    assert ctx.measured.concurrency is None


def test_a_derived_concurrency_is_noted_and_not_missing() -> None:
    ctx = build_context(
        run(workload={"request_rate": 2.0, "num_requests": 100}, metrics={"e2e_ms": {"mean": 4000}, "decode_tok_s": 30})
    )
    assert ctx.notes == (
        "workload.concurrency derived: 8 streams by Little's law: workload.request_rate × e2e_ms.mean",
    )
    assert not ctx.is_missing("workload.concurrency")


def test_a_rate_without_a_latency_says_so_and_names_the_flag() -> None:
    ctx = build_context(run(workload={"request_rate": 2.0, "num_requests": 100}, metrics={"decode_tok_s": 30}))
    missing = next(m for m in ctx.missing if m.field == "workload.concurrency")
    assert missing.reason.startswith("the run has a request rate but no end-to-end latency")
    assert "`advisor submit --concurrency <n>`" in missing.how and "X-Advisor-Concurrency" in missing.how


def test_the_ttft_breakdown_of_an_overloaded_run() -> None:
    ctx = build_context(
        run(
            workload={"request_rate": 32.0, "prompt_tokens_mean": 1000},
            metrics={"request_throughput_rps": 0.4, "ttft_ms": {"p50": 120000}, "prefill_tok_s": 2000},
        )
    )
    breakdown = ctx.ttft
    assert breakdown is not None
    assert breakdown.prefill.ms == 500.0  # 1,000 tokens at the measured 2,000 tok/s
    assert breakdown.prefill.source == "prompt_tokens_mean ÷ metrics.prefill_tok_s"
    assert breakdown.queueing.ms == 119500.0
    assert breakdown.queueing.source == "offered 32 req/s, served 0.4 req/s: the rest is queueing"
    assert breakdown.remainder.ms == 0.0
    assert breakdown.dominant == "queueing"


def test_the_ttft_breakdown_counts_the_prefix_cache_and_a_measured_queue() -> None:
    ctx = build_context(
        run(
            workload={"prompt_tokens_mean": 2000, "concurrency": 8},
            metrics={
                "ttft_ms": {"p50": 1000},
                "prefill_tok_s": 4000,
                "prefix_cache_hit_rate": 0.5,
                "queue_ms": {"p50": 200},
            },
        )
    )
    out = ctx.ttft.to_dict() if ctx.ttft else {}
    assert out["prefill"]["ms"] == 500.0
    assert out["cache"] == {
        "ms": -250.0,
        "source": "metrics.prefix_cache_hit_rate × the prefill rate",
        "confidence": 0.8,
    }
    assert out["queueing"] == {"ms": 200.0, "source": "metrics.queue_ms.p50 (scheduler delay)", "confidence": 0.9}
    assert out["remainder"]["ms"] == 550.0  # 1,000 − 200 − (500 − 250)
    assert out["total_ms"] == 1000.0 and out["dominant"] == "remainder"


def test_no_ttft_no_breakdown() -> None:
    assert build_context(run(metrics={"decode_tok_s": 30})).ttft is None


@pytest.mark.parametrize(
    ("source", "engine_test"),
    [
        ({"format": "llama_bench", "tool": "llama-bench"}, True),
        ({"format": "vllm_bench", "tool": "vllm bench latency"}, True),
        ({"format": "vllm_legacy", "tool": "vllm benchmark_throughput.py"}, True),
        ({"tool": "llama-batched-bench"}, True),
        ({"format": "vllm_bench", "tool": "vllm bench serve"}, False),
        ({"format": "guidellm", "tool": "guidellm"}, False),
    ],
)
def test_engine_microbenchmarks_are_recognised(source: dict[str, str], engine_test: bool) -> None:
    assert build_context(run(source=source)).microbenchmark is engine_test


def test_an_implausible_itl_gives_no_decode_speed() -> None:
    m = measure(run(metrics={"itl_ms": {"p50": 0.03, "mean": 0.05}}))
    assert m.decode_tok_s is None
    with_tpot = measure(run(metrics={"itl_ms": {"p50": 0.03}, "tpot_ms": {"mean": 20}}))
    assert (with_tpot.decode_tok_s, with_tpot.decode_source) == (50.0, "1000 / tpot_ms.mean")


def _point(rate: float | None, served: float, concurrency: float | None = None) -> CanonicalRun:
    return run(
        workload={"request_rate": rate, "concurrency": concurrency},
        metrics={"request_throughput_rps": served, "ttft_ms": {"p50": 100}},
    )


def test_the_knee_of_a_rate_sweep_is_the_highest_rate_it_keeps_up_with() -> None:
    sweep = sweep_capacity([_point(2, 2.0), _point(8, 7.9), _point(16, 14.5), _point(32, 15.1)])
    assert sweep is not None
    assert sweep.to_dict() == {
        "load": "request_rate",
        "knee": 16.0,  # 14.5 of 16 served is within 10 %; 15.1 of 32 is not
        "capacity_rps": 14.5,
        "points": 4,
        "overloaded_from": 32.0,
    }


def test_the_knee_of_a_concurrency_sweep_is_where_throughput_stops_growing() -> None:
    sweep = sweep_capacity(
        [_point(None, 3.0, 1), _point(None, 10.0, 4), _point(None, 18.5, 16), _point(None, 19.5, 64)]
    )
    assert sweep is not None
    assert (sweep.load, sweep.knee, sweep.capacity_rps, sweep.overloaded_from) == ("concurrency", 16.0, 18.5, None)


def test_one_load_is_no_sweep() -> None:
    assert sweep_capacity([_point(None, 5.9, 2), _point(None, 12.5, 2)]) is None
    assert sweep_capacity([_point(4, 3.9)]) is None


def test_measured_bits_per_weight_override_a_name_that_is_not_what_ran() -> None:
    """A GGUF named F16 whose experts are MXFP4 measures about 5.3 bits (llama-bench model_size ×
    8 / model_n_params): the physics uses that, and the notes say so."""
    ctx = build_context(run(setup={"runtime": "llamacpp"}, labels={"bits_per_weight": "5.271"}))
    assert ctx.quant is not None
    assert (ctx.quant.id, ctx.quant.bits_per_weight, ctx.quant.family) == ("f16-bf16", 5.271, "gguf")
    assert ctx.notes == (
        "bits per weight derived: 5.27 from the file's model_size × 8 / model_n_params, not the 16 its name "
        "F16 / BF16 implies (mixed tensor types); the physics uses 5.27",
    )


def test_measured_bits_close_to_the_name_keep_the_declared_format() -> None:
    ctx = build_context(run(labels={"bits_per_weight": "16.4"}))  # embeddings kept wider: within 20 %
    assert ctx.quant is not None and ctx.quant.bits_per_weight == 16.0
    assert ctx.notes == ()


def test_measured_bits_stand_in_for_a_missing_quantization() -> None:
    ctx = build_context(run(setup={"quantization": None}, labels={"bits_per_weight": "4.89"}))
    assert ctx.quant is not None and (ctx.quant.id, ctx.quant.bits_per_weight) == ("measured", 4.89)
    assert not ctx.is_missing("setup.quantization")
    assert ctx.notes == ("bits per weight derived: 4.89, from the file's model_size × 8 / model_n_params",)


@pytest.mark.parametrize(
    ("runtime", "arg", "pool_gib"),
    [
        # 24 GiB A10G, 14.96 GiB of bf16 Llama-3.1-8B weights, fraction 0.85.
        ("vllm", "gpu_memory_utilization", lambda w: 24 * 0.85 - w - 2.0),  # fraction of the device, 2 GiB reserve
        ("tgi", "cuda_memory_fraction", lambda w: 24 * 0.85 * 0.9 - w - 2.0),  # × TGI_WIGGLE_ROOM 0.90
        ("sglang", "mem_fraction_static", lambda w: 24 * 0.85 - w),  # activations live outside the fraction
        ("trtllm", "kv_cache_free_gpu_memory_fraction", lambda w: (24 - w - 2.0) * 0.85),  # of what is left
        (None, "free_gpu_memory_fraction", lambda w: (24 - w - 2.0) * 0.85),  # TensorRT's spelling, its meaning
    ],
)
def test_kv_pool_uses_the_runtimes_reserve_and_fraction(runtime: str | None, arg: str, pool_gib: Any) -> None:
    ctx = build_context(run(setup={**SETUP, "runtime": runtime, "engine_args": {arg: 0.85}}))
    roof = ctx.roofline
    assert roof is not None and roof.kv_pool_tokens is not None and roof.kv_bytes_per_token
    weights_gib = roof.weight_bytes / 1024**3
    expected_tokens = pool_gib(weights_gib) * 1024**3 / roof.kv_bytes_per_token
    assert math.isclose(roof.kv_pool_tokens, expected_tokens, rel_tol=1e-3)


def test_the_runtimes_pool_is_kept_by_what_ifs() -> None:
    from advisor.rules import whatif

    for runtime, arg in (("trtllm", "kv_cache_free_gpu_memory_fraction"), ("sglang", "mem_fraction_static")):
        ctx = build_context(run(setup={**SETUP, "runtime": runtime, "engine_args": {arg: 0.85}}))
        again = whatif.reanalyse(ctx, concurrency=ctx.roofline.concurrency if ctx.roofline else 1)
        assert again is not None and ctx.roofline is not None
        assert again.kv_pool_tokens == ctx.roofline.kv_pool_tokens
    sglang = build_context(run(setup={**SETUP, "runtime": "sglang", "engine_args": {"mem_fraction_static": 0.85}}))
    vllm = build_context(run(setup={**SETUP, "engine_args": {"gpu_memory_utilization": 0.85}}))
    assert sglang.roofline and vllm.roofline and sglang.roofline.kv_pool_tokens and vllm.roofline.kv_pool_tokens
    assert sglang.roofline.kv_pool_tokens > vllm.roofline.kv_pool_tokens


def test_tgi_default_fraction_is_one_times_its_wiggle_room() -> None:
    # --cuda-memory-fraction defaults to 1.0; the KV cache gets 0.9 of the device (TGI_WIGGLE_ROOM).
    tgi = build_context(run(setup={**SETUP, "runtime": "tgi"}))
    assert tgi.engine.memory_fraction.value == 1.0 and not tgi.engine.memory_fraction.explicit
    # vLLM's --gpu-memory-utilization defaulted to 0.9 up to 0.19 (0.92 from 0.20.0, runtimes.toml).
    vllm = build_context(run(setup={**SETUP, "runtime_version": "0.19.0"}))
    assert tgi.roofline and vllm.roofline
    assert tgi.roofline.kv_pool_tokens == vllm.roofline.kv_pool_tokens  # both 0.9 of the device − 2 GiB


def test_gpu_resident_share_is_a_ratio_naming_its_field() -> None:
    from advisor.errors import InvalidInput

    assert decode_run({"metrics": {"gpu_resident_share": 0.7}}).metrics.gpu_resident_share == 0.7
    with pytest.raises(InvalidInput) as err:
        decode_run({"metrics": {"gpu_resident_share": 1.3}})
    assert "metrics.gpu_resident_share" in str(err.value)
