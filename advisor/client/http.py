"""AdvisorClient: the advisor REST API over an injected :class:`httpx.Client`.

The client speaks HTTP only (it never imports the server, the database or the domain), so the same
code runs against a deployed advisor, an ``httpx.MockTransport`` in unit tests and Litestar's
``TestClient`` (itself an ``httpx.Client``) in integration tests (STYLE.md rule 10).

Failures become three exception types that the CLI maps to its exit codes: :class:`Unreachable`
(no answer after the retries: 3), :class:`ServerError` (a 5xx: 3) and :class:`Rejected` (a 4xx: 4).
"""

from __future__ import annotations

import contextlib
import email.utils
import os
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import httpx

from advisor import __version__

__all__ = [
    "DEFAULT_URL",
    "RETRY_STATUSES",
    "AdvisorClient",
    "ApiError",
    "Rejected",
    "ServerError",
    "Unreachable",
]

DEFAULT_URL = "http://127.0.0.1:8000"
#: Gateway and availability errors, and throttling (429), are transient. Retrying a POST is safe
#: because ingestion is idempotent: a resubmitted run is recognised by its content hash and answered
#: with 200.
RETRY_STATUSES = frozenset({429, 502, 503, 504})
_API = "/api/v1"

QueryValue = str | int | float | bool | None
Query = Mapping[str, QueryValue | Sequence[QueryValue]]


class ApiError(Exception):
    """The advisor could not do what was asked. ``problem`` is the RFC 9457 body when there was one."""

    def __init__(self, message: str, *, status: int | None = None, problem: Mapping[str, Any] | None = None):
        super().__init__(message)
        self.message = message
        self.status = status
        self.problem: dict[str, Any] = dict(problem or {})

    @property
    def field(self) -> str | None:
        value = self.problem.get("field")
        return str(value) if value is not None else None


class Unreachable(ApiError):
    """No HTTP answer: connection refused, DNS failure, timeout (after the retries)."""


class ServerError(ApiError):
    """The server answered 5xx."""


class Rejected(ApiError):
    """The server answered 4xx: the input (file, context, id) was rejected."""


def _problem_message(response: httpx.Response) -> tuple[str, dict[str, Any]]:
    """A one-line message from a problem+json body, or from whatever text came back. A bare
    status with no detail names the request, since "404 Not Found" alone does not say what."""
    problem: dict[str, Any] = {}
    try:
        body = response.json()
        if isinstance(body, dict):
            problem = body
    except ValueError:
        pass
    detail = problem.get("detail") or problem.get("title") or response.text.strip()[:300] or response.reason_phrase
    title = problem.get("title") or response.reason_phrase
    if detail == title:
        return f"{response.request.method} {response.request.url.path}: {response.status_code} {title}", problem
    return f"{response.status_code} {title}: {detail}", problem


