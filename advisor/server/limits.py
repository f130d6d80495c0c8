"""Input limits at the edge, before any handler or SQL runs: path ids within the 64-bit range both
databases store, query strings and the headers that reach a column free of NUL characters and no
longer than that column. SQLite would store what Postgres refuses; both refuse here alike."""

from __future__ import annotations

import asyncio
from urllib.parse import parse_qsl

from litestar.enums import ScopeType
from litestar.exceptions import HTTPException
from litestar.middleware import ASGIMiddleware
from litestar.types import ASGIApp, Receive, ReceiveMessage, Scope, Send

from advisor.errors import InvalidInput, NotFound, Overloaded, UnsupportedMediaType

__all__ = [
    "BODY_READ_TIMEOUT_S",
    "BULK_PATH",
    "HEADER_LIMITS",
    "MAX_CONCURRENT_BULK",
    "MAX_ID",
    "MAX_QUERY_VALUE",
    "BulkGate",
    "InputLimitsMiddleware",
    "check_request",
    "timed_receive",
]

#: The largest id a BIGINT (Postgres) or INTEGER (SQLite) primary key holds.
MAX_ID = 2**63 - 1
#: The longest query value: names, filters and context values are all far shorter.
MAX_QUERY_VALUE = 2_000
#: Headers whose value is stored, with their column's length. The Idempotency-Key gets ``#<index>``
#: appended per run (a 200-character column), so it is bounded below that.
HEADER_LIMITS: dict[str, int] = {
    "idempotency-key": 180,
    "x-advisor-file-name": 500,
    "x-advisor-submitted-by": 200,
    "x-advisor-deployment": 200,
}
_QUERY_LIMITS = {"submitted_by": 200, "deployment": 200}
#: Bulk requests one worker holds at once. Each may hold its body (ADVISOR_BULK_MAX_BODY_BYTES)
#: and its parsed runs in memory; more are answered 503 with Retry-After at once.
MAX_CONCURRENT_BULK = 2
#: Seconds the server waits for each chunk of a request body before answering 408.
BODY_READ_TIMEOUT_S = 30.0
BULK_PATH = "/api/v1/runs/bulk"


def check_request(scope: Scope) -> None:
    """Raise :class:`NotFound` for an id beyond :data:`MAX_ID`, :class:`InvalidInput` for a query
    value or stored header with NUL characters, invalid UTF-8 or beyond its length."""
    for name, value in (scope.get("path_params") or {}).items():
        if isinstance(value, int) and not isinstance(value, bool) and not -MAX_ID <= value <= MAX_ID:
            raise NotFound(f"no such id: {value} is beyond the 64-bit id range", field=f"path.{name}")
    raw = scope.get("query_string", b"")
    if raw:
        try:
            pairs = parse_qsl(raw.decode("latin-1"), keep_blank_values=True, errors="strict")
        except (UnicodeDecodeError, ValueError) as exc:
            raise InvalidInput("the query string is not valid UTF-8", field="query") from exc
        for key, value in pairs:
            _check_value(value, f"query.{key}", _QUERY_LIMITS.get(key, MAX_QUERY_VALUE))
            _check_value(key, "query", 200)
    for raw_name, raw_value in scope.get("headers", ()):
        header = raw_name.decode("latin-1")
        if header == "content-type" and scope.get("path", "").startswith("/api/"):
            _check_media_type(raw_value.decode("latin-1"))
        limit = HEADER_LIMITS.get(header)
        if limit is not None:
            _check_value(raw_value.decode("latin-1"), f"header.{header}", limit)


def _check_media_type(value: str) -> None:
    """The API reads JSON, NDJSON, text and raw bytes. A body sent as XML, an HTML form or
    multipart is refused rather than sniffed and stored as if it were JSON."""
    media = value.split(";", 1)[0].strip().lower()
    if (
        media.startswith("multipart/")
        or media == "application/x-www-form-urlencoded"
        or media.endswith(("/xml", "+xml"))
    ):
        raise UnsupportedMediaType(
            f"{media} is not read here; send the file as application/json, application/x-ndjson, "
            "text/plain or application/octet-stream",
            field="header.content-type",
        )


def _check_value(value: str, field: str, limit: int) -> None:
    if len(value) > limit:
        raise InvalidInput(f"is at most {limit} characters, got {len(value)}", field=field)
    if "\x00" in value:
        raise InvalidInput("must not contain NUL characters", field=field)


class BulkGate:
    """At most :data:`MAX_CONCURRENT_BULK` bulk requests at once in this worker: ``with gate:``
    around one, which raises :class:`Overloaded` (503 with Retry-After) past the bound."""

    def __init__(self) -> None:
        self.active = 0

    def __enter__(self) -> None:
        if self.active >= MAX_CONCURRENT_BULK:
            raise Overloaded(f"{self.active} bulk requests are being stored; retry later", field="body")
        self.active += 1

    def __exit__(self, *exc: object) -> None:
        self.active -= 1


def timed_receive(client_receive: Receive) -> Receive:
    """``receive`` with a bound on each body chunk.

    A client that sends headers and then trickles (or never sends) its body holds a connection and
    a task: each chunk must arrive within :data:`BODY_READ_TIMEOUT_S`, else 408. Once the body is
    complete, receive() only waits for a disconnect, untimed.

    The bound is a plain timer that cancels the waiting task (as ``asyncio.timeout`` does, at a
    third of its cost: this runs for every request): a cancellation it did not cause is passed on.
    """
    body_done = False

    async def receive() -> ReceiveMessage:
        nonlocal body_done
        if body_done:
            return await client_receive()
        task = asyncio.current_task()
        if task is None:  # pragma: no cover - receive() always runs in a task
            raise RuntimeError("receive() outside a task")
        cancelling = task.cancelling()
        fired: list[bool] = []
        timer = asyncio.get_running_loop().call_later(BODY_READ_TIMEOUT_S, _expire, task, fired)
        try:
            message = await client_receive()
        except asyncio.CancelledError:
            if fired and task.uncancel() <= cancelling:
                raise HTTPException(
                    status_code=408, detail=f"the request body did not arrive within {BODY_READ_TIMEOUT_S:g} s"
                ) from None
            raise
        finally:
            timer.cancel()
        body_done = message["type"] != "http.request" or not message.get("more_body", False)
        return message

    return receive


def _expire(task: asyncio.Task[object], fired: list[bool]) -> None:
    fired.append(True)
    task.cancel()


class InputLimitsMiddleware(ASGIMiddleware):
    """Applies :func:`check_request` to every HTTP request, times its body (:func:`timed_receive`)
    and holds at most :data:`MAX_CONCURRENT_BULK` bulk requests at once in this worker. The app
    serves these limits from :class:`advisor.server.middleware.EdgeMiddleware`; this middleware is
    them alone, for an app of its own."""

    scopes = (ScopeType.HTTP,)

    def __init__(self) -> None:
        self.bulk = BulkGate()

    @property
    def active_bulk(self) -> int:
        return self.bulk.active

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        check_request(scope)  # raised inside the route's exception handling: a problem document
        receive = timed_receive(receive)
        if scope.get("path") != BULK_PATH or scope.get("method") != "POST":
            await next_app(scope, receive, send)
            return
        with self.bulk:
            await next_app(scope, receive, send)
