"""The weekly report's SQL aggregation and its stored snapshots.

Every query groups in the database, so Python only sees a few rows per deployment, whatever the
number of runs: GROUP BY per week and per hardware, window functions for "the latest N runs of each
deployment and week" and for the medians of many small groups, ORDER BY … OFFSET for the median of
one large group (SQLite has no ``percentile_cont``). The same SQL runs on SQLite and Postgres.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec
from sqlalchemy import ColumnElement, and_, case, func, literal, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from advisor.db.models import METRIC_COLUMNS, Deployment, Recommendation, Report, Run
from advisor.domain.runs.pipeline import RunPipeline
from advisor.reports.context import (
    SETUP_FIELDS,
    TRACKED_METRICS,
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
from advisor.reports.noise import NoiseTest
from advisor.reports.weeks import IsoWeek

__all__ = ["PROGRESS_STEPS", "SAMPLE_RUNS", "TREND_WEEKS", "ReportService", "Snapshot"]

#: The latest runs per deployment and week that the noise test sees (enough for its power, and it
#: bounds what leaves the database).
SAMPLE_RUNS = 60
#: Weeks in the fleet trend chart, this one included.
TREND_WEEKS = 8
#: How far before an applied recommendation its "before" runs are taken from.
ADOPTION_LOOKBACK = timedelta(days=14)
#: Applied recommendations followed per report (the most recently applied).
ADOPTION_LIMIT = 200

#: The progress callback's calls for one build: the aggregate queries, then the builder.
PROGRESS_STEPS = 11

_KIND = "weekly"
_FORMAT = "json"

#: SLO keys checked for attainment: (key, run column, True when the SLO is a minimum).
_SLO_CHECKS: tuple[tuple[str, str, bool], ...] = (
    ("ttft_p50_ms", "ttft_p50_ms", False),
    ("ttft_p99_ms", "ttft_p99_ms", False),
    ("itl_p50_ms", "itl_p50_ms", False),
    ("itl_p99_ms", "itl_p99_ms", False),
    ("tpot_p99_ms", "tpot_p99_ms", False),
    ("e2e_p99_ms", "e2e_p99_ms", False),
    ("decode_tok_s_min", "decode_tok_s", True),
    ("output_throughput_tok_s_min", "output_throughput_tok_s", True),
)

#: Fields whose absence limits the diagnosis (see advisor.reports.context for the hints).
_QUALITY_FIELDS = (
    "prompt_tokens_mean",
    "decode_tok_s",
    "ttft_p99_ms",
    "itl_p99_ms",
    "hardware_id",
    "model_id",
    "quantization_id",
    "num_requests",
)

_SEVERITY_LABELS = ("none", "low", "moderate", "severe", "critical")

_COLUMN_FOR_PATH = {path.removeprefix("metrics."): column for column, path in METRIC_COLUMNS}


class Snapshot(msgspec.Struct, kw_only=True):
    kind: str
    week: str
    format: str
    created_at: datetime
    updated_at: datetime
    bytes: int


def _col(name: str) -> Any:
    return getattr(Run, name)


def _in(week: IsoWeek) -> ColumnElement[bool]:
    return and_(Run.measured_at >= week.start, Run.measured_at < week.end)


def _median_query(value: Any, groups: Sequence[Any], where: Sequence[ColumnElement[bool]]) -> Any:
    """``SELECT groups..., median(value) GROUP BY groups`` with window functions: SQLite has no
    percentile_cont, and the middle row(s) by row_number are the same median on both databases."""
    labelled = [g.label(f"g{i}") for i, g in enumerate(groups)]
    rn = func.row_number().over(partition_by=list(groups), order_by=value).label("rn")
    n = func.count().over(partition_by=list(groups)).label("n")
    sub = select(*labelled, value.label("v"), rn, n).where(value.is_not(None), *where).subquery()
    keys = [sub.c[f"g{i}"] for i in range(len(groups))]
    return select(*keys, func.avg(sub.c.v)).where(sub.c.rn * 2 >= sub.c.n, sub.c.rn * 2 <= sub.c.n + 2).group_by(*keys)


def _slo_columns() -> tuple[Any, ColumnElement[bool], ColumnElement[bool]]:
    """(the SLO limits per deployment, "the run's deployment has SLOs", "the run meets every SLO it
    can be judged on"). The limits come from a subquery over the deployments, so the JSON is read
    once per deployment, not once per run."""
    limits = select(
        Deployment.id.label("deployment_id"), *(Deployment.slo[key].as_float().label(key) for key, _, _ in _SLO_CHECKS)
    ).subquery()
    has, met = [], []
    for key, column, is_min in _SLO_CHECKS:
        limit, col = limits.c[key], _col(column)
        has.append(limit.is_not(None))
        met.append(or_(limit.is_(None), col.is_(None), col >= limit if is_min else col <= limit))
    return limits, or_(*has), and_(*met)


class ReportService:
    """Builds the weekly report from SQL aggregates and keeps one snapshot per week."""

    def __init__(self, session: AsyncSession, *, test: NoiseTest | None = None) -> None:
        self.session = session
        self.test = test or NoiseTest()

    # ------------------------------------------------------------------------------------------
    # Reports and snapshots

    async def weekly(
        self,
        week: IsoWeek | None = None,
        *,
        refresh: bool = False,
        now: datetime | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> WeeklyReport:
        """The report for ``week`` (default: the last complete week). A complete week is served from
        its snapshot, made on first request; ``refresh`` rebuilds it. The current week is live."""
        now = now or datetime.now(UTC)
        week = week or IsoWeek.last_complete(now)
        complete = week.end <= now
        if complete and not refresh:
            stored = await self._snapshot_row(week)
            if stored is not None:
                try:
                    return msgspec.json.decode(stored.content, type=WeeklyReport)
                except msgspec.ValidationError:
                    pass  # stored by a version whose report had another shape: rebuild it below
        # Every stored run has its recommendations: bulk-loaded runs of these two weeks that the
        # background has not reached yet are analysed first.
        await RunPipeline(self.session).analyse_pending(since=week.previous().start, until=week.end)
        report = build_weekly(await self.aggregates(week, progress=progress))
        if progress:
            progress("building the report")
        if complete:
            await self.store(report)
        return report

    async def store(self, report: WeeklyReport) -> Report:
        """Upsert the week's snapshot: one row per week, and the same bytes for the same runs."""
        content = msgspec.json.encode(report)
        for attempt in range(2):
            row = await self._snapshot_row(IsoWeek.parse(report.week))
            if row is None:
                row = Report(kind=_KIND, period=report.week, format=_FORMAT, content=content, params={})
                self.session.add(row)
            else:
                row.content = content
                row.updated_at = datetime.now(UTC)
            row.params = {"noise_test": report.noise_test, "regressions": len(report.regressions)}
            try:
                await self.session.commit()
            except IntegrityError:
                # Another worker stored the same week first: update its row instead.
                await self.session.rollback()
                if attempt:
                    raise
                continue
            return row
        raise AssertionError("unreachable")  # pragma: no cover

    async def snapshots(self) -> list[Snapshot]:
        rows = await self.session.execute(
            select(
                Report.kind,
                Report.period,
                Report.format,
                Report.created_at,
                Report.updated_at,
                func.length(Report.content),
            )
            .where(Report.kind == _KIND)
            .order_by(Report.period.desc())
        )
        return [
            Snapshot(kind=k, week=p, format=f, created_at=c, updated_at=u, bytes=int(n or 0))
            for k, p, f, c, u, n in rows
        ]

    async def _snapshot_row(self, week: IsoWeek) -> Report | None:
        result = await self.session.execute(
            select(Report).where(Report.kind == _KIND, Report.period == str(week), Report.format == _FORMAT)
        )
        return result.scalar_one_or_none()

    # ------------------------------------------------------------------------------------------
    # Aggregates

    async def aggregates(self, week: IsoWeek, *, progress: Callable[[str], None] | None = None) -> WeeklyAggregates:
        """Everything :func:`build_weekly` needs, in a dozen grouped queries."""
        steps: list[tuple[str, Callable[[IsoWeek], Any]]] = [
            ("fleet trend", self._fleet_weeks),
            ("deployments", self._deployments),
            ("sampled runs", self._samples),
            ("setups", self._setups),
            ("open recommendations", self._recommendations),
            ("applied recommendations", self._applied),
            ("hardware", self._hardware),
            ("efficiency per deployment", self._deployment_efficiency),
            ("data quality", self._missing_fields),
            ("analysis backlog", self._not_analysed),
        ]
        out: dict[str, Any] = {}
        for name, step in steps:
            if progress:
                progress(name)
            out[name] = await step(week)
        return WeeklyAggregates(
            week=week,
            fleet_weeks=out["fleet trend"],
            deployments=out["deployments"],
            samples=out["sampled runs"],
            setups=out["setups"],
            recommendations=out["open recommendations"],
            applied=out["applied recommendations"],
            hardware=out["hardware"],
            deployment_efficiency=out["efficiency per deployment"],
            missing_fields=out["data quality"],
            runs_not_analysed=out["analysis backlog"],
            test=self.test,
        )

    async def _fleet_weeks(self, week: IsoWeek) -> list[FleetWeek]:
        weeks = [week.previous(i) for i in reversed(range(TREND_WEEKS))]
        bucket = case(*[(_in(w), literal(str(w))) for w in weeks], else_=literal(None))
        span = [Run.measured_at >= weeks[0].start, Run.measured_at < week.end]
        counts = await self.session.execute(
            select(
                bucket,
                func.count(func.distinct(Run.deployment_id)),
                func.count(),
                func.count(Run.decode_efficiency),
                func.count(Run.prefill_efficiency),
            )
            .where(*span)
            .group_by(bucket)
        )
        rows = {b: r for b, *r in counts}
        # Driven from the deployments that have SLOs into the runs' (deployment_id, measured_at)
        # index: an outer join from the runs would evaluate the join for every run.
        limits, has_slo, met = _slo_columns()
        slo_rows = await self.session.execute(
            select(bucket, func.count(), func.sum(case((met, 1), else_=0)))
            .select_from(limits)
            .join(Run, Run.deployment_id == limits.c.deployment_id)
            .where(has_slo, *span)
            .group_by(bucket)
        )
        slo = {b: (int(n or 0), int(m or 0)) for b, n, m in slo_rows}
        out = []
        for w in weeks:
            d, n, n_decode, n_prefill = rows.get(str(w), (0, 0, 0, 0))
            slo_runs, slo_met = slo.get(str(w), (0, 0))
            out.append(
                FleetWeek(
                    week=str(w),
                    deployments=int(d or 0),
                    runs=int(n or 0),
                    slo_runs=slo_runs,
                    slo_met=slo_met,
                    decode_efficiency=await self._median(Run.decode_efficiency, _in(w), int(n_decode or 0)),
                    prefill_efficiency=await self._median(Run.prefill_efficiency, _in(w), int(n_prefill or 0)),
                )
            )
        return out

    async def _median(self, value: Any, where: ColumnElement[bool], n: int) -> float | None:
        """The median of ``n`` known non-null values: the middle one or two by ORDER BY with OFFSET.
        Over one large group this sorts faster than the window functions of :func:`_median_query`."""
        if n == 0:
            return None
        middle = (
            select(value.label("v"))
            .where(where, value.is_not(None))
            .order_by(value)
            .limit(2 - n % 2)
            .offset((n - 1) // 2)
            .subquery()
        )
        result = await self.session.scalar(select(func.avg(middle.c.v)))
        return float(result) if result is not None else None

    async def _deployments(self, week: IsoWeek) -> list[DeploymentRow]:
        last = week.previous()
        counts = (
            select(
                Run.deployment_id.label("deployment_id"),
                func.sum(case((_in(week), 1), else_=0)).label("this"),
                func.sum(case((_in(last), 1), else_=0)).label("last"),
                func.max(Run.measured_at).label("latest"),
            )
            .where(Run.measured_at >= last.start, Run.measured_at < week.end)
            .group_by(Run.deployment_id)
            .subquery()
        )
        rows = await self.session.execute(
            select(Deployment.id, Deployment.name, Deployment.slo, counts.c.this, counts.c.last, counts.c.latest)
            .outerjoin(counts, counts.c.deployment_id == Deployment.id)
            # Deployments that existed in the week: made before its end, or measured before it.
            .where(
                or_(
                    Deployment.created_at < week.end,
                    select(Run.id).where(Run.deployment_id == Deployment.id, Run.measured_at < week.end).exists(),
                )
            )
        )
        return [
            DeploymentRow(id=i, name=n, slo=slo or {}, runs=int(t or 0), runs_last_week=int(p or 0), last_measured_at=m)
            for i, n, slo, t, p, m in rows
        ]

    def _latest(self, week: IsoWeek, *columns: Any, limit: int) -> Any:
        """The latest ``limit`` runs of each deployment in ``week`` and the week before."""
        this_week = Run.measured_at >= week.start
        rn = func.row_number().over(
            partition_by=[Run.deployment_id, this_week], order_by=[Run.measured_at.desc(), Run.id.desc()]
        )
        sub = (
            select(
                Run.id.label("run_id"),
                Run.deployment_id,
                this_week.label("this_week"),
                Run.measured_at,
                *columns,
                rn.label("rn"),
            )
            .where(Run.deployment_id.is_not(None), Run.measured_at >= week.previous().start, Run.measured_at < week.end)
            .subquery()
        )
        return select(sub).where(sub.c.rn <= limit)

    async def _samples(self, week: IsoWeek) -> list[RunSample]:
        names = [m.column for m in TRACKED_METRICS]
        rows = await self.session.execute(self._latest(week, *(_col(n) for n in names), limit=SAMPLE_RUNS))
        return [
            RunSample(
                deployment_id=r.deployment_id,
                run_id=r.run_id,
                this_week=bool(r.this_week),
                measured_at=r.measured_at,
                values={n: getattr(r, n) for n in names},
            )
            for r in rows
        ]

    async def _setups(self, week: IsoWeek) -> list[SetupRow]:
        columns = {
            "runtime": Run.runtime,
            "runtime_version": Run.runtime_version,
            "hardware": Run.hardware_id,
            "model": Run.model_id,
            "quantization": Run.quantization_id,
            "gpu_count": Run.gpu_count,
            "tensor_parallel": Run.tensor_parallel,
        }
        assert set(columns) == set(SETUP_FIELDS)
        labelled = [c.label(f"s_{k}") for k, c in columns.items()]
        rows = await self.session.execute(self._latest(week, *labelled, Run.setup, limit=1))
        return [
            SetupRow(
                deployment_id=r.deployment_id,
                this_week=bool(r.this_week),
                fields={k: getattr(r, f"s_{k}") for k in columns},
                engine_args=dict((r.setup or {}).get("engine_args") or {}),
            )
            for r in rows
        ]

    async def _recommendations(self, week: IsoWeek) -> list[RecommendationRow]:
        rn = func.row_number().over(partition_by=Run.deployment_id, order_by=[Run.measured_at.desc(), Run.id.desc()])
        latest = (
            select(Run.id.label("run_id"), Run.deployment_id, rn.label("rn"))
            .where(Run.deployment_id.is_not(None), _in(week))
            .subquery()
        )
        metric = Recommendation.expected_gain["metric"].as_string()
        gain = func.abs(func.coalesce(Recommendation.expected_gain["relative"].as_float(), 0.0))
        rows = await self.session.execute(
            select(
                Recommendation.action,
                metric,
                Deployment.name,
                func.max(gain),
                func.max(Recommendation.severity_level),
                func.max(Recommendation.score),
                func.max(Recommendation.title),
            )
            .join(latest, and_(latest.c.run_id == Recommendation.run_id, latest.c.rn == 1))
            .join(Deployment, Deployment.id == latest.c.deployment_id)
            .where(Recommendation.status == "open")
            .group_by(Recommendation.action, metric, Deployment.name)
        )
        return [
            RecommendationRow(
                action=a,
                metric=m,
                deployment=d,
                expected_gain=float(g or 0.0),
                severity=_SEVERITY_LABELS[min(int(s or 0), 4)],
                score=float(sc or 0.0),
                title=t or "",
            )
            for a, m, d, g, s, sc, t in rows
        ]

    async def _applied(self, week: IsoWeek) -> list[AppliedSample]:
        metric = Recommendation.expected_gain["metric"].as_string()
        applied_at = func.min(Recommendation.status_changed_at)
        rows = (
            await self.session.execute(
                select(
                    func.min(Recommendation.id),
                    Run.deployment_id,
                    Deployment.name,
                    Recommendation.action,
                    func.min(Recommendation.rule_id),
                    metric,
                    applied_at,
                )
                .join(Run, Run.id == Recommendation.run_id)
                .join(Deployment, Deployment.id == Run.deployment_id)
                .where(
                    Recommendation.status == "applied",
                    Recommendation.status_changed_at >= week.previous().start,
                    Recommendation.status_changed_at < week.end,
                )
                .group_by(Run.deployment_id, Deployment.name, Recommendation.action, metric)
                .order_by(applied_at.desc())
                .limit(ADOPTION_LIMIT)
            )
        ).all()
        out = []
        for rec_id, deployment_id, name, action, rule_id, path, when in rows:
            column = _COLUMN_FOR_PATH.get(path or "")
            if column is None:
                continue
            col = _col(column)
            base = [Run.deployment_id == deployment_id, col.is_not(None)]
            before = (
                await self.session.execute(
                    select(Run.id, col)
                    .where(*base, Run.measured_at >= when - ADOPTION_LOOKBACK, Run.measured_at < when)
                    .order_by(Run.measured_at.desc())
                    .limit(SAMPLE_RUNS)
                )
            ).all()
            after = (
                await self.session.execute(
                    select(Run.id, col)
                    .where(*base, Run.measured_at >= when, Run.measured_at < week.end)
                    .order_by(Run.measured_at)
                    .limit(SAMPLE_RUNS)
                )
            ).all()
            out.append(
                AppliedSample(
                    recommendation_id=rec_id,
                    deployment=name,
                    action=action,
                    rule_id=rule_id,
                    metric=path,
                    applied_at=when,
                    before=[v for _, v in before],
                    after=[v for _, v in after],
                    before_runs=[i for i, _ in before],
                    after_runs=[i for i, _ in after],
                )
            )
        return out

    async def _hardware(self, week: IsoWeek) -> list[HardwareRow]:
        where = [_in(week), Run.hardware_id.is_not(None)]
        counts = await self.session.execute(
            select(Run.hardware_id, func.count(func.distinct(Run.deployment_id)), func.count())
            .where(*where)
            .group_by(Run.hardware_id)
        )
        decode = dict(
            (await self.session.execute(_median_query(Run.decode_efficiency, [Run.hardware_id], where))).tuples().all()
        )
        prefill = dict(
            (await self.session.execute(_median_query(Run.prefill_efficiency, [Run.hardware_id], where))).tuples().all()
        )
        return [
            HardwareRow(
                hardware=h,
                deployments=int(d),
                runs=int(n),
                decode_efficiency=decode.get(h),
                prefill_efficiency=prefill.get(h),
            )
            for h, d, n in counts
        ]

    async def _deployment_efficiency(self, week: IsoWeek) -> list[DeploymentEfficiencyRow]:
        where = [_in(week), Run.hardware_id.is_not(None), Run.deployment_id.is_not(None)]
        medians = _median_query(Run.decode_efficiency, [Run.deployment_id, Run.hardware_id], where).subquery()
        counts = (
            select(Run.deployment_id, Run.hardware_id, func.count().label("runs"))
            .where(*where, Run.decode_efficiency.is_not(None))
            .group_by(Run.deployment_id, Run.hardware_id)
            .subquery()
        )
        g0, g1, value = medians.c
        rows = await self.session.execute(
            select(Deployment.name, g1, value, counts.c.runs)
            .join(Deployment, Deployment.id == g0)
            .join(counts, and_(counts.c.deployment_id == g0, counts.c.hardware_id == g1))
        )
        return [
            DeploymentEfficiencyRow(deployment=n, hardware=h, decode_efficiency=float(v), runs=int(r))
            for n, h, v, r in rows
        ]

    async def _missing_fields(self, week: IsoWeek) -> list[MissingFieldRow]:
        columns = []
        for name in _QUALITY_FIELDS:
            missing = _col(name).is_(None)
            columns += [
                func.sum(case((missing, 1), else_=0)),
                func.count(func.distinct(case((missing, Run.deployment_id), else_=None))),
            ]
        row = (await self.session.execute(select(*columns).where(_in(week)))).one()
        return [
            MissingFieldRow(field=name, runs=int(row[2 * i] or 0), deployments=int(row[2 * i + 1] or 0))
            for i, name in enumerate(_QUALITY_FIELDS)
        ]

    async def _not_analysed(self, week: IsoWeek) -> int:
        count = await self.session.scalar(select(func.count()).where(_in(week), Run.verdict.is_(None)))
        return int(count or 0)