@dataclass
class AdvisorClient:
    """The advisor API. ``http`` carries the base URL, auth and timeouts (see :meth:`connect`).

    ``retries`` extra attempts are made on connection errors and 502/503/504, waiting
    ``backoff × 2**attempt`` seconds (with jitter, and at least a ``Retry-After`` the server sends).
    :meth:`close` closes ``http`` only when the client built it (``owns_http``): an injected client
    belongs to its caller.
    """

    http: httpx.Client
    retries: int = 3
    backoff: float = 0.5
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)
    owns_http: bool = False

    @classmethod
    def connect(
        cls,
        url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        retries: int = 3,
        backoff: float = 0.5,
        transport: httpx.BaseTransport | None = None,
    ) -> AdvisorClient:
        """A client for ``url`` (default ``ADVISOR_URL``, else :data:`DEFAULT_URL`) with a bearer
        ``token`` (default ``ADVISOR_TOKEN``)."""
        url = url or os.environ.get("ADVISOR_URL") or DEFAULT_URL
        token = token or os.environ.get("ADVISOR_TOKEN") or None
        headers = {"User-Agent": f"advisor-cli/{__version__}", "Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        http = httpx.Client(
            base_url=url.rstrip("/"),
            headers=headers,
            # Connecting should be quick; reading may wait for analysis of a large sweep.
            timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
            transport=transport,
        )
        return cls(http, retries=retries, backoff=backoff, owns_http=True)

    def close(self) -> None:
        if self.owns_http:
            self.http.close()

    def __enter__(self) -> AdvisorClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------------------
    # Transport

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Query | None = None,
        json: Any = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        """Send with retries; return a 2xx/3xx response or raise an :class:`ApiError`.

        httpx's own ``HTTPTransport(retries=…)`` only retries failed connects, immediately, and never
        a 503; this loop adds backoff and the gateway statuses.
        """
        url = path if path.startswith(("http://", "https://", "/")) else f"{_API}/{path}"
        query = _query(params)
        last_error: Exception | None = None
        for attempt in range(self.retries + 1):
            try:
                response = self.http.request(method, url, params=query, json=json, content=content, headers=headers)
            except httpx.TransportError as exc:
                last_error = exc
                if attempt < self.retries:
                    self.sleep(self._delay(attempt, None))
                    continue
                raise Unreachable(f"cannot reach the advisor at {self.base_url}: {_describe(exc)}") from exc
            if response.status_code in RETRY_STATUSES and attempt < self.retries:
                self.sleep(self._delay(attempt, response.headers.get("retry-after")))
                continue
            if response.status_code >= 500:
                message, problem = _problem_message(response)
                raise ServerError(message, status=response.status_code, problem=problem)
            if response.status_code >= 400:
                message, problem = _problem_message(response)
                raise Rejected(message, status=response.status_code, problem=problem)
            return response
        raise Unreachable(f"cannot reach the advisor at {self.base_url}: {last_error}")  # pragma: no cover

    @property
    def base_url(self) -> str:
        return str(self.http.base_url).rstrip("/") or "(no base URL)"

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        delay = self.backoff * (2.0**attempt) * (1 + random.random() / 4)  # jitter spreads CI retries
        if retry_after:
            # Seconds, or an HTTP date (RFC 9110 §10.2.3); the wait is capped at a minute.
            wait: float | None = None
            with contextlib.suppress(ValueError):
                wait = float(retry_after)
            if wait is None:
                with contextlib.suppress(TypeError, ValueError, IndexError):
                    when = email.utils.parsedate_to_datetime(retry_after)
                    wait = (when - datetime.now(UTC)).total_seconds()
            if wait is not None:
                delay = max(delay, min(wait, 60.0))
        return delay

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.request(method, path, **kwargs)
        try:
            return response.json()
        except ValueError as exc:
            raise ServerError(
                f"{response.status_code}: the advisor answered something that is not JSON",
                status=response.status_code,
            ) from exc

    # ------------------------------------------------------------------------------------------
    # Runs and advice

    def submit(
        self,
        body: bytes,
        *,
        context: Mapping[str, Any] | None = None,
        format_id: str | None = None,
        file_name: str | None = None,
        content_type: str | None = None,
        store: bool = True,
    ) -> dict[str, Any]:
        """POST a file (raw bytes, any supported format) to ``/runs`` (or ``/advise`` when
        ``store`` is false). ``context`` holds scalar context fields plus ``engine_args``,
        ``labels`` and ``slo`` dicts; they travel as query parameters."""
        headers: dict[str, str] = {"Content-Type": content_type or "application/octet-stream"}
        if file_name:
            headers["X-Advisor-File-Name"] = file_name
        params = context_params(context or {})
        if format_id:
            params["format"] = format_id
        return dict(self._json("POST", "runs" if store else "advise", content=body, params=params, headers=headers))

    def submit_wrapper(self, wrapper: Mapping[str, Any], *, store: bool = True) -> dict[str, Any]:
        """POST a JSON wrapper ``{"context", "files": [...]}`` or ``{"context", "run"}``."""
        return dict(self._json("POST", "runs" if store else "advise", json=dict(wrapper)))

    def submit_run(self, run: Mapping[str, Any], *, store: bool = True) -> dict[str, Any]:
        """POST a canonical run document."""
        return dict(self._json("POST", "runs" if store else "advise", json=dict(run)))

    def bulk(self, runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        return dict(self._json("POST", "runs/bulk", json=list(runs)))

    def runs(self, *, limit: int = 50, cursor: str | None = None, **filters: QueryValue) -> dict[str, Any]:
        """One page of ``GET /runs``: ``{items, total, limit, next_cursor}``."""
        params: dict[str, QueryValue] = {"limit": limit, "cursor": cursor, **filters}
        return dict(self._json("GET", "runs", params=params))

    def iter_runs(self, *, page_size: int = 200, **filters: QueryValue) -> Iterator[dict[str, Any]]:
        """Every run matching the filters, following the cursor."""
        cursor: str | None = None
        while True:
            page = self.runs(limit=page_size, cursor=cursor, **filters)
            yield from page.get("items", [])
            cursor = page.get("next_cursor")
            if not cursor:
                return

    def run(self, run_id: int) -> dict[str, Any]:
        return dict(self._json("GET", f"runs/{int(run_id)}"))

    def raw(self, run_id: int) -> bytes:
        return self.request("GET", f"runs/{int(run_id)}/raw").content

    def recommendations(self, run_id: int) -> list[dict[str, Any]]:
        return list(self._json("GET", f"runs/{int(run_id)}/recommendations"))

    def set_recommendation_status(self, rec_id: int, status: str, note: str | None = None) -> dict[str, Any]:
        body = {"status": status, **({"note": note} if note is not None else {})}
        return dict(self._json("PATCH", f"recommendations/{int(rec_id)}", json=body))

    # ------------------------------------------------------------------------------------------
    # Predictions, catalog, deployments, rules, models

    def predict(self, setup: Mapping[str, Any], workload: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return dict(self._json("POST", "predict", json={"setup": dict(setup), "workload": dict(workload or {})}))

    def rank_hardware(self, model: str, **params: QueryValue) -> list[dict[str, Any]]:
        return list(self._json("GET", "predict/hardware", params={"model": model, **params}))

    def catalog(self, kind: str) -> list[dict[str, Any]]:
        return list(self._json("GET", f"catalog/{kind}"))

    def catalog_entry(self, kind: str, entry_id: str) -> dict[str, Any]:
        """One entry by id or alias. Hugging Face repo ids hold a slash, which the server's path
        parameter cannot carry: those are looked up in the listing (id, ``hf_repo`` and aliases)."""
        if "/" not in entry_id:
            return dict(self._json("GET", f"catalog/{kind}/{quote(entry_id, safe='')}"))
        wanted = entry_id.lower()
        for entry in self.catalog(kind):
            names = {str(entry.get(k) or "").lower() for k in ("id", "hf_repo")}
            names |= {str(a).lower() for a in entry.get("aliases") or []}
            if wanted in names:
                return dict(entry)
        raise Rejected(f"no {kind} catalog entry or alias {entry_id!r}", status=404, problem={"field": "entry_id"})

    def add_catalog_entry(self, kind: str, entry: Mapping[str, Any]) -> dict[str, Any]:
        return dict(self._json("POST", f"catalog/{kind}", json=dict(entry)))

    def deployment(self, name: str) -> dict[str, Any]:
        return dict(self._json("GET", f"deployments/{quote(name, safe='')}"))

    def put_deployment(self, name: str, body: Mapping[str, Any]) -> dict[str, Any]:
        return dict(self._json("PUT", f"deployments/{quote(name, safe='')}", json=dict(body)))

    def rules(self) -> list[dict[str, Any]]:
        body = self._json("GET", "rules")
        # Accept a bare list or an envelope, so the CLI does not break if the catalogue gains metadata.
        if isinstance(body, dict):
            body = body.get("rules") or body.get("items") or []
        return list(body)

    def models(self) -> Any:
        return self._json("GET", "models")

    def fit_model(self, options: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Start a fit; the answer is a job (``{id, status, ...}``) to poll with :meth:`job`."""
        return dict(self._json("POST", "models/fit", json=dict(options or {})))

    def job(self, job_id: int) -> dict[str, Any]:
        return dict(self._json("GET", f"models/jobs/{job_id}"))

    def wait_for_job(self, job: Mapping[str, Any], *, timeout: float = 600.0, interval: float = 1.0) -> dict[str, Any]:
        """Poll a background job until it succeeds or fails (or ``timeout`` seconds pass)."""
        current = dict(job)
        deadline = time.monotonic() + timeout
        while current.get("status") in ("queued", "running") and time.monotonic() < deadline:
            self.sleep(interval)
            current = self.job(int(current["id"]))
        return current

    def weekly_report(self, week: str | None = None, *, format: str = "json", refresh: bool = False) -> bytes:
        """``GET /reports/weekly`` as the server rendered it (JSON, HTML or Markdown bytes)."""
        params: dict[str, QueryValue] = {"format": format, **({"week": week} if week else {})}
        if refresh:
            params["refresh"] = "true"
        return self.request("GET", "reports/weekly", params=params).content

    def health(self) -> dict[str, Any]:
        response = self.http.get("/health")
        return dict(response.json())


def context_params(context: Mapping[str, Any]) -> dict[str, Any]:
    """Submission context as the query parameters POST /runs reads (repeatable ``k=v`` pairs)."""
    params: dict[str, Any] = {}
    for key, value in context.items():
        if value is None:
            continue
        if key in ("engine_args", "labels", "slo"):
            name = {"engine_args": "engine_arg", "labels": "label", "slo": "slo"}[key]
            pairs = [f"{k}={_text(v)}" for k, v in dict(value).items()]
            if pairs:
                params[name] = pairs
        else:
            params[key] = _text(value)
    return params


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _query(params: Query | None) -> list[tuple[str, QueryValue]] | None:
    if not params:
        return None
    out: list[tuple[str, QueryValue]] = []
    for key, value in params.items():
        values = value if isinstance(value, list | tuple) else [value]
        out.extend((key, _text(v)) for v in values if v is not None)
    return out


def _describe(exc: httpx.TransportError) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
