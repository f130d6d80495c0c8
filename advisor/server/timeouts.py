"""Time bounds on a request (issue #18 item 4), beside the per-chunk body-read bound of
:mod:`advisor.server.limits`:

* **the whole request** (:class:`RequestTimeoutMiddleware`): a handler still working after
  ``ADVISOR_REQUEST_TIMEOUT_S`` seconds (a locked or slow database, a stuck dependency) is
  cancelled and answered 503 with ``Retry-After`` (``ADVISOR_BULK_REQUEST_TIMEOUT_S`` for bulk
  loads), or 408 when it was still waiting for its body. A client is never left hanging, and the
  advisor CLI retries a 503 after ``Retry-After``. A submission cancelled this way was not
  acknowledged; if its batch commits after all, sending it again answers the stored run (200).
* **the request head** (:class:`HeaderTimeoutProtocol`, uvicorn's httptools protocol with one
  timer more): a connection must deliver a complete request line and headers within
  ``ADVISOR_HEADER_TIMEOUT_S`` of connecting or of starting its next request, else it is closed.
  uvicorn bounds only the idle time between requests (``--timeout-keep-alive``), so a client that
  connects and sends nothing, or half a header, held its connection for ever (500 such sockets
  stayed open in the issue's probe).
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

import msgspec
from litestar.enums import ScopeType
from litestar.middleware import ASGIMiddleware
from litestar.types import ASGIApp, Message, Receive, ReceiveMessage, Scope, Send

from advisor.errors import AdvisorError, MalformedInput, Overloaded
from advisor.server.limits import BULK_PATH

__all__ = [
    "HTTP_PROTOCOL", "BodyTimedOut", "HeaderTimeoutProtocol", "OneWriteTransport", "RequestTimedOut",
    "RequestTimeoutMiddleware",
]  # fmt: skip


class RequestTimedOut(Overloaded):
    """The request took longer than its bound: 503 with ``Retry-After``."""

    title = "Request timed out"
    type_slug = "request-timeout"


class BodyTimedOut(MalformedInput):
    """The request body was still arriving when the bound passed: 408."""

    status = 408
    title = "Request timeout"
    type_slug = "body-timeout"


class RequestTimeoutMiddleware(ASGIMiddleware):
    """Bounds each HTTP request's time in the app (see the module docstring). ``0`` turns a bound
    off. Installed inside the edge middleware, so its answers carry the request id and headers."""

    scopes = (ScopeType.HTTP,)

    def __init__(self, *, seconds: float, bulk_seconds: float) -> None:
        self.seconds = seconds
        self.bulk_seconds = bulk_seconds

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        bound = self.bulk_seconds if scope.get("path") == BULK_PATH else self.seconds
        if bound <= 0:
            await next_app(scope, receive, send)
            return
        state = {"started": False, "body_done": False}

        async def tracked_receive() -> ReceiveMessage:
            message = await receive()
            if message["type"] != "http.request" or not message.get("more_body", False):
                state["body_done"] = True
            return message

        async def tracked_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                state["started"] = True
            await send(message)

        # A plain timer that cancels this task, as asyncio.timeout() does, at a fraction of its
        # cost (it runs for every request); a cancellation it did not cause is passed on.
        task = asyncio.current_task()
        if task is None:  # pragma: no cover - a request always runs in a task
            raise RuntimeError("a request outside a task")
        cancelling = task.cancelling()
        fired: list[bool] = []
        timer = asyncio.get_running_loop().call_later(bound, _expire, task, fired)
        uncancelled = False
        try:
            await next_app(scope, tracked_receive, tracked_send)
        except asyncio.CancelledError:
            if not fired:
                raise
            uncancelled = True
            if task.uncancel() > cancelling:  # cancelled from elsewhere as well
                raise
            if state["started"]:  # too late for an answer: the connection is dropped
                raise TimeoutError(f"the request did not complete within {bound:g} s") from None
            error: AdvisorError
            if not state["body_done"] and _has_body(scope):
                error = BodyTimedOut(f"the request body did not arrive within {bound:g} s", field="body")
            else:
                error = RequestTimedOut(f"the request did not complete within {bound:g} s; retry later")
            # Answered here, through the edge's send (request id, security headers), not raised.
            await _send_problem(send, error, scope)
        finally:
            timer.cancel()
            if fired and not uncancelled:  # the app swallowed the cancellation, or raised another error
                task.uncancel()


def _expire(task: asyncio.Task[Any], fired: list[bool]) -> None:
    fired.append(True)
    task.cancel()


async def _send_problem(send: Send, error: AdvisorError, scope: Scope) -> None:
    from advisor.server.problems import RETRY_AFTER_S

    problem = error.to_problem()
    request_id = (scope.get("state") or {}).get("request_id")
    if request_id:
        problem["request_id"] = request_id
    body = msgspec.json.encode(problem)
    headers = [(b"content-type", b"application/problem+json"), (b"content-length", str(len(body)).encode())]
    if error.status == 503:
        headers.append((b"retry-after", str(RETRY_AFTER_S).encode()))
    else:
        headers.append((b"connection", b"close"))  # the rest of the body will not be read
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def _has_body(scope: Scope) -> bool:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            return value.strip() not in (b"", b"0")
        if name == b"transfer-encoding":
            return True
    return False


_STATUS_PREFIX = b"HTTP/1.1 "
_END_OF_HEAD = b"\r\n\r\n"
_CONTENT_LENGTH = b"\r\ncontent-length: "


class OneWriteTransport:
    """A connection's transport that sends a response's head (status line and headers) together
    with the first write of its body: one ``send()`` system call per response instead of two.

    uvicorn writes the head when the app sends ``http.response.start`` and the body at
    ``http.response.body``, each a ``transport.write`` that asyncio tries to send at once: two
    system calls, with the GIL held, for every response (8–11 % of a ``POST /runs`` worker's
    samples, docs/benchmarks.md). Only a head that announces a ``Content-Length`` is held back
    (uvicorn writes lower-case names): a body follows it at once (uvicorn writes one even when
    it is empty, for a HEAD request or a 204), whereas a chunked stream's first chunk may come
    much later. Interim ``1xx`` answers (``100 Continue``) go out at once. A held head is sent
    before the transport closes, as it would have been.
    """

    __slots__ = ("_head", "_transport")

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self._head: bytes | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        head = self._head
        if head is not None:
            self._head = None
            self._transport.write(b"".join((head, data)))
            return
        if (
            isinstance(data, bytes)
            and data.startswith(_STATUS_PREFIX)
            and data.endswith(_END_OF_HEAD)
            and data[9:10] != b"1"
            and _CONTENT_LENGTH in data
        ):
            self._head = data
            return
        self._transport.write(data)

    def _flush(self) -> None:
        head, self._head = self._head, None
        if head is not None and not self._transport.is_closing():
            self._transport.write(head)

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def abort(self) -> None:
        self._head = None
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # pragma: no cover - uvicorn without httptools: its own default protocol
    HTTP_PROTOCOL = "auto"
else:
    HTTP_PROTOCOL = "advisor.server.timeouts:HeaderTimeoutProtocol"

    class HeaderTimeoutProtocol(HttpToolsProtocol):
        """uvicorn's httptools protocol, closing a connection whose request head does not arrive
        within ``ADVISOR_HEADER_TIMEOUT_S`` (read in the worker, from its environment), and
        writing each response with a ``Content-Length`` in one ``send()`` (:class:`OneWriteTransport`)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            from advisor.settings import get_settings

            self._head_bound = get_settings().server.header_timeout_s
            self._head_timer: asyncio.TimerHandle | None = None

        def _arm_head_timer(self) -> None:
            if self._head_bound > 0 and self._head_timer is None:
                self._head_timer = self.loop.call_later(self._head_bound, self._head_timed_out)

        def _disarm_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_timed_out(self) -> None:
            self._head_timer = None
            if not self.transport.is_closing():
                self.transport.close()

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            # The request cycles write through this (uvicorn hands them self.transport); flow
            # control keeps the real transport, which super() gave it.
            self.transport = cast("asyncio.Transport", OneWriteTransport(transport))
            self._arm_head_timer()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self._arm_head_timer()

        def on_headers_complete(self) -> None:
            self._disarm_head_timer()
            super().on_headers_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm_head_timer()
            super().connection_lost(exc)
