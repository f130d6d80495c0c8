"""The weekly report's context: a pure function of the aggregates the service fetched in SQL.

:func:`build_weekly` takes :class:`WeeklyAggregates` (small, already grouped rows: medians per week,
at most a few dozen sampled runs per deployment and week, recommendations grouped per deployment) and
returns the :class:`WeeklyReport` every renderer reads. It does no I/O.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import msgspec

from advisor.reports.noise import Comparison, NoiseTest, compare
from advisor.reports.weeks import IsoWeek

__all__ = [
    "TRACKED_METRICS",
    "AppliedSample",
    "DeploymentEfficiencyRow",
    "DeploymentRow",
    "FleetWeek",
    "HardwareRow",
    "MissingFieldRow",
    "RecommendationRow",
    "RunSample",
    "SetupRow",
    "TrackedMetric",
    "WeeklyAggregates",
    "WeeklyReport",
    "build_weekly",
]


@dataclass(frozen=True)
class TrackedMetric:
    column: str  # the typed run column
    path: str  # its canonical name, as in expected_gain.metric ("ttft_ms.p99")
    unit: str
    higher_is_better: bool


#: What the per-deployment comparison and the regressions follow.
TRACKED_METRICS: tuple[TrackedMetric, ...] = (
    TrackedMetric("ttft_p50_ms", "ttft_ms.p50", "ms", False),
    TrackedMetric("ttft_p99_ms", "ttft_ms.p99", "ms", False),
    TrackedMetric("itl_p99_ms", "itl_ms.p99", "ms", False),
    TrackedMetric("decode_tok_s", "decode_tok_s", "tok/s", True),
)

#: A deployment whose median decode efficiency is below this share of its hardware's fleet median is
#: "far below what its setup should reach".
FAR_BELOW_RATIO = 0.5

#: The setup fields whose change is reported with a regression.
SETUP_FIELDS = ("runtime", "runtime_version", "hardware", "model", "quantization", "gpu_count", "tensor_parallel")


# ----------------------------------------------------------------------------------------------
# Inputs: what the service fetches (each a row of an aggregate query)


@dataclass(frozen=True)
class FleetWeek:
    week: str
    deployments: int
    runs: int
    slo_runs: int  # runs of deployments that have SLOs
    slo_met: int
    decode_efficiency: float | None  # medians
    prefill_efficiency: float | None

    @property
    def slo_attainment(self) -> float | None:
        return self.slo_met / self.slo_runs if self.slo_runs else None


@dataclass(frozen=True)
class DeploymentRow:
    id: int
    name: str
    slo: Mapping[str, Any]
    runs: int  # this week
    runs_last_week: int
    last_measured_at: datetime | None


@dataclass(frozen=True)
class RunSample:
    """One sampled run (the latest ones of each deployment and week)."""

    deployment_id: int
    run_id: int
    this_week: bool
    measured_at: datetime
    values: Mapping[str, float | None]  # TRACKED_METRICS columns


@dataclass(frozen=True)
class SetupRow:
    """The setup of a deployment's latest run in a week."""

    deployment_id: int
    this_week: bool
    fields: Mapping[str, Any]  # SETUP_FIELDS
    engine_args: Mapping[str, Any]


@dataclass(frozen=True)
class RecommendationRow:
    """Open recommendations of one action for one deployment, from its latest run of the week."""

    action: str
    metric: str | None
    deployment: str
    expected_gain: float  # |relative| of the expected change
    severity: str
    score: float
    title: str


@dataclass(frozen=True)
class AppliedSample:
    """An applied recommendation, with its metric's runs before and after it was applied."""

    recommendation_id: int
    deployment: str
    action: str
    rule_id: str
    metric: str
    applied_at: datetime
    before: Sequence[float]
    after: Sequence[float]
    before_runs: Sequence[int] = ()
    after_runs: Sequence[int] = ()


@dataclass(frozen=True)
class HardwareRow:
    hardware: str
    deployments: int
    runs: int
    decode_efficiency: float | None
    prefill_efficiency: float | None


@dataclass(frozen=True)
class DeploymentEfficiencyRow:
    deployment: str
    hardware: str
    decode_efficiency: float
    runs: int


@dataclass(frozen=True)
class MissingFieldRow:
    field: str
    runs: int
    deployments: int


@dataclass(frozen=True)
class WeeklyAggregates:
    week: IsoWeek
    fleet_weeks: Sequence[FleetWeek]  # oldest first; the last two are last week and this week
    deployments: Sequence[DeploymentRow]
    samples: Sequence[RunSample]
    setups: Sequence[SetupRow]
    recommendations: Sequence[RecommendationRow]
    applied: Sequence[AppliedSample]
    hardware: Sequence[HardwareRow]
    deployment_efficiency: Sequence[DeploymentEfficiencyRow]
    missing_fields: Sequence[MissingFieldRow]
    runs_not_analysed: int
    test: NoiseTest = field(default_factory=NoiseTest)


