from __future__ import annotations

from advanced_alchemy.extensions.litestar.providers import create_service_provider
from litestar import Controller, get, put
from litestar.di import NamedDependency, Provide
from litestar.params import FromPath, JSONBody

from advisor.domain.deployments.schemas import DeploymentIn, DeploymentOut
from advisor.domain.deployments.services import DeploymentService
from advisor.errors import NotFound


class DeploymentController(Controller):
    path = "/deployments"
    tags = ("deployments",)
    dependencies = {"deployments": Provide(create_service_provider(DeploymentService))}

    @get("/", summary="List deployments")
    async def list_deployments(self, deployments: NamedDependency[DeploymentService]) -> list[DeploymentOut]:
        return await deployments.list_out()

    @get("/{name:str}", summary="A deployment and its SLOs")
    async def get_deployment(
        self, deployments: NamedDependency[DeploymentService], name: FromPath[str]
    ) -> DeploymentOut:
        deployment = await deployments.get_by_name(name)
        if deployment is None:
            raise NotFound(f"no deployment named {name!r}", field="name")
        return await deployments.to_out(deployment)

    @put("/{name:str}", summary="Create or update a deployment (SLOs, team, runtime)")
    async def put_deployment(
        self,
        deployments: NamedDependency[DeploymentService],
        name: FromPath[str],
        data: JSONBody[DeploymentIn],
    ) -> DeploymentOut:
        return await deployments.to_out(await deployments.put(name, data))
