"""The pure builder, fed with hand-made aggregates, and the renderers of what it builds."""

from __future__ import annotations

import json
from datetime import timedelta

import numpy as np
import pytest

from advisor.reports.context import (
    AppliedSample,
    DeploymentEfficiencyRow,
    DeploymentRow,
    FleetWeek,
    HardwareRow,
    MissingFieldRow,
    RecommendationRow,
    RunSample,
    SetupRow,
    WeeklyAggregates,
    WeeklyReport,
    build_weekly,
)
from advisor.reports.render import render_html, render_json, render_markdown, render_slack
from advisor.reports.weeks import IsoWeek

WEEK = IsoWeek.parse("2026-W48")
BASE = {"ttft_p50_ms": 200.0, "ttft_p99_ms": 400.0, "itl_p99_ms": 40.0, "decode_tok_s": 50.0}


def _samples(rng: np.random.Generator, dep: int, *, this_factor: dict[str, float], n: int = 15) -> list[RunSample]:
    out = []
    for this_week in (False, True):
        start = WEEK.start if this_week else WEEK.previous().start
        for i in range(n):
            values = {
                k: v * (this_factor.get(k, 1.0) if this_week else 1.0) * (1 + 0.04 * rng.standard_normal())
                for k, v in BASE.items()
            }
            out.append(
                RunSample(
                    deployment_id=dep,
                    run_id=dep * 1000 + this_week * 100 + i,
                    this_week=this_week,
                    measured_at=start + timedelta(hours=8 * i + 1),
                    values=values,
                )
            )
    return out


def _setup(dep: int, this_week: bool, version: str, batched: int) -> SetupRow:
    fields = {
        "runtime": "vllm",
        "runtime_version": version,
        "hardware": "nvidia-a10g",
        "model": "m",
        "quantization": "bf16",
        "gpu_count": 1,
        "tensor_parallel": 1,
    }
    return SetupRow(
        deployment_id=dep, this_week=this_week, fields=fields, engine_args={"max_num_batched_tokens": batched}
    )


def make_report() -> WeeklyReport:
    """A built report over hand-made aggregates (also used by the delivery tests)."""
    rng = np.random.default_rng(3)
    deployments = [
        DeploymentRow(id=1, name="stable", slo={"ttft_p99_ms": 800}, runs=15, runs_last_week=15, last_measured_at=None),
        DeploymentRow(id=2, name="slower", slo={"ttft_p99_ms": 500}, runs=15, runs_last_week=15, last_measured_at=None),
        DeploymentRow(id=3, name="faster", slo={}, runs=15, runs_last_week=15, last_measured_at=None),
        DeploymentRow(id=4, name="idle", slo={}, runs=0, runs_last_week=3, last_measured_at=None),
    ]
    samples = (
        _samples(rng, 1, this_factor={})
        + _samples(rng, 2, this_factor={"ttft_p99_ms": 1.5, "decode_tok_s": 0.97})
        + _samples(rng, 3, this_factor={"decode_tok_s": 1.4})
    )
    setups = [
        _setup(1, False, "0.11.0", 2048),
        _setup(1, True, "0.11.0", 2048),
        _setup(2, False, "0.11.0", 8192),
        _setup(2, True, "0.11.1", 2048),
    ]
    recs = [
        RecommendationRow(
            action="enable-prefix-caching",
            metric="ttft_ms.p50",
            deployment="slower",
            expected_gain=0.8,
            severity="severe",
            score=0.8,
            title="cache the prefix",
        ),
        RecommendationRow(
            action="enable-prefix-caching",
            metric="ttft_ms.p50",
            deployment="stable",
            expected_gain=0.3,
            severity="moderate",
            score=0.4,
            title="cache the prefix",
        ),
        RecommendationRow(
            action="quantize-weights",
            metric="decode_tok_s",
            deployment="faster",
            expected_gain=0.9,
            severity="moderate",
            score=0.5,
            title="quantize",
        ),
        RecommendationRow(
            action="warm-up-model",
            metric=None,
            deployment="faster",
            expected_gain=0.0,
            severity="low",
            score=0.1,
            title="warm up",
        ),
    ]
    applied = [
        AppliedSample(
            recommendation_id=9,
            deployment="faster",
            action="quantize-weights",
            rule_id="DEC001",
            metric="decode_tok_s",
            applied_at=WEEK.start,
            before=list(50 + rng.standard_normal(12)),
            after=list(70 + rng.standard_normal(12)),
        ),
        AppliedSample(
            recommendation_id=10,
            deployment="stable",
            action="enable-prefix-caching",
            rule_id="PRE002",
            metric="ttft_ms.p50",
            applied_at=WEEK.start,
            before=list(200 + 5 * rng.standard_normal(12)),
            after=list(200 + 5 * rng.standard_normal(12)),
        ),
    ]
    agg = WeeklyAggregates(
        week=WEEK,
        fleet_weeks=[
            FleetWeek(
                week="2026-W47",
                deployments=4,
                runs=48,
                slo_runs=30,
                slo_met=27,
                decode_efficiency=0.5,
                prefill_efficiency=0.3,
            ),
            FleetWeek(
                week="2026-W48",
                deployments=3,
                runs=45,
                slo_runs=30,
                slo_met=24,
                decode_efficiency=0.55,
                prefill_efficiency=None,
            ),
        ],
        deployments=deployments,
        samples=samples,
        setups=setups,
        recommendations=recs,
        applied=applied,
        hardware=[
            HardwareRow(hardware="nvidia-a10g", deployments=3, runs=45, decode_efficiency=0.6, prefill_efficiency=0.3),
            HardwareRow(
                hardware="nvidia-h100-sxm", deployments=1, runs=2, decode_efficiency=0.1, prefill_efficiency=None
            ),
        ],
        deployment_efficiency=[
            DeploymentEfficiencyRow(deployment="stable", hardware="nvidia-a10g", decode_efficiency=0.62, runs=15),
            DeploymentEfficiencyRow(deployment="slower", hardware="nvidia-a10g", decode_efficiency=0.2, runs=15),
            DeploymentEfficiencyRow(deployment="lonely", hardware="nvidia-h100-sxm", decode_efficiency=0.1, runs=2),
        ],
        missing_fields=[MissingFieldRow("prompt_tokens_mean", 7, 2), MissingFieldRow("model_id", 0, 0)],
        runs_not_analysed=3,
    )
    return build_weekly(agg)


