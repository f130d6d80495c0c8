"""The prefill budget dial has one owner: PRE004 and SCH001 never pull it both ways on one run."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from advisor.rules import Severity, advise, budget, get_rule, thresholds_table
from advisor.rules.budget import limits_of, plan_budget
from tests.unit.rules.harness import RuleCase, build_case_context


def _case(budget: int, prompt: int, itl: tuple[float, float], ttft: float, slo: dict[str, Any] | None) -> RuleCase:
    run = {
        "setup": {
            "runtime": "vllm",
            "runtime_version": "0.11.0",
            "hardware": "nvidia-h100-sxm",
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "quantization": "bf16",
            "engine_args": {"max_num_batched_tokens": budget},
        },
        "workload": {"num_requests": 2000, "concurrency": 32, "prompt_tokens_mean": prompt, "output_tokens_mean": 300},
        "metrics": {
            "decode_tok_s": 60,
            "itl_ms": {"p50": itl[0], "p99": itl[1]},
            "ttft_ms": {"p50": ttft, "p99": ttft * 1.8},
        },
    }
    return RuleCase("PRE004", "grid", run, slo, [], {}, None, {"severity": "none"})


def _actions(case: RuleCase) -> set[str]:
    table = thresholds_table()
    rules = [get_rule("PRE004", table=table), get_rule("SCH001", table=table)]
    ctx = build_case_context(case)
    advice = advise(ctx, rules=rules, min_severity=Severity.NONE, strict=True)
    return {r.action for r in advice.recommendations}


def test_never_both_directions_on_one_run() -> None:
    grid = itertools.product(
        (512, 2048, 4096, 16384),
        (1500, 6000),
        ((40.0, 110.0), (12.0, 240.0), (14.0, 30.0)),
        (400.0, 2500.0),
        (None, {"itl_p99_ms": 100}, {"ttft_p50_ms": 600}, {"itl_p99_ms": 100, "ttft_p50_ms": 600}),
    )
    seen: set[frozenset[str]] = set()
    for dial, prompt, itl, ttft, slo in grid:
        actions = _actions(_case(dial, prompt, itl, ttft, slo))
        assert not {"raise-batched-tokens", "lower-batched-tokens"} <= actions, (dial, prompt, itl, ttft, slo)
        seen.add(frozenset(actions))
    # The grid exercises every answer the dial can give: raise, lower, conflict (add-capacity), silence.
    assert frozenset({"raise-batched-tokens"}) in seen
    assert frozenset({"lower-batched-tokens"}) in seen
    assert frozenset({"add-capacity"}) in seen
    assert frozenset() in seen


def test_the_review_probe_is_a_conflict_with_the_predicted_chunk() -> None:
    # budget 4096, 6,000-token prompts, ITL 40/110: 4,064 tokens per step at ~30.9k tok/s (half the
    # H100's 989 TFLOPS over 2 × 8.03 GFLOP per token, plus attention) ≈ 130 ms, which explains the
    # 70 ms gap; TTFT 900 ms needs two steps. No SLO says which matters more.
    ctx = build_case_context(_case(4096, 6000, (40.0, 110.0), 900.0, None))
    plan = plan_budget(ctx, limits_of(get_rule("PRE004")))
    assert plan is not None
    assert plan.direction == "conflict"
    assert plan.steps_now == 2
    assert plan.ttft_pressure and plan.itl_pressure
    assert 110 < plan.chunk_ms_now < 150


def test_an_itl_slo_holds_the_raise_to_what_it_allows() -> None:
    # ITL p99 objective 200 ms, p50 14: a chunk may take up to 186 ms; 6,000 tokens take ~195 ms,
    # so the 8192 raise is halved to 4096 (4,064 tokens ≈ 130 ms).
    ctx = build_case_context(_case(512, 6000, (14.0, 30.0), 2500.0, {"itl_p99_ms": 200}))
    plan = plan_budget(ctx, limits_of(get_rule("PRE004")))
    assert plan is not None
    assert plan.direction == "raise"
    assert plan.target == 4096
    assert plan.predicted_itl_p99_ms is not None and plan.predicted_itl_p99_ms <= 200


def test_an_estimated_compute_figure_is_a_band_not_a_point(monkeypatch: pytest.MonkeyPatch) -> None:
    # An inline device with no published TFLOPS: its prefill rate is an estimate, so the chunk must
    # explain the ITL tail even if the device were twice as fast as estimated.
    # ~800 tok/s estimated: a 4,000-token chunk takes ~5 s at the estimate, ~2.5 s at the fast end.
    case = _case(8192, 4000, (40.0, 12000.0), 9000.0, None)
    case.run["setup"]["hardware"] = {"mem_bandwidth_gb_s": 273, "memory_gb": 128}
    ctx = build_case_context(case)
    assert ctx.roofline is not None and ctx.roofline.prefill_tflops_estimated
    limits = limits_of(get_rule("SCH001"))
    # Silent: at the band's fast end the chunk would not explain the tail, and nothing else presses.
    assert plan_budget(ctx, limits) is None
    monkeypatch.setattr(budget, "ESTIMATE_BAND", 1.0)
    point = plan_budget(ctx, limits)
    assert point is not None and point.direction == "lower"
    stall = 12000.0 - 40.0
    assert point.chunk_ms_now >= limits.min_explained * stall > point.chunk_ms_now / 2.0