# ----------------------------------------------------------------------------------------------
# Output: the report (msgspec structs, so JSON rendering is one call)


class Movement(msgspec.Struct, kw_only=True):
    name: str
    this_week: float | None
    last_week: float | None
    change: float | None  # absolute for ratios and counts


class MetricComparison(msgspec.Struct, kw_only=True):
    metric: str
    unit: str
    last_week: float | None
    this_week: float | None
    change: float | None  # relative change of the median
    p_value: float | None
    spread: float | None
    verdict: str
    runs_last_week: int
    runs_this_week: int


class DeploymentReport(msgspec.Struct, kw_only=True):
    name: str
    runs: int
    runs_last_week: int
    slo: dict[str, Any]
    metrics: list[MetricComparison]


class RunRef(msgspec.Struct, kw_only=True):
    id: int
    week: str  # "last" or "this"
    measured_at: datetime
    value: float | None


class SetupChange(msgspec.Struct, kw_only=True):
    field: str
    last_week: Any
    this_week: Any


class Change(msgspec.Struct, kw_only=True):
    """A significant change of one metric of one deployment (a regression or an improvement)."""

    deployment: str
    metric: str
    unit: str
    change: float
    last_week: float
    this_week: float
    p_value: float
    spread: float
    runs: list[RunRef]
    setup_changes: list[SetupChange]
    slo: float | None = None


class TopRecommendation(msgspec.Struct, kw_only=True):
    action: str
    metric: str | None
    total_expected_gain: float
    deployments: list[str]
    severity: str
    title: str


class Adoption(msgspec.Struct, kw_only=True):
    recommendation_id: int
    deployment: str
    action: str
    rule_id: str
    metric: str
    applied_at: datetime
    before: float | None
    after: float | None
    change: float | None
    p_value: float | None
    verdict: str  # the noise test's: better, worse, same, too-few-runs
    runs_before: int
    runs_after: int


class HardwareEfficiency(msgspec.Struct, kw_only=True):
    hardware: str
    deployments: int
    runs: int
    decode_efficiency: float | None
    prefill_efficiency: float | None


class FarBelow(msgspec.Struct, kw_only=True):
    deployment: str
    hardware: str
    decode_efficiency: float
    hardware_median: float
    ratio: float


class MissingField(msgspec.Struct, kw_only=True):
    field: str
    runs: int
    deployments: int
    hint: str


class DataQuality(msgspec.Struct, kw_only=True):
    deployments_without_runs: list[str]
    missing_fields: list[MissingField]
    runs_not_analysed: int


class TrendPoint(msgspec.Struct, kw_only=True):
    week: str
    start: datetime
    runs: int
    deployments: int
    slo_attainment: float | None
    decode_efficiency: float | None
    prefill_efficiency: float | None


class WeeklyReport(msgspec.Struct, kw_only=True):
    """The whole report. It holds no generation time, so regenerating a week from the same runs gives
    the same bytes (the snapshot row keeps when it was made)."""

    kind: str = "weekly"
    week: str
    previous_week: str
    start: datetime
    end: datetime
    noise_test: str
    fleet: list[Movement]
    trend: list[TrendPoint]
    deployments: list[DeploymentReport]
    regressions: list[Change]
    improvements: list[Change]
    top_recommendations: list[TopRecommendation]
    adoption: list[Adoption]
    hardware: list[HardwareEfficiency]
    far_below: list[FarBelow]
    data_quality: DataQuality


# ----------------------------------------------------------------------------------------------

_MISSING_HINTS = {
    "prompt_tokens_mean": "set workload.prompt_tokens_mean: prefill and TTFT rules need the prompt length",
    "decode_tok_s": "report metrics.decode_tok_s (or tpot_ms/itl_ms): decode rules need the decode speed",
    "ttft_p99_ms": "report metrics.ttft_ms.p99: TTFT SLOs and tail rules need it",
    "itl_p99_ms": "report metrics.itl_ms.p99: interference and tail rules need it",
    "hardware_id": "set setup.hardware: without it there is no roofline ceiling",
    "model_id": "set setup.model: without it there is no roofline ceiling",
    "quantization_id": "set setup.quantization: the ceiling depends on the bits per weight",
    "num_requests": "set workload.num_requests: a p99 needs enough requests to be stable",
}

_SEVERITY_ORDER = {"none": 0, "low": 1, "moderate": 2, "severe": 3, "critical": 4}

