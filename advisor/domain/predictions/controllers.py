from __future__ import annotations

from typing import Annotated

from litestar import Controller, get, post
from litestar.di import NamedDependency
from litestar.params import FromQuery, JSONBody, QueryParameter

from advisor.domain.predictions.schemas import HardwareRanking, PredictIn, PredictOut
from advisor.domain.predictions.services import PredictionService
from advisor.domain.providers import session_service

__all__ = ["PredictController"]


class PredictController(Controller):
    path = "/predict"
    tags = ("predictions",)
    dependencies = {"predictions": session_service(PredictionService)}

    @post(
        "/",
        summary="What-if: ceilings and expected performance of a setup and workload",
        status_code=200,
        opt={"role": "read"},  # stores nothing
    )
    async def predict(self, predictions: NamedDependency[PredictionService], data: JSONBody[PredictIn]) -> PredictOut:
        return await predictions.predict(data)

    @get("/hardware", summary="Which GPU should I rent? Every catalog device ranked for a model")
    async def hardware(
        self,
        predictions: NamedDependency[PredictionService],
        model: Annotated[str, QueryParameter(description="Catalog id, alias, HF repo id or Ollama tag")],
        quantization: FromQuery[str | None] = None,
        runtime: FromQuery[str | None] = None,
        prompt_tokens: Annotated[int, QueryParameter(ge=1, le=10_000_000)] = 512,
        output_tokens: Annotated[int, QueryParameter(ge=1, le=1_000_000)] = 128,
        concurrency: Annotated[int, QueryParameter(ge=1, le=100_000)] = 1,
        gpu_count: Annotated[int | None, QueryParameter(ge=1, le=64)] = None,
        tensor_parallel: Annotated[int | None, QueryParameter(ge=1, le=64)] = None,
        fits_first: FromQuery[bool] = True,
    ) -> list[HardwareRanking]:
        return await predictions.rank_hardware(
            model=model,
            quantization=quantization,
            prompt_tokens=prompt_tokens,
            output_tokens=output_tokens,
            concurrency=concurrency,
            runtime=runtime,
            gpu_count=gpu_count,
            tensor_parallel=tensor_parallel,
            fits_first=fits_first,
        )
