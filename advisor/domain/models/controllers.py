from __future__ import annotations

from typing import Any

from advanced_alchemy.extensions.litestar import SQLAlchemyAsyncConfig
from advanced_alchemy.extensions.litestar.providers import create_service_provider
from litestar import Controller, Request, Response, get, post
from litestar.background_tasks import BackgroundTask
from litestar.di import NamedDependency, Provide
from litestar.params import FromPath, JSONBody
from litestar.status_codes import HTTP_202_ACCEPTED

from advisor.domain.models.schemas import ActiveModelOut, FitIn, JobOut, ModelVersionOut
from advisor.domain.models.services import FittedModelService, JobService, run_fit_job


class ModelController(Controller):
    """Fitted-model versions.

    Fitting, activation and rollback are admin operations: with ``ADVISOR_AUTH_MODE=token`` the
    app-level guard (advisor/domain/auth/guards.py) reads ``opt={"role": "admin"}`` on those three
    handlers; listing and polling need the read role.
    """

    path = "/models"
    tags = ("models",)
    dependencies = {
        "models": Provide(create_service_provider(FittedModelService)),
        "jobs": Provide(create_service_provider(JobService)),
    }

    @get("/", summary="Fitted-model versions with their cross-validated error, newest first")
    async def list_versions(self, models: NamedDependency[FittedModelService]) -> list[ModelVersionOut]:
        return await models.versions()

    @get("/{version:str}", summary="One version with its full cross-validation metrics")
    async def get_version(self, models: NamedDependency[FittedModelService], version: FromPath[str]) -> ModelVersionOut:
        return await models.get_version(version)

    @post(
        "/fit",
        summary="Fit a new version in the background (admin); poll the returned job",
        status_code=HTTP_202_ACCEPTED,
        opt={"role": "admin"},
    )
    async def fit(
        self, request: Request[Any, Any, Any], jobs: NamedDependency[JobService], data: JSONBody[FitIn]
    ) -> Response[JobOut]:
        job = await jobs.start_fit(data, trigger="api")
        config: SQLAlchemyAsyncConfig = request.app.state.sqlalchemy_config
        return Response(
            JobService.to_out(job),
            status_code=HTTP_202_ACCEPTED,
            headers={"Location": f"/api/v1/models/jobs/{job.id}"},
            background=BackgroundTask(run_fit_job, config.create_session_maker(), job.id),
        )

    @get("/jobs/{job_id:int}", summary="A background job (a fit, an activation)", cache=False)
    async def get_job(self, jobs: NamedDependency[JobService], job_id: FromPath[int]) -> JobOut:
        return JobService.to_out(await jobs.get_job(job_id))

    @post(
        "/{version:str}/activate",
        summary="Serve this version from every worker (admin)",
        status_code=200,
        opt={"role": "admin"},
    )
    async def activate(self, models: NamedDependency[FittedModelService], version: FromPath[str]) -> ActiveModelOut:
        return await models.activate(version)

    @post(
        "/rollback",
        summary="Restore the version active before the last activation (admin)",
        status_code=200,
        opt={"role": "admin"},
    )
    async def rollback(self, models: NamedDependency[FittedModelService]) -> ActiveModelOut:
        return await models.rollback()