#: SLO keys that bound each tracked metric: (key, True when the SLO is a minimum).
_SLO_FOR = {
    "ttft_p50_ms": ("ttft_p50_ms", False),
    "ttft_p99_ms": ("ttft_p99_ms", False),
    "itl_p99_ms": ("itl_p99_ms", False),
    "decode_tok_s": ("decode_tok_s_min", True),
}


def _delta(this: float | None, last: float | None) -> float | None:
    return this - last if this is not None and last is not None else None


def _fleet(weeks: Sequence[FleetWeek], week: IsoWeek) -> list[Movement]:
    by_week = {w.week: w for w in weeks}
    empty = FleetWeek(
        week="", deployments=0, runs=0, slo_runs=0, slo_met=0, decode_efficiency=None, prefill_efficiency=None
    )
    this, last = by_week.get(str(week), empty), by_week.get(str(week.previous()), empty)
    items: list[tuple[str, float | None, float | None]] = [
        ("deployments", this.deployments, last.deployments),
        ("runs", this.runs, last.runs),
        ("slo_attainment", this.slo_attainment, last.slo_attainment),
        ("decode_efficiency_median", this.decode_efficiency, last.decode_efficiency),
        ("prefill_efficiency_median", this.prefill_efficiency, last.prefill_efficiency),
    ]
    return [Movement(name=n, this_week=t, last_week=p, change=_delta(t, p)) for n, t, p in items]


def _setup_changes(setups: Mapping[tuple[int, bool], SetupRow], deployment_id: int) -> list[SetupChange]:
    last, this = setups.get((deployment_id, False)), setups.get((deployment_id, True))
    if last is None or this is None:
        return []
    changes = [
        SetupChange(field=f, last_week=last.fields.get(f), this_week=this.fields.get(f))
        for f in SETUP_FIELDS
        if last.fields.get(f) != this.fields.get(f)
    ]
    for key in sorted(set(last.engine_args) | set(this.engine_args)):
        if last.engine_args.get(key) != this.engine_args.get(key):
            changes.append(
                SetupChange(
                    field=f"engine_args.{key}", last_week=last.engine_args.get(key), this_week=this.engine_args.get(key)
                )
            )
    return changes


def _change(
    name: str,
    metric: TrackedMetric,
    result: Comparison,
    samples: Sequence[RunSample],
    setup_changes: list[SetupChange],
    slo: Mapping[str, Any],
) -> Change:
    slo_key = _SLO_FOR[metric.column][0]
    runs = [
        RunRef(
            id=s.run_id,
            week="this" if s.this_week else "last",
            measured_at=s.measured_at,
            value=s.values.get(metric.column),
        )
        for s in sorted(samples, key=lambda s: s.measured_at)
        if s.values.get(metric.column) is not None
    ]
    assert result.change is not None and result.before is not None and result.after is not None
    return Change(
        deployment=name,
        metric=metric.column,
        unit=metric.unit,
        change=result.change,
        last_week=result.before,
        this_week=result.after,
        p_value=result.p_value or 0.0,
        spread=result.spread or 0.0,
        runs=runs,
        setup_changes=setup_changes,
        slo=float(slo[slo_key]) if slo.get(slo_key) is not None else None,
    )


def _top_recommendations(rows: Sequence[RecommendationRow]) -> list[TopRecommendation]:
    groups: dict[tuple[str, str | None], list[RecommendationRow]] = defaultdict(list)
    for row in rows:
        groups[(row.action, row.metric)].append(row)
    out = []
    for (action, metric), items in groups.items():
        worst = max(items, key=lambda r: (_SEVERITY_ORDER.get(r.severity, 0), r.score))
        out.append(
            TopRecommendation(
                action=action,
                metric=metric,
                total_expected_gain=sum(r.expected_gain for r in items),
                deployments=sorted({r.deployment for r in items}),
                severity=worst.severity,
                title=worst.title,
            )
        )
    out.sort(key=lambda r: (-r.total_expected_gain, -len(r.deployments), r.action, r.metric or ""))
    return out


def _adoption(rows: Sequence[AppliedSample], test: NoiseTest) -> list[Adoption]:
    by_path = {m.path: m for m in TRACKED_METRICS}
    out = []
    for row in rows:
        # Throughputs are better higher; every latency (and anything else in ms) better lower.
        tracked = by_path.get(row.metric)
        higher = tracked.higher_is_better if tracked else row.metric.endswith(("tok_s", "rps", "hit_rate"))
        result = compare(row.before, row.after, higher_is_better=higher, test=test)
        out.append(
            Adoption(
                recommendation_id=row.recommendation_id,
                deployment=row.deployment,
                action=row.action,
                rule_id=row.rule_id,
                metric=row.metric,
                applied_at=row.applied_at,
                before=result.before,
                after=result.after,
                change=result.change,
                p_value=result.p_value,
                verdict=result.verdict,
                runs_before=result.n_before,
                runs_after=result.n_after,
            )
        )
    out.sort(key=lambda a: (a.verdict != "better", a.applied_at, a.deployment, a.action))
    return out


