"""advisor's own Prometheus metrics, beside the request metrics of Litestar's Prometheus plugin.

Counters of what the domain did, incremented where it happens (the runs pipeline):

* ``advisor_runs_ingested_total{format,runtime}``: runs stored (single submissions and bulk);
* ``advisor_recommendations_total{action,severity}``: recommendations stored with an analysis;
* ``advisor_verdicts_total{verdict}``: analyses stored, by verdict.

And two gauges read from the database at each scrape, so every worker and host reports the same
value and no process has to remember it:

* ``advisor_model_info{version}`` = 1: the fitted-model version that is active (``physics-prior``
  when none is);
* ``advisor_fit_duration_seconds``: how long the latest successful fit took (absent before one).

The request metrics (``advisor_requests_total``, ``advisor_request_duration_seconds`` ...) are
labelled by route template (``/api/v1/runs/{run_id}``), never by raw path: bounded cardinality.

Several workers: ``advisor serve --workers N`` points ``PROMETHEUS_MULTIPROC_DIR`` at a fresh
directory before the workers start, so that prometheus_client's multiprocess mode sums the counters
of every worker whichever one answers the scrape.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable
from typing import Any

from litestar import Request, get
from litestar.plugins.prometheus import PrometheusController
from litestar.response import Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

__all__ = [
    "RECOMMENDATIONS",
    "RUNS_INGESTED",
    "VERDICTS",
    "DomainMetricsController",
    "database_gauges",
    "record_analysis",
    "record_ingested",
]

RUNS_INGESTED = Counter(
    "advisor_runs_ingested_total", "Runs stored, by input format and runtime.", ["format", "runtime"]
)
RECOMMENDATIONS = Counter(
    "advisor_recommendations_total", "Recommendations stored with an analysis.", ["action", "severity"]
)
VERDICTS = Counter("advisor_verdicts_total", "Analyses stored, by verdict.", ["verdict"])


# The label children, looked up once per label values: ``labels()`` takes the metric's lock and
# builds its key on every call, and these run for every stored run. The label values are bounded
# (formats, runtimes, verdicts, actions, severities); the metrics are module constants, never
# cleared, so a child stays the one the registry exposes (in multiprocess mode too: its value
# lives in this process's file either way).
@functools.lru_cache(maxsize=1024)
def _ingested(format_id: str, runtime: str) -> Any:
    return RUNS_INGESTED.labels(format=format_id, runtime=runtime)


@functools.lru_cache(maxsize=256)
def _verdict(verdict: str) -> Any:
    return VERDICTS.labels(verdict=verdict)


@functools.lru_cache(maxsize=1024)
def _recommendation(action: str, severity: str) -> Any:
    return RECOMMENDATIONS.labels(action=action, severity=severity)


def record_ingested(format_id: str, runtime: str | None, n: int = 1) -> None:
    _ingested(format_id, runtime or "unknown").inc(n)


def record_analysis(verdict: str, recommendations: Iterable[tuple[str, str]]) -> None:
    """One stored analysis: its verdict and its recommendations' ``(action, severity)``."""
    _verdict(verdict).inc()
    for action, severity in recommendations:
        _recommendation(action, severity).inc()


async def database_gauges(engine: AsyncEngine) -> bytes:
    """``advisor_model_info`` and ``advisor_fit_duration_seconds`` from the database, in the text
    exposition format (a registry of their own per scrape: nothing kept in the process)."""
    from advisor.db.models import FittedModel, Job
    from advisor.domain.models.services import FIT_JOB
    from advisor.ml.prior import PRIOR_MODEL_VERSION

    async with engine.connect() as connection:
        version = (
            await connection.execute(select(FittedModel.version).where(FittedModel.is_active.is_(True)).limit(1))
        ).scalar_one_or_none()
        fit = (
            await connection.execute(
                select(Job.result)
                .where(Job.kind == FIT_JOB, Job.status == "succeeded")
                .order_by(Job.finished_at.desc(), Job.id.desc())
                .limit(1)
            )
        ).scalar_one_or_none()
    info = GaugeMetricFamily("advisor_model_info", "The active fitted-model version (1).", labels=["version"])
    info.add_metric([version or PRIOR_MODEL_VERSION], 1)
    families: list[Metric] = [info]
    result: dict[str, Any] = fit if isinstance(fit, dict) else {}
    seconds = result.get("seconds")
    if isinstance(seconds, int | float):
        families.append(
            GaugeMetricFamily(
                "advisor_fit_duration_seconds", "Wall time of the latest successful model fit.", value=float(seconds)
            )
        )
    registry = CollectorRegistry()
    registry.register(_Families(families))
    return generate_latest(registry)


class _Families(Collector):
    """Metric families computed for one scrape. Plain values, unlike a Gauge, which in multiprocess
    mode would leave a file per worker behind and be reported twice."""

    def __init__(self, families: list[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterable[Metric]:
        return self._families


class DomainMetricsController(PrometheusController):
    """``GET /metrics``: the process's (or, with several workers, every worker's) counters and
    request metrics, then the database gauges."""

    path = "/metrics"
    openmetrics_format = False

    @get(include_in_schema=False)
    async def get(self, request: Request[Any, Any, Any]) -> Response[bytes]:  # type: ignore[override]
        registry: CollectorRegistry = REGISTRY
        if "PROMETHEUS_MULTIPROC_DIR" in os.environ or "prometheus_multiproc_dir" in os.environ:
            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        body = generate_latest(registry) + await database_gauges(request.app.state.sqlalchemy_config.get_engine())
        return Response(body, status_code=200, headers={"Content-Type": CONTENT_TYPE_LATEST})
