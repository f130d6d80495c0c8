"""The edge of every HTTP request, in one pure-ASGI layer (:class:`EdgeMiddleware`).

What it does, in this order, is what four middlewares did one inside the other (request id,
security headers, input limits, Prometheus), without four closures around ``send``, four scope
checks and the header parsing of each:

1. **request id**: the client's X-Request-ID (when it is safe to echo), or a new one, bound into
   structlog's context for every log line and echoed in the response header;
2. **security headers**: CSP, nosniff, frame-ancestors and the referrer policy on every response
   that does not set its own (:mod:`advisor.domain.web.security` has the policies);
3. **input limits** (:mod:`advisor.server.limits`): ids, query values and stored headers checked
   before any handler or SQL runs, a timed body read, at most two bulk requests at once;
4. **request metrics**: ``advisor_requests_total``, ``advisor_request_duration_seconds``,
   ``advisor_requests_in_progress`` and ``advisor_requests_error_total``, the very metrics of
   Litestar's Prometheus middleware (same objects, names, labels and buckets), labelled by route
   template, with the label children looked up once per route and status.

A refusal of the input limits is raised before the response wrappers are installed, as it was
when the limits ran inside the request-id and header middlewares: the app's exception handler
answers it. With the rate limiter on, :func:`edge_middleware` splits the layer around it so that
the limiter still runs between the headers and the limits.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any, cast

import structlog
from litestar.enums import ScopeType
from litestar.middleware import ASGIMiddleware
from litestar.plugins.prometheus import PrometheusConfig, PrometheusMiddleware
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from advisor.server.limits import BULK_PATH, BulkGate, check_request, timed_receive

__all__ = ["EdgeMiddleware", "RequestMetrics", "edge_middleware"]

_SAFE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_REQUEST_ID = b"x-request-id"


def _encoded(headers: dict[str, str]) -> tuple[tuple[bytes, bytes], ...]:
    return tuple((k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items())


def _security_headers(csp: str) -> tuple[tuple[bytes, bytes], ...]:
    return _encoded(
        {
            "Content-Security-Policy": csp,
            "X-Content-Type-Options": "nosniff",
            "X-Frame-Options": "DENY",
            "Referrer-Policy": "same-origin",
        }
    )


class RequestMetrics:
    """The request metrics of Litestar's Prometheus middleware for ``config``, recorded without it.

    The metric objects are the middleware's own (created through its methods, kept in its class
    registry), so ``/metrics`` reports the same series; what is saved is the per-request work: a
    ``Request`` object, a labels dict and four ``labels()`` lookups under prometheus_client's lock.
    """

    def __init__(self, config: PrometheusConfig) -> None:
        if config.labels or config.exemplars or config.excluded_http_methods or config.exclude_opt_key:
            raise ValueError("RequestMetrics records the default labels only; use Litestar's middleware")
        self.app_name = config.app_name
        self.group_path = config.group_path
        exclude = config.exclude
        pattern = exclude if isinstance(exclude, str) else "|".join(exclude) if exclude else None
        self.exclude = re.compile(pattern) if pattern else None
        source = PrometheusMiddleware(app=_no_app, config=config)
        names: dict[str, str | int | float] = {"method": "", "path": "", "status_code": 200, "app_name": ""}
        self._count = source.request_count(names)
        self._time = source.request_time(names)
        self._in_progress = source.requests_in_progress(names)
        self._errors = source.requests_error_count(names)
        self._children: dict[tuple[Any, ...], Any] = {}

    def excluded(self, scope: Scope) -> bool:
        if self.exclude is None:
            return False
        handler = scope.get("route_handler")
        path = scope["raw_path"].decode() if getattr(handler, "is_mount", False) else scope["path"]
        return bool(self.exclude.search(path))

    def _child(self, metric: Any, values: tuple[Any, ...]) -> Any:
        key = (id(metric), *values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    def labels(self, scope: Scope) -> tuple[str, str]:
        method = scope["method"] if scope["type"] == ScopeType.HTTP else scope["type"]
        path = scope["path_template"] if self.group_path else scope["path"]
        return method, path

    def started(self, method: str, path: str) -> None:
        self._child(self._in_progress, (method, path, 200, self.app_name)).inc()

    def finished(self, method: str, path: str, status: int, duration: float) -> None:
        self._child(self._in_progress, (method, path, 200, self.app_name)).dec()
        values = (method, path, status, self.app_name)
        if status >= 500:
            self._child(self._errors, values).inc()
        self._child(self._count, values).inc()
        self._child(self._time, values).observe(duration)


async def _no_app(scope: Scope, receive: Receive, send: Send) -> None:  # pragma: no cover - never called
    raise RuntimeError("RequestMetrics's template middleware is not an app")


class EdgeMiddleware(ASGIMiddleware):
    """Request id, security headers, input limits and request metrics, each optional (see the
    module's docstring). One instance serves every route: its bulk gate is shared."""

    scopes = (ScopeType.HTTP,)

    def __init__(
        self,
        *,
        request_id: bool = True,
        security_headers: bool = True,
        limits: bool = True,
        metrics: RequestMetrics | None = None,
    ) -> None:
        self.request_id = request_id
        self.security_headers = security_headers
        self.limits = limits
        self.metrics = metrics
        self.bulk = BulkGate()
        from advisor.domain.web.security import CSP, SCHEMA_CSP

        self._page_headers = _security_headers(CSP)
        self._schema_headers = _security_headers(SCHEMA_CSP)

    def __call__(self, app: ASGIApp) -> ASGIApp:
        handle = self.handle

        async def edge(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != ScopeType.HTTP:
                await app(scope, receive, send)
                return
            await handle(scope, receive, send, app)

        return edge

    @property
    def active_bulk(self) -> int:
        return self.bulk.active

    async def handle(self, scope: Scope, receive: Receive, send: Send, next_app: ASGIApp) -> None:
        added: tuple[tuple[bytes, bytes], ...] = ()
        if self.request_id:
            request_id = _request_id(scope)
            added = ((_REQUEST_ID, request_id.encode("latin-1")),)
        extra: tuple[tuple[bytes, bytes], ...] = ()
        if self.security_headers:
            path = scope.get("path", "")
            extra = self._schema_headers if path == "/schema" or path.startswith("/schema/") else self._page_headers
        if self.limits:
            check_request(scope)  # raised inside the route's exception handling: a problem document
            receive = timed_receive(receive)
        metrics = self.metrics if self.metrics is not None and not self.metrics.excluded(scope) else None
        span = [time.perf_counter(), 200, 0.0] if metrics is not None else None  # start, status, duration
        if extra or added or span is not None:
            send = _wrap_send(send, extra, added, span)
        if self.limits and scope.get("method") == "POST" and scope.get("path") == BULK_PATH:
            with self.bulk:  # an Overloaded refusal is raised here, unmetered, as before
                await self._metered(scope, receive, send, next_app, metrics, span)
        else:
            await self._metered(scope, receive, send, next_app, metrics, span)

    @staticmethod
    async def _metered(
        scope: Scope,
        receive: Receive,
        send: Send,
        next_app: ASGIApp,
        metrics: RequestMetrics | None,
        span: list[Any] | None,
    ) -> None:
        if metrics is None or span is None:
            await next_app(scope, receive, send)
            return
        method, route = metrics.labels(scope)
        metrics.started(method, route)
        try:
            await next_app(scope, receive, send)
        finally:
            metrics.finished(method, route, span[1], span[2])


#: New request ids, 32 hex digits of os.urandom as uuid4().hex gave, drawn 256 at a time: one
#: getrandom system call per 256 requests instead of one per request. Random, not a counter: an
#: id must not tell an outsider how many requests the worker served.
_ID_BATCH = 256
_IDS: list[str] = []


def _new_request_id() -> str:
    if not _IDS:
        raw = os.urandom(16 * _ID_BATCH).hex()
        _IDS.extend(raw[i : i + 32] for i in range(0, len(raw), 32))
    return _IDS.pop()


# A forked worker must not hand out the ids its parent drew.
os.register_at_fork(after_in_child=_IDS.clear)


def _request_id(scope: Scope) -> str:
    incoming = None
    for name, value in scope.get("headers", ()):
        if name == _REQUEST_ID:
            incoming = value.decode("latin-1")
            break
    request_id = incoming if incoming and _SAFE_ID.match(incoming) else _new_request_id()
    scope.setdefault("state", {})["request_id"] = request_id  # type: ignore[typeddict-item]
    structlog.contextvars.clear_contextvars()
    structlog.contextvars.bind_contextvars(request_id=request_id)
    return request_id


def _wrap_send(
    send: Send,
    defaults: tuple[tuple[bytes, bytes], ...],
    replace: tuple[tuple[bytes, bytes], ...],
    span: list[Any] | None,
) -> Send:
    """``send`` with ``defaults`` added to the response's headers unless it sets them itself,
    ``replace`` set whatever it sets, and the status and duration noted in ``span``."""
    replaced = {name for name, _ in replace}

    async def edge_send(message: Message) -> None:
        event = cast("dict[str, Any]", message)
        kind = event["type"]
        if kind == "http.response.start":
            if span is not None:
                span[1] = event["status"]
            headers = event.get("headers")
            if not isinstance(headers, list):
                headers = event["headers"] = list(headers or ())
            if defaults:
                present = {name.lower() for name, _ in headers}
                headers.extend(h for h in defaults if h[0] not in present)
            if replaced:
                headers[:] = [h for h in headers if h[0].lower() not in replaced]
                headers.extend(replace)
        elif kind == "http.response.body" and span is not None:
            span[2] = time.perf_counter() - span[0]
        await send(message)

    return edge_send


def edge_middleware(*, throttle: list[Any], metrics: RequestMetrics | None) -> list[Any]:
    """The app's edge middlewares: one :class:`EdgeMiddleware`, or, with the rate limiter, the
    request id and headers outside it and the limits and metrics inside, as they always ran."""
    if not throttle:
        return [EdgeMiddleware(metrics=metrics)]
    return [
        EdgeMiddleware(limits=False),
        *throttle,
        EdgeMiddleware(request_id=False, security_headers=False, metrics=metrics),
    ]
