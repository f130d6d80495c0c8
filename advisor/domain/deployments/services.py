from __future__ import annotations

import re
from typing import Any

import msgspec
from advanced_alchemy.repository import SQLAlchemyAsyncRepository
from advanced_alchemy.service import SQLAlchemyAsyncRepositoryService
from sqlalchemy import func, select

from advisor.canonical import RUNTIMES, SLO, validate_slo
from advisor.db.models import Deployment, Run
from advisor.domain.deployments.schemas import DeploymentIn, DeploymentOut
from advisor.errors import InvalidInput

__all__ = ["DeploymentService", "validate_deployment_name"]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,199}$")


def validate_deployment_name(name: str, field: str = "deployment") -> str:
    if not _NAME.match(name):
        raise InvalidInput(
            "a deployment name is 1-200 characters: letters, digits and . _ : / - (e.g. chat-prod)",
            field=field,
        )
    return name


def slo_dict(slo: SLO | None) -> dict[str, Any]:
    return msgspec.to_builtins(slo) if slo is not None else {}


class DeploymentService(SQLAlchemyAsyncRepositoryService[Deployment]):
    """Deployments and their SLOs."""

    class Repo(SQLAlchemyAsyncRepository[Deployment]):
        model_type = Deployment

    repository_type = Repo

    async def get_by_name(self, name: str) -> Deployment | None:
        return await self.get_one_or_none(Deployment.name == name)

    async def ensure(self, name: str, *, runtime: str | None = None, slo: SLO | None = None) -> Deployment:
        """The deployment called ``name``, created on first use; a given SLO replaces the stored one."""
        validate_deployment_name(name)
        existing = await self.get_by_name(name)
        if existing is None:
            return await self.create(
                Deployment(name=name, runtime=runtime if runtime in RUNTIMES else None, slo=slo_dict(slo)),
                auto_commit=False,
            )
        if slo is not None:
            validate_slo(slo)
            existing.slo = {**(existing.slo or {}), **slo_dict(slo)}
            await self.update(existing, auto_commit=False)
        return existing

    async def put(self, name: str, data: DeploymentIn) -> Deployment:
        validate_deployment_name(name, field="name")
        if data.runtime is not None and data.runtime not in RUNTIMES:
            raise InvalidInput(f"unknown runtime {data.runtime!r}", field="runtime")
        deployment = await self.get_by_name(name) or Deployment(name=name, slo={})
        for field in ("team", "runtime", "description"):
            value = getattr(data, field)
            if value is not None:
                setattr(deployment, field, value)
        if data.slo is not None:
            validate_slo(data.slo)
            deployment.slo = slo_dict(data.slo)
        return await self.upsert(deployment, auto_commit=True)

    async def list_out(self) -> list[DeploymentOut]:
        """Every deployment with its run count and latest run, in two queries (not one per
        deployment: the listing is a frequent read)."""
        deployments = list(await self.get_many())
        stats = {
            deployment_id: (int(count), last)
            for deployment_id, count, last in (
                await self.repository.session.execute(
                    select(Run.deployment_id, func.count(Run.id), func.max(Run.measured_at))
                    .where(Run.deployment_id.is_not(None))
                    .group_by(Run.deployment_id)
                )
            ).all()
        }
        return [self._out(d, *stats.get(d.id, (0, None))) for d in deployments]

    async def to_out(self, deployment: Deployment, *, with_stats: bool = True) -> DeploymentOut:
        count = last = None
        if with_stats:
            row = (
                await self.repository.session.execute(
                    select(func.count(Run.id), func.max(Run.measured_at)).where(Run.deployment_id == deployment.id)
                )
            ).one()
            count, last = int(row[0]), row[1]
        return self._out(deployment, count, last)

    @staticmethod
    def _out(deployment: Deployment, count: int | None, last: Any) -> DeploymentOut:
        return DeploymentOut(
            name=deployment.name,
            team=deployment.team,
            runtime=deployment.runtime,
            description=deployment.description,
            slo=deployment.slo or {},
            created_at=deployment.created_at,
            updated_at=deployment.updated_at,
            run_count=count,
            last_measured_at=last,
        )
