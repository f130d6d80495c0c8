from __future__ import annotations

from typing import Annotated

from litestar import Controller, get, post
from litestar.di import NamedDependency
from litestar.params import FromQuery, JSONBody, QueryParameter
from sqlalchemy.ext.asyncio import AsyncSession

from advisor.canonical import RUNTIMES
from advisor.domain.catalog.services import CatalogService
from advisor.domain.models.provider import expectations_fn_for
from advisor.domain.predictions.schemas import HardwareRanking, PredictIn, PredictOut
from advisor.domain.predictions.services import predict, rank_hardware
from advisor.errors import InvalidInput


class PredictController(Controller):
    path = "/predict"
    tags = ("predictions",)

    @post(
        "/",
        summary="What-if: ceilings and expected performance of a setup and workload",
        status_code=200,
        opt={"role": "read"},  # stores nothing
    )
    async def predict(self, db_session: NamedDependency[AsyncSession], data: JSONBody[PredictIn]) -> PredictOut:
        if data.setup.runtime is not None and data.setup.runtime not in RUNTIMES:
            raise InvalidInput(f"unknown runtime {data.setup.runtime!r}", field="setup.runtime")
        catalog = await CatalogService(session=db_session).current()
        return predict(catalog, data.setup, data.workload, await expectations_fn_for(db_session))

    @get("/hardware", summary="Which GPU should I rent? Every catalog device ranked for a model")
    async def hardware(
        self,
        db_session: NamedDependency[AsyncSession],
        model: Annotated[str, QueryParameter(description="Catalog id, alias, HF repo id or Ollama tag")],
        quantization: FromQuery[str | None] = None,
        runtime: FromQuery[str | None] = None,
        prompt_tokens: Annotated[int, QueryParameter(ge=1, le=10_000_000)] = 512,
        output_tokens: Annotated[int, QueryParameter(ge=1, le=1_000_000)] = 128,
        concurrency: Annotated[int, QueryParameter(ge=1, le=100_000)] = 1,
    ) -> list[HardwareRanking]:
        catalog = await CatalogService(session=db_session).current()
        return rank_hardware(
            catalog,
            model=model,
            quantization=quantization,
            prompt_tokens=prompt_tokens,
            output_tokens=output_tokens,
            concurrency=concurrency,
            runtime=runtime,
            expectations_fn=await expectations_fn_for(db_session),
        )
