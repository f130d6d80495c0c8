"""The few reads only the pages need, in SQL: the latest run per deployment, recent runs, a
deployment's trend columns and which of its runs carry a regression finding."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Row
from sqlalchemy.ext.asyncio import AsyncSession

from advisor.db.models import Deployment, Recommendation, Run

__all__ = ["REGRESSION_ACTION", "WebQueries"]

REGRESSION_ACTION = "investigate-regression"
_TREND_COLUMNS = (
    Run.id,
    Run.measured_at,
    Run.ttft_p50_ms,
    Run.ttft_p99_ms,
    Run.itl_p99_ms,
    Run.decode_tok_s,
    Run.verdict,
)


class WebQueries:
    """Read-only queries for page assembly; every write goes through the domain services."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def deployments_with_latest(self) -> list[tuple[Deployment, Run | None]]:
        """Every deployment (by name) with its most recently measured run, in two queries.

        The latest run is a correlated ``ORDER BY measured_at DESC LIMIT 1`` per deployment, which
        the (deployment_id, measured_at) index answers without reading the rest of the table.
        """
        latest = (
            select(Run.id)
            .where(Run.deployment_id == Deployment.id)
            .order_by(Run.measured_at.desc(), Run.id.desc())
            .limit(1)
            .correlate(Deployment)
            .scalar_subquery()
        )
        pairs = (await self.session.execute(select(Deployment, latest).order_by(Deployment.name))).all()
        run_ids = [run_id for _, run_id in pairs if run_id is not None]
        runs = (await self.session.execute(select(Run).where(Run.id.in_(run_ids)))).unique().scalars()
        by_id = {run.id: run for run in runs}
        return [(deployment, by_id.get(run_id) if run_id is not None else None) for deployment, run_id in pairs]

    async def recent_runs(self, limit: int = 20, *, deployment_id: int | None = None) -> Sequence[Row[Any]]:
        """The newest runs (by measurement time), as light rows for a table."""
        stmt = (
            select(
                Run.id,
                Deployment.name.label("deployment"),
                Run.measured_at,
                Run.verdict,
                Run.runtime,
                Run.hardware_id,
                Run.model_id,
                Run.quantization_id,
                Run.ttft_p99_ms,
                Run.itl_p99_ms,
                Run.decode_tok_s,
                Run.decode_efficiency,
            )
            .outerjoin(Deployment, Run.deployment_id == Deployment.id)
            .order_by(Run.measured_at.desc(), Run.id.desc())
            .limit(limit)
        )
        if deployment_id is not None:
            stmt = stmt.where(Run.deployment_id == deployment_id)
        return (await self.session.execute(stmt)).all()

    async def trend(self, deployment_id: int, limit: int = 500) -> Sequence[Row[Any]]:
        """The deployment's last ``limit`` runs, oldest first, with the charted columns only."""
        newest = (
            select(*_TREND_COLUMNS)
            .where(Run.deployment_id == deployment_id)
            .order_by(Run.measured_at.desc(), Run.id.desc())
            .limit(limit)
            .subquery()
        )
        return (await self.session.execute(select(newest).order_by(newest.c.measured_at, newest.c.id))).all()

    async def regressions(self, run_ids: Sequence[int]) -> dict[int, str]:
        """Run id → title of its regression finding, for the runs that have one."""
        if not run_ids:
            return {}
        stmt = select(Recommendation.run_id, Recommendation.title).where(
            Recommendation.action == REGRESSION_ACTION, Recommendation.run_id.in_(list(run_ids))
        )
        return {run_id: title for run_id, title in (await self.session.execute(stmt)).all()}

    async def run_ids(self, limit: int = 2) -> list[int]:
        """The newest run ids (the compare page's defaults)."""
        stmt = select(Run.id).order_by(Run.measured_at.desc(), Run.id.desc()).limit(limit)
        return list((await self.session.execute(stmt)).scalars())
