"""Thin HTTP handlers for runs, advice and recommendations."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Annotated, Any

import msgspec
from litestar import Controller, Request, Response, get, patch, post
from litestar.di import NamedDependency, Provide
from litestar.exceptions import HTTPException
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import FromPath, FromQuery, JSONBody, QueryParameter, RawBody
from litestar.status_codes import HTTP_200_OK, HTTP_201_CREATED
from sqlalchemy.ext.asyncio import AsyncSession

from advisor.domain.catalog.services import CatalogService
from advisor.domain.runs.ingestion import IngestionService
from advisor.domain.runs.ingestion import submit as submit_runs
from advisor.domain.runs.openapi import BulkOperation, SubmissionOperation
from advisor.domain.runs.recommendations import RecommendationService
from advisor.domain.runs.schemas import BulkResult, RunPage, RunResult, RunResultDoc, StatusIn
from advisor.domain.runs.services import RawPayloadService, RunFilters, RunService, run_to_out
from advisor.domain.runs.submission import ParsedSubmission, context_from_request, parse_submission, split_bulk
from advisor.errors import InvalidInput, MalformedInput, NotFound

__all__ = ["AdviseController", "RecommendationController", "RunController"]

_RUN_PARAMS_DOC = (
    "Context the file lacks: deployment, hardware, model, quantization, runtime, runtime_version, gpu_count, "
    "tensor_parallel, kv_cache_dtype, max_model_len, measured_at; repeatable engine_arg=k=v, label=k=v and "
    "slo=k=v. The same fields may come as X-Advisor-<Field> headers or in a JSON wrapper "
    '{"context": {...}, "files": [{"name", "content", "role"?}]}.'
)


async def provide_ingestion(db_session: NamedDependency[AsyncSession]) -> IngestionService:
    return IngestionService(db_session)


def _parse(request: Request[Any, Any, Any], body: bytes, format_id: str) -> ParsedSubmission:
    query = {key: request.query_params.getall(key) for key in request.query_params}
    from_query, from_headers = context_from_request(query, dict(request.headers))
    file_name = request.headers.get("x-advisor-file-name")
    return parse_submission(
        body,
        content_type=request.headers.get("content-type"),
        format_id=format_id,
        query_context=from_query,
        header_context=from_headers,
        file_name=file_name,
    )


_BACKGROUND: set[asyncio.Task[Any]] = set()


async def _maybe_refit(request: Request[Any, Any, Any]) -> None:
    """Start a background refit after enough new runs (ADVISOR_MODEL_REFIT_AFTER_RUNS; 0: never).
    Never blocks or fails the submission."""
    threshold = request.app.state.settings.model.refit_after_runs
    if threshold <= 0:
        return
    from advisor.domain.models.services import schedule_refit_if_due

    task = await schedule_refit_if_due(request.app.state.sqlalchemy_config.create_session_maker(), threshold)
    if task is not None:
        _BACKGROUND.add(task)  # keep a reference until it finishes (asyncio holds tasks weakly)
        task.add_done_callback(_BACKGROUND.discard)


def _answer(results: list[RunResult], *, status_new: int = HTTP_201_CREATED) -> Response[Any]:
    created = any(r.created for r in results)
    status = status_new if created else HTTP_200_OK
    items = [_result_dict(r) for r in results]
    if len(items) == 1:
        return Response(items[0], status_code=status)
    return Response({"runs": items}, status_code=status)


def _result_dict(result: RunResult) -> dict[str, Any]:
    return {
        "run": msgspec.to_builtins(result.run),
        "verdict": result.verdict,
        "recommendations": result.recommendations,
        "expectations": result.expectations,
    }


FormatParam = Annotated[
    str,
    QueryParameter(
        name="format",
        description="Input format id, or auto to sniff it (see GET /api/v1/formats).",
        required=False,
    ),
]


class RunController(Controller):
    path = "/runs"
    tags = ("runs",)
    dependencies = {"ingestion": Provide(provide_ingestion)}

    @post(
        "/",
        summary="Submit a measured run (any supported benchmark file, or a canonical run)",
        description=_RUN_PARAMS_DOC,
        status_code=HTTP_201_CREATED,
        operation_class=SubmissionOperation,
        responses={
            200: ResponseSpec(RunResultDoc, description="A resubmission: the run stored earlier"),
            HTTP_201_CREATED: ResponseSpec(
                RunResultDoc, description="Stored and analysed; a file with several runs answers {runs: [...]}"
            ),
        },
    )
    async def submit(
        self, request: Request[Any, Any, Any], body: RawBody, format_id: FormatParam = "auto"
    ) -> Response[Any]:
        parsed = _parse(request, bytes(body), format_id)
        results = await submit_runs(
            request.app.state.sqlalchemy_config.get_engine(),
            parsed,
            idempotency_key=request.headers.get("idempotency-key"),
            # Who submitted: as the request says, else the name of the token it came with.
            submitted_by=parsed.context.submitted_by or getattr(request.state, "token_name", None),
        )
        if any(r.created for r in results):
            await _maybe_refit(request)
        return _answer(results)

    @post(
        "/bulk",
        summary="Submit many canonical runs (NDJSON or a JSON array); all or nothing",
        status_code=HTTP_200_OK,
        request_max_body_size=None,  # bounded below by ADVISOR_BULK_MAX_BODY_BYTES instead
        operation_class=BulkOperation,
    )
    async def bulk(self, request: Request[Any, Any, Any], ingestion: NamedDependency[IngestionService]) -> BulkResult:
        settings = request.app.state.settings.server
        body = await _read_limited(request, settings.bulk_max_body_bytes)
        items = split_bulk(body, settings.bulk_max_runs)
        from_query, from_headers = context_from_request(
            {key: request.query_params.getall(key) for key in request.query_params}, dict(request.headers)
        )
        parsed = []
        for index, item in enumerate(items):
            try:
                parsed.append(
                    parse_submission(
                        item,
                        content_type="application/json",
                        format_id="auto",
                        query_context=from_query,
                        header_context=from_headers,
                    )
                )
            except InvalidInput as exc:
                exc.field = f"items[{index}]" + (f".{exc.field}" if exc.field and exc.field != "body" else "")
                raise
            except MalformedInput as exc:
                exc.field = f"items[{index}]"
                raise
        result = await ingestion.bulk(parsed, raw=body, content_type=request.headers.get("content-type"))
        if result.created:
            await _maybe_refit(request)
        return result

    @get("/", summary="List runs, newest first (cursor pagination, with the filtered total)")
    async def list_runs(
        self,
        db_session: NamedDependency[AsyncSession],
        deployment: FromQuery[str | None] = None,
        runtime: FromQuery[str | None] = None,
        hardware: FromQuery[str | None] = None,
        model: FromQuery[str | None] = None,
        quantization: FromQuery[str | None] = None,
        verdict: FromQuery[str | None] = None,
        since: FromQuery[datetime | None] = None,
        until: FromQuery[datetime | None] = None,
        limit: Annotated[int, QueryParameter(ge=1, le=500)] = 50,
        cursor: FromQuery[str | None] = None,
    ) -> RunPage:
        if hardware or model or quantization:
            # Filters accept the same names as submissions: aliases resolve to catalog ids.
            catalog = await CatalogService(db_session).current()
            if hardware:
                hardware = catalog.resolve_hardware(hardware, field_prefix="query.hardware").id
            if model:
                model = catalog.resolve_model(model, field_prefix="query.model")[0].id
            if quantization:
                quantization = catalog.resolve_quantization(quantization, field_prefix="query.quantization").id
        filters = RunFilters(deployment, runtime, hardware, model, quantization, since, until, verdict)
        service = RunService(session=db_session)
        rows, total, next_cursor = await service.page(filters, limit=limit, cursor=cursor)
        return RunPage(items=[run_to_out(r) for r in rows], total=total, limit=limit, next_cursor=next_cursor)

    @get("/{run_id:int}", summary="One run")
    async def get_run(self, db_session: NamedDependency[AsyncSession], run_id: FromPath[int]) -> Any:
        return run_to_out(await RunService(session=db_session).get_run(run_id))

    @get("/{run_id:int}/raw", summary="The original bytes the run was parsed from")
    async def get_raw(self, db_session: NamedDependency[AsyncSession], run_id: FromPath[int]) -> Response[bytes]:
        run = await RunService(session=db_session).get_run(run_id)
        if run.raw_payload_id is None:
            raise NotFound("this run has no stored raw payload", field="id")
        raws = RawPayloadService(session=db_session)
        payload = await raws.get(run.raw_payload_id)
        data = raws.decompress(payload)
        media_type = payload.content_type or "application/octet-stream"
        if payload.format == "bulk":
            data = split_bulk(data, None)[run.source_index]
            media_type = "application/json"
        headers = {}
        if payload.file_name:
            safe = payload.file_name.replace('"', "").replace("\r", "").replace("\n", "")
            headers["Content-Disposition"] = f'attachment; filename="{safe}"'
        return Response(data, media_type=media_type, headers=headers)

    @get("/{run_id:int}/recommendations", summary="The run's ranked recommendations")
    async def get_recommendations(
        self, db_session: NamedDependency[AsyncSession], run_id: FromPath[int]
    ) -> list[dict[str, Any]]:
        return await RecommendationService(db_session).for_run(run_id)


class AdviseController(Controller):
    path = "/advise"
    tags = ("runs",)
    dependencies = {"ingestion": Provide(provide_ingestion)}

    @post(
        "/",
        summary="Analyse a run without storing anything",
        description=_RUN_PARAMS_DOC,
        status_code=200,
        opt={"role": "read"},  # stores nothing
        operation_class=SubmissionOperation,
        responses={200: ResponseSpec(RunResultDoc, description="The analysis; a sweep answers {runs: [...]}")},
    )
    async def advise(
        self,
        request: Request[Any, Any, Any],
        ingestion: NamedDependency[IngestionService],
        body: RawBody,
        format_id: FormatParam = "auto",
    ) -> Response[Any]:
        results = await ingestion.advise(_parse(request, bytes(body), format_id))
        return _answer(results, status_new=HTTP_200_OK)


class RecommendationController(Controller):
    path = "/recommendations"
    tags = ("recommendations",)

    @patch("/{rec_id:int}", summary="Mark a recommendation applied or dismissed (with a note)")
    async def set_status(
        self, db_session: NamedDependency[AsyncSession], rec_id: FromPath[int], data: JSONBody[StatusIn]
    ) -> dict[str, Any]:
        return await RecommendationService(db_session).set_status(rec_id, data.status, data.note)


async def _read_limited(request: Request[Any, Any, Any], limit: int) -> bytes:
    """The body, read in chunks up to ``limit`` bytes. Litestar's limit is one value for the whole app;
    bulk requests need a larger one than single submissions, so this route enforces its own."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise HTTPException(status_code=413, detail=f"bulk body over {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)