def _far_below(rows: Sequence[DeploymentEfficiencyRow], hardware: Sequence[HardwareRow]) -> list[FarBelow]:
    medians = {h.hardware: h.decode_efficiency for h in hardware if h.deployments > 1}
    out = []
    for row in rows:
        median = medians.get(row.hardware)
        if median and row.decode_efficiency < FAR_BELOW_RATIO * median:
            out.append(
                FarBelow(
                    deployment=row.deployment,
                    hardware=row.hardware,
                    decode_efficiency=row.decode_efficiency,
                    hardware_median=median,
                    ratio=row.decode_efficiency / median,
                )
            )
    out.sort(key=lambda f: (f.ratio, f.deployment))
    return out


def build_weekly(agg: WeeklyAggregates) -> WeeklyReport:
    """The report for ``agg.week`` against the week before."""
    week = agg.week
    samples: dict[int, list[RunSample]] = defaultdict(list)
    for s in agg.samples:
        samples[s.deployment_id].append(s)
    setups = {(s.deployment_id, s.this_week): s for s in agg.setups}
    deployments: list[DeploymentReport] = []
    regressions: list[Change] = []
    improvements: list[Change] = []
    for dep in sorted(agg.deployments, key=lambda d: d.name):
        own = samples.get(dep.id, [])
        comparisons = []
        for metric in TRACKED_METRICS:
            before = [v for s in own if not s.this_week and (v := s.values.get(metric.column)) is not None]
            after = [v for s in own if s.this_week and (v := s.values.get(metric.column)) is not None]
            result = compare(before, after, higher_is_better=metric.higher_is_better, test=agg.test)
            comparisons.append(
                MetricComparison(
                    metric=metric.column,
                    unit=metric.unit,
                    last_week=result.before,
                    this_week=result.after,
                    change=result.change,
                    p_value=result.p_value,
                    spread=result.spread,
                    verdict=result.verdict,
                    runs_last_week=result.n_before,
                    runs_this_week=result.n_after,
                )
            )
            if result.verdict in ("worse", "better"):
                item = _change(dep.name, metric, result, own, _setup_changes(setups, dep.id), dep.slo)
                (regressions if result.verdict == "worse" else improvements).append(item)
        if dep.runs or dep.runs_last_week:
            deployments.append(
                DeploymentReport(
                    name=dep.name,
                    runs=dep.runs,
                    runs_last_week=dep.runs_last_week,
                    slo=dict(dep.slo),
                    metrics=comparisons,
                )
            )
    # Worst first: the largest relative change in the bad direction.
    regressions.sort(key=lambda c: (-abs(c.change), c.deployment, c.metric))
    improvements.sort(key=lambda c: (-abs(c.change), c.deployment, c.metric))
    trend = [
        TrendPoint(
            week=w.week,
            start=IsoWeek.parse(w.week).start,
            runs=w.runs,
            deployments=w.deployments,
            slo_attainment=w.slo_attainment,
            decode_efficiency=w.decode_efficiency,
            prefill_efficiency=w.prefill_efficiency,
        )
        for w in agg.fleet_weeks
    ]
    hardware = [
        HardwareEfficiency(
            hardware=h.hardware,
            deployments=h.deployments,
            runs=h.runs,
            decode_efficiency=h.decode_efficiency,
            prefill_efficiency=h.prefill_efficiency,
        )
        for h in sorted(agg.hardware, key=lambda h: (-(h.decode_efficiency or -1.0), h.hardware))
    ]
    quality = DataQuality(
        deployments_without_runs=sorted(d.name for d in agg.deployments if d.runs == 0),
        missing_fields=[
            MissingField(field=m.field, runs=m.runs, deployments=m.deployments, hint=_MISSING_HINTS.get(m.field, ""))
            for m in sorted(agg.missing_fields, key=lambda m: (-m.runs, m.field))
            if m.runs
        ],
        runs_not_analysed=agg.runs_not_analysed,
    )
    return WeeklyReport(
        week=str(week),
        previous_week=str(week.previous()),
        start=week.start,
        end=week.end,
        noise_test=agg.test.describe(),
        fleet=_fleet(agg.fleet_weeks, week),
        trend=trend,
        deployments=deployments,
        regressions=regressions,
        improvements=improvements,
        top_recommendations=_top_recommendations(agg.recommendations),
        adoption=_adoption(agg.applied, agg.test),
        hardware=hardware,
        far_below=_far_below(agg.deployment_efficiency, agg.hardware),
        data_quality=quality,
    )
