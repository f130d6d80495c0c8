"""Thin HTTP handlers for runs and advice: each reads the request into a
:class:`~advisor.domain.runs.submission.SubmissionRequest` (or its parameters) and calls the
injected :class:`~advisor.domain.runs.pipeline.RunPipeline`."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Annotated, Any

import msgspec
from litestar import Controller, Request, Response, get, post
from litestar.datastructures import State
from litestar.di import NamedDependency, Provide
from litestar.exceptions import ClientException, HTTPException, InternalServerException
from litestar.exceptions.http_exceptions import RequestEntityTooLarge
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import FromPath, FromQuery, QueryParameter, RawBody
from litestar.response.base import ASGIResponse
from litestar.serialization import encode_json
from litestar.status_codes import HTTP_200_OK, HTTP_201_CREATED
from litestar.types import Receive, Scope, Send
from sqlalchemy.ext.asyncio import AsyncSession

from advisor.domain.recommendations import RecommendationOut
from advisor.domain.runs.openapi import BulkOperation, SubmissionOperation
from advisor.domain.runs.pipeline import Outcome, RunPipeline
from advisor.domain.runs.schemas import BulkResult, RunOut, RunPage, RunResult
from advisor.domain.runs.services import RunFilters
from advisor.domain.runs.submission import SubmissionRequest

__all__ = ["AdviseController", "JSONAnswer", "RunController"]

_RUN_PARAMS_DOC = (
    "Context the file lacks: deployment, hardware, model, quantization, runtime, runtime_version, gpu_count, "
    "tensor_parallel, kv_cache_dtype, max_model_len, measured_at; repeatable engine_arg=k=v, label=k=v and "
    "slo=k=v. The same fields may come as X-Advisor-<Field> headers or in a JSON wrapper "
    '{"context": {...}, "files": [{"name", "content", "role"?}]}.'
)


async def provide_pipeline(db_session: NamedDependency[AsyncSession], state: State) -> RunPipeline:
    return RunPipeline(db_session, refit_after_runs=state.settings.model.refit_after_runs)


def submit_pipeline(state: State) -> RunPipeline:
    """For ``POST /runs``: no request session (the group committer writes in its own), so one
    pipeline per app serves every submission (it holds the engine and a setting, nothing of a
    request). Taken from the app's state rather than injected: resolving a dependency cost about
    1 % of the route's CPU (docs/benchmarks.md, "Request path, second pass")."""
    pipeline: RunPipeline | None = getattr(state, "submit_pipeline", None)
    if pipeline is None:
        pipeline = state.submit_pipeline = RunPipeline(
            engine=state.sqlalchemy_config.get_engine(), refit_after_runs=state.settings.model.refit_after_runs
        )
    return pipeline


class JSONAnswer(ASGIResponse):
    """A JSON answer encoded once and sent as two ASGI messages, for ``POST /runs``.

    A :class:`~litestar.Response` is turned into an :class:`ASGIResponse` per request (its headers
    merged, its media type resolved, its encoder looked up, a header multimap filled): 2-3 % of
    the route's CPU (docs/benchmarks.md, "Request path, second pass"). This sends what that path
    sends for a struct without response headers or cookies of its own: the body of Litestar's
    ``encode_json`` (the same msgspec encoder and hooks), ``content-type: application/json`` and
    ``content-length``, in that order (``tests/unit/server/test_json_answer.py`` compares the two).
    Subclassing ``ASGIResponse`` keeps the OpenAPI description of the route as it was.
    """

    def __init__(self, content: Any, status_code: int) -> None:  # not ASGIResponse's: nothing of it is used
        self.status_code = status_code
        self.body = encode_json(content)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = self.body
        await send(
            {
                "type": "http.response.start",
                "status": self.status_code,
                "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))],
            }
        )
        await send({"type": "http.response.body", "body": body, "more_body": False})


def _answer(results: list[RunResult], status: int) -> Response[Any]:
    if len(results) == 1:
        return Response(results[0], status_code=status)
    return Response({"runs": results}, status_code=status)


def _stored(outcomes: list[Outcome]) -> JSONAnswer:
    """201 when this submission stored a run, 200 when every run was stored before."""
    created = any(o.created for o in outcomes)
    results = [
        # The struct is copied only when its flag is wrong (a run found stored): most answers are new runs.
        msgspec.structs.replace(o.result, stored_before=not o.created)
        if o.result.stored_before == o.created
        else o.result
        for o in outcomes
    ]
    return JSONAnswer(
        results[0] if len(results) == 1 else {"runs": results}, HTTP_201_CREATED if created else HTTP_200_OK
    )