@pytest.fixture(scope="module")
def report() -> WeeklyReport:
    return make_report()


def test_exactly_the_injected_regressions(report: WeeklyReport) -> None:
    assert [(r.deployment, r.metric) for r in report.regressions] == [("slower", "ttft_p99_ms")]
    reg = report.regressions[0]
    assert reg.change == pytest.approx(0.5, abs=0.08)
    assert reg.slo == 500
    assert len(reg.runs) == 30 and {r.week for r in reg.runs} == {"last", "this"}
    changes = {c.field: (c.last_week, c.this_week) for c in reg.setup_changes}
    assert changes == {"runtime_version": ("0.11.0", "0.11.1"), "engine_args.max_num_batched_tokens": (8192, 2048)}
    # A 3% decode change is inside the floor; the faster deployment is an improvement.
    assert [(r.deployment, r.metric) for r in report.improvements] == [("faster", "decode_tok_s")]


def test_per_deployment_table_and_fleet(report: WeeklyReport) -> None:
    assert [d.name for d in report.deployments] == ["faster", "idle", "slower", "stable"]
    stable = next(d for d in report.deployments if d.name == "stable")
    assert {m.verdict for m in stable.metrics} == {"same"}
    idle = next(d for d in report.deployments if d.name == "idle")
    assert {m.verdict for m in idle.metrics} == {"too-few-runs"}
    fleet = {m.name: m for m in report.fleet}
    assert fleet["runs"].change == -3
    assert fleet["slo_attainment"].this_week == pytest.approx(0.8)
    assert fleet["slo_attainment"].change == pytest.approx(-0.1)
    assert fleet["prefill_efficiency_median"].change is None


def test_top_recommendations_rank_by_total_gain(report: WeeklyReport) -> None:
    top = [(t.action, t.total_expected_gain, t.deployments, t.severity) for t in report.top_recommendations]
    assert top[0] == ("enable-prefix-caching", pytest.approx(1.1), ["slower", "stable"], "severe")
    assert top[1][0] == "quantize-weights"
    assert top[-1][0] == "warm-up-model"


def test_adoption_uses_the_noise_test(report: WeeklyReport) -> None:
    verdicts = {(a.deployment, a.action): a.verdict for a in report.adoption}
    assert verdicts == {("faster", "quantize-weights"): "better", ("stable", "enable-prefix-caching"): "same"}
    assert report.adoption[0].verdict == "better"  # paid-off advice first


def test_hardware_and_data_quality(report: WeeklyReport) -> None:
    # A single-deployment hardware has no peers to be far below.
    assert [(f.deployment, f.hardware) for f in report.far_below] == [("slower", "nvidia-a10g")]
    assert report.data_quality.deployments_without_runs == ["idle"]
    assert [m.field for m in report.data_quality.missing_fields] == ["prompt_tokens_mean"]
    assert report.data_quality.runs_not_analysed == 3


def test_renderers(report: WeeklyReport) -> None:
    body = json.loads(render_json(report))
    assert body["week"] == "2026-W48"
    reg = body["regressions"][0]
    assert {"deployment", "metric", "change", "runs"} <= set(reg)
    assert isinstance(body["top_recommendations"], list) and isinstance(body["adoption"], list)

    md = render_markdown(report)
    assert md.startswith("# Weekly fleet report 2026-W48")
    assert "| slower | ttft_p99_ms |" in md
    assert "runtime_version: 0.11.0 → 0.11.1" in md
    assert "Deployments without runs this week: idle." in md

    html = render_html(report)
    assert 'data-deployment="slower"' in html
    assert html.count("<svg") >= 4  # efficiency and SLO trends, hardware bars, the regression's runs
    assert 'data-chart="bars"' in html and 'data-chart="trend"' in html

    slack = render_slack(report, link="https://advisor.example/reports/2026-W48")
    assert "slower ttft_p99_ms +5" in slack["text"] or "slower ttft_p99_ms +4" in slack["text"]
    assert "<https://advisor.example/reports/2026-W48|full report>" in slack["text"]
