"""What the analysis remembers per setup (``per_setup``, the physics of a setup and workload shape)
never changes an answer (issue #19, session 7).

Hypothesis draws groups of runs that share a setup but differ in everything a per-setup memo must
not read (metrics, fractional workload values, a concurrency by Little's law, measured bits per
weight, the model's given name, the tool, SLOs, baselines), then analyses each run twice: with
every cache cleared first (nothing remembered) and after the group's earlier runs filled them. The
two analyses must be byte-identical, suppressed findings included.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.canonical import SLO, decode_run
from advisor.catalog import Catalog
from advisor.domain.runs.analysis import RunAnalysis, analyse_run
from advisor.domain.runs.resolution import ResolvedRun, resolve_run
from advisor.ingest.submission import SubmissionContext
from advisor.ml.prior import prior_expectations
from advisor.rules import get_rules
from advisor.rules.context import BaselinePoint, baseline_point, build_context, clear_caches
from advisor.rules.engine import advise
from tests.unit.rules.test_analysis_cache import SETUPS

CATALOG = Catalog.default()

MODEL_NAMES = {"llama-3.1-8b": ["llama-3.1-8b", "meta-llama/Llama-3.1-8B-Instruct"]}


def _maybe(draw: Any, value: st.SearchStrategy[Any], p: float = 0.5) -> Any:
    return draw(value) if draw(st.floats(0, 1)) < p else None


@st.composite
def setups(draw: Any) -> dict[str, Any]:
    setup = json.loads(json.dumps(draw(st.sampled_from(SETUPS))))
    if draw(st.booleans()):
        setup["kv_cache_dtype"] = draw(st.sampled_from(["auto", "fp8", "fp8_e5m2"]))
    if draw(st.booleans()):
        setup["engine_args"]["speculative_config"] = {"num_speculative_tokens": 3}
    return setup


@st.composite
def runs(draw: Any, setup: dict[str, Any], i: int) -> dict[str, Any]:
    positive = st.floats(min_value=0.5, max_value=5000, allow_nan=False)
    decode = draw(st.floats(min_value=2, max_value=400))
    ttft = draw(st.floats(min_value=20, max_value=20000))
    itl = 1000.0 / decode
    metrics: dict[str, Any] = {
        "ttft_ms": {"mean": ttft, "p50": ttft * 0.9, "p99": ttft * draw(st.floats(1.0, 8.0))},
        "itl_ms": {"mean": itl, "p50": itl, "p99": itl * draw(st.floats(1.0, 5.0))},
    }
    optional: dict[str, st.SearchStrategy[Any]] = {
        "decode_tok_s": st.just(decode),
        "prefill_tok_s": positive,
        "output_throughput_tok_s": positive,
        "request_throughput_rps": st.floats(0.05, 200),
        "queue_waiting_mean": st.sampled_from([0.0, 1.5, 40.0]),
        "kv_cache_usage_mean": st.floats(0.0, 1.0),
        "prefix_cache_hit_rate": st.floats(0.0, 0.95),
        "cached_prompt_tokens_mean": st.floats(0.0, 4000),
        "preemptions": st.sampled_from([0.0, 3.0, 80.0]),
        "requests_completed": st.sampled_from([1, 20, 200]),
        "requests_failed": st.sampled_from([0, 5]),
        "running_mean": st.floats(0.5, 64),
        "gpu_resident_share": st.sampled_from([0.6, 1.0]),
    }
    for name, strategy in optional.items():
        value = _maybe(draw, strategy, 0.4)
        if value is not None:
            metrics[name] = value
    workload: dict[str, Any] = {}
    for name, strategy in {
        "num_requests": st.sampled_from([1, 200]),
        "concurrency": st.sampled_from([1, 4, 4.5, 16, 64]),
        "request_rate": st.floats(0.1, 50),
        "prompt_tokens_mean": st.sampled_from([256, 1024, 1024.4, 2047.6, 8000]),
        "output_tokens_mean": st.sampled_from([128, 255.5, 256, 1024]),
        "output_tokens_requested": st.sampled_from([256, 2048]),
        "shared_prefix_tokens": st.sampled_from([500, 3000]),
        "kv_depth_tokens": st.sampled_from([0, 4096.3]),
    }.items():
        value = _maybe(draw, strategy, 0.7 if name in ("prompt_tokens_mean", "concurrency") else 0.3)
        if value is not None:
            workload[name] = value
    run_setup = dict(setup)
    run_setup["model"] = draw(st.sampled_from(MODEL_NAMES.get(setup["model"], [setup["model"]])))
    labels = {"i": str(i)}
    if draw(st.floats(0, 1)) < 0.15:
        labels["bits_per_weight"] = str(draw(st.sampled_from([4.5, 5.3, 16.0])))
    run: dict[str, Any] = {
        "deployment": draw(st.sampled_from(["a", "b"])),
        "measured_at": f"2026-12-07T20:{i:02d}:00Z",
        "labels": labels,
        "setup": run_setup,
        "workload": workload,
        "metrics": metrics,
    }
    tool = _maybe(draw, st.sampled_from(["llama-bench", "vllm bench serve", "genai-perf"]), 0.3)
    if tool is not None:
        run["source"] = {"tool": tool}
    if draw(st.floats(0, 1)) < 0.2:
        run["slo"] = {"ttft_p99_ms": draw(st.sampled_from([300.0, 3000.0])), "decode_tok_s_min": 20.0}
    return run


def _analyse(resolved: ResolvedRun, baseline: list[BaselinePoint], slo: SLO | None) -> str:
    analysis: RunAnalysis = analyse_run(
        resolved, slo=slo, baseline=baseline, catalog=CATALOG, expectations_fn=prior_expectations
    )
    # The suppressed findings too: a rule that drops a bare finding must drop the same one.
    ctx = build_context(resolved.run, catalog=CATALOG, slo=slo, baseline_runs=baseline, resolved=resolved.specs)
    suppressed = [s.to_dict() for s in advise(ctx).findings_suppressed]
    return json.dumps(
        {
            "verdict": analysis.verdict,
            "recommendations": [r.to_dict() for r in analysis.recommendations],
            "stored": analysis.stored(),
            "suppressed": suppressed,
        },
        sort_keys=True,
        default=repr,
    )


@st.composite
def groups(draw: Any) -> list[dict[str, Any]]:
    setup = draw(setups())
    return [draw(runs(setup, i)) for i in range(draw(st.integers(2, 5)))]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(groups(), min_size=1, max_size=2))
def test_remembered_and_fresh_analyses_are_identical(batch: list[list[dict[str, Any]]]) -> None:
    get_rules()
    items: list[tuple[ResolvedRun, list[BaselinePoint], SLO | None]] = []
    history: list[BaselinePoint] = []
    for group in batch:
        for raw in group:
            resolved = resolve_run(decode_run(raw), SubmissionContext(), CATALOG, from_file=False)
            items.append((resolved, list(reversed(history[-20:])), None))
            history.append(baseline_point(resolved.run))
    fresh = []
    for item in items:
        clear_caches()
        fresh.append(_analyse(*item))
    # No clearing: each run finds what the earlier runs of its setup (and its own first pass) left.
    clear_caches()
    remembered = [_analyse(*item) for item in items]
    again = [_analyse(*item) for item in items]
    assert remembered == fresh
    assert again == fresh