async def read_body(request: Request[Any, Any, Any], content_length: int | None) -> bytes:
    """The request body under the route's ``request_max_body_size``, as ``Request.body()`` reads it
    (the same refusals: :class:`RequestEntityTooLarge` for an announced or streamed body over the
    limit, an error for a client gone mid-body), from the raw ASGI messages.

    Written out because ``Request.body()`` builds a ``Headers`` object for the content length and
    drives an async generator per request; the caller has scanned the raw headers already."""
    limit = request.route_handler.resolve_request_max_body_size() or math.inf
    if content_length is not None and content_length > limit:
        raise RequestEntityTooLarge
    receive = request.receive
    chunks: list[bytes] = []
    size = 0
    while True:
        event = await receive()
        if event["type"] == "http.disconnect":
            raise InternalServerException("client disconnected prematurely")
        if event["type"] != "http.request":
            continue
        chunk = event.get("body", b"")
        if chunk:
            size += len(chunk)
            if size > limit:
                raise RequestEntityTooLarge
            chunks.append(chunk)
        if not event.get("more_body", False):
            break
    request.is_connected = False  # as Request.stream leaves it: the body is consumed
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def answer_submission(request: Request[Any, Any, Any]) -> JSONAnswer:
    """``POST /api/v1/runs``, answered from Litestar's ``before_request`` hook of the route.

    Litestar calls the hook after routing, the guards (token roles) and every middleware (request
    id, limits, throttle, timeouts), and sends whatever it returns as the response without running
    the handler's parameter machinery: the kwargs model, the body extractor, the signature model
    and its ``msgspec.convert`` of the query (docs/benchmarks.md, "Request path, session 7"). What
    that machinery gave the handler (the raw body under the route's size limit, ``?format=``) is
    read here from the raw request; the handler's signature still describes the operation for
    OpenAPI, and the handler runs the same function if the hook is ever bypassed.
    """
    scope = request.scope
    # ?format=: the last value, as Litestar's kwargs model gives a non-sequence query parameter.
    format_id = request.query_params.getall("format", ["auto"])[-1] if scope.get("query_string") else "auto"
    return await _submit(request, await read_body(request, _content_length(scope)), format_id)


async def _submit(request: Request[Any, Any, Any], body: bytes, format_id: str) -> JSONAnswer:
    """Store and analyse one submission through the app's pipeline; its answer."""
    pipeline = submit_pipeline(request.app.state)
    return _stored(await pipeline.submit(SubmissionRequest.of(request, body, format_id)))


def _content_length(scope: Scope) -> int | None:
    """The announced ``content-length``, refused as ``Request.content_length`` refuses a bad one."""
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                raise ClientException(f"Invalid content-length: {value.decode('latin-1')!r}") from None
    return None


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
    dependencies = {"pipeline": Provide(provide_pipeline)}

    @post(
        "/",
        summary="Submit a measured run (any supported benchmark file, or a canonical run)",
        description=_RUN_PARAMS_DOC,
        status_code=HTTP_201_CREATED,
        operation_class=SubmissionOperation,
        before_request=answer_submission,  # answers the request; the signature below documents it
        responses={
            200: ResponseSpec(RunResult, description="A resubmission: the run stored earlier"),
            HTTP_201_CREATED: ResponseSpec(
                RunResult, description="Stored and analysed; a file with several runs answers {runs: [...]}"
            ),
        },
    )
    async def submit(
        self, request: Request[Any, Any, Any], body: RawBody, format_id: FormatParam = "auto"
    ) -> JSONAnswer:
        # Answered by ``answer_submission`` (the route's before_request); this runs only without it.
        return await _submit(request, bytes(body), format_id)

    @post(
        "/bulk",
        summary="Submit many canonical runs (NDJSON or a JSON array); all or nothing",
        status_code=HTTP_200_OK,
        request_max_body_size=None,  # bounded below by ADVISOR_BULK_MAX_BODY_BYTES instead
        operation_class=BulkOperation,
    )
    async def bulk(self, request: Request[Any, Any, Any], pipeline: NamedDependency[RunPipeline]) -> BulkResult:
        settings = request.app.state.settings.server
        body = await _read_limited(request, settings.bulk_max_body_bytes)
        return await pipeline.bulk(SubmissionRequest.of(request, body), max_runs=settings.bulk_max_runs)

    @get("/", summary="List runs, newest first (cursor pagination, with the filtered total)")
    async def list_runs(
        self,
        pipeline: NamedDependency[RunPipeline],
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
        filters = RunFilters(deployment, runtime, hardware, model, quantization, since, until, verdict)
        return await pipeline.page(filters, limit=limit, cursor=cursor)

    @get("/{run_id:int}", summary="One run")
    async def get_run(self, pipeline: NamedDependency[RunPipeline], run_id: FromPath[int]) -> RunOut:
        return await pipeline.get(run_id)

    @get("/{run_id:int}/raw", summary="The original bytes the run was parsed from")
    async def get_raw(self, pipeline: NamedDependency[RunPipeline], run_id: FromPath[int]) -> Response[bytes]:
        data, media_type, file_name = await pipeline.raw(run_id)
        headers = {}
        if file_name:
            safe = file_name.replace('"', "").replace("\r", "").replace("\n", "")
            headers["Content-Disposition"] = f'attachment; filename="{safe}"'
        return Response(data, media_type=media_type, headers=headers)

    @get("/{run_id:int}/recommendations", summary="The run's ranked recommendations")
    async def get_recommendations(
        self, pipeline: NamedDependency[RunPipeline], run_id: FromPath[int]
    ) -> list[RecommendationOut]:
        return await pipeline.recommendations(run_id)


class AdviseController(Controller):
    path = "/advise"
    tags = ("runs",)
    dependencies = {"pipeline": Provide(provide_pipeline)}

    @post(
        "/",
        summary="Analyse a run without storing anything",
        description=_RUN_PARAMS_DOC,
        status_code=200,
        opt={"role": "read"},  # stores nothing
        operation_class=SubmissionOperation,
        responses={200: ResponseSpec(RunResult, description="The analysis; a sweep answers {runs: [...]}")},
    )
    async def advise(
        self,
        request: Request[Any, Any, Any],
        pipeline: NamedDependency[RunPipeline],
        body: RawBody,
        format_id: FormatParam = "auto",
    ) -> Response[Any]:
        return _answer(await pipeline.advise(SubmissionRequest.of(request, bytes(body), format_id)), HTTP_200_OK)


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
