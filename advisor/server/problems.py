"""Every error becomes RFC 9457 problem details (``application/problem+json``) naming the failing
field. Built on Litestar's ProblemDetailsPlugin; this module only maps our exception types onto it."""

from __future__ import annotations

import re
from typing import Any

from advanced_alchemy.exceptions import DuplicateKeyError, IntegrityError, NotFoundError
from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.plugins.problem_details import (
    ProblemDetailsConfig,
    ProblemDetailsException,
    ProblemDetailsPlugin,
)
from litestar.status_codes import HTTP_500_INTERNAL_SERVER_ERROR

from advisor.errors import AdvisorError

__all__ = ["CLIENT_CLOSED", "RETRY_AFTER_S", "database_fault", "internal_error_handler", "problem_details_plugin"]

_TYPE_BASE = "https://llm-advisor.dev/problems/"


def _from_advisor_error(exc: AdvisorError) -> ProblemDetailsException:
    problem = exc.to_problem()
    return ProblemDetailsException(
        detail=problem.pop("detail"),
        headers={"Retry-After": str(RETRY_AFTER_S)} if exc.status == 503 else None,
        status_code=problem.pop("status"),
        type_=problem.pop("type"),
        title=problem.pop("title"),
        extra=problem,
    )


_LITESTAR_FIELD = re.compile(r"^(?:Invalid|Missing|Expected).*?`\$\.(?P<path>[^`]+)`")


def _from_validation(exc: ValidationException) -> ProblemDetailsException:
    errors: list[dict[str, Any]] = []
    extra = exc.extra if isinstance(exc.extra, list) else []
    for item in extra:
        if isinstance(item, dict):
            key = item.get("key") or item.get("field")
            message = item.get("message", "")
            source = item.get("source")
            field = f"{source}.{key}" if source in ("query", "header", "path") and key else key
            errors.append({"field": field or "body", "message": message})
    detail = exc.detail or "Validation failed"
    if not errors:
        match = _LITESTAR_FIELD.search(detail)
        errors.append({"field": match["path"] if match else "body", "message": detail})
    return ProblemDetailsException(
        detail=f"{errors[0]['field']}: {errors[0]['message']}" if errors[0]["message"] else detail,
        status_code=exc.status_code,
        type_=_TYPE_BASE + "validation-error",
        title="Validation failed",
        extra={"field": errors[0]["field"], "errors": errors},
    )


#: nginx's "client closed request": the client went away before its body was read. Not a server
#: error, so neither the metrics nor the logs count it as one (nobody reads the answer anyway).
CLIENT_CLOSED = 499


def _from_http(exc: HTTPException) -> ProblemDetailsException:
    extra: dict[str, Any] = {}
    if exc.status_code == 500 and exc.detail == "client disconnected prematurely":  # Litestar's wording
        return ProblemDetailsException(
            detail=exc.detail,
            status_code=CLIENT_CLOSED,
            type_=_TYPE_BASE + "client-closed",
            title="Client closed request",
        )
    if exc.status_code == 413:
        extra = {"field": "body", "errors": [{"field": "body", "message": "request body too large"}]}
    elif isinstance(exc.extra, dict):
        extra = dict(exc.extra)
    return ProblemDetailsException(
        detail=exc.detail,
        status_code=exc.status_code,
        headers=exc.headers,
        type_=_TYPE_BASE + str(exc.status_code),
        title=exc.detail,
        extra=extra,
    )


def _from_not_found(exc: NotFoundError) -> ProblemDetailsException:
    return ProblemDetailsException(
        detail=str(exc.detail or "not found"),
        status_code=404,
        type_=_TYPE_BASE + "not-found",
        title="Not found",
    )


def _from_conflict(exc: IntegrityError) -> ProblemDetailsException:
    return ProblemDetailsException(
        detail="the request conflicts with stored data",
        status_code=409,
        type_=_TYPE_BASE + "conflict",
        title="Conflict",
    )


def problem_details_plugin() -> ProblemDetailsPlugin:
    return ProblemDetailsPlugin(
        ProblemDetailsConfig(
            enable_for_all_http_exceptions=True,
            exception_to_problem_detail_map={
                AdvisorError: _from_advisor_error,
                ValidationException: _from_validation,
                HTTPException: _from_http,
                NotFoundError: _from_not_found,
                DuplicateKeyError: _from_conflict,
                IntegrityError: _from_conflict,
            },
        )
    )


#: Seconds a client should wait before retrying after a 503 (a restart, a lock, a failover).
RETRY_AFTER_S = 5


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen and len(seen) < 16:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def database_fault(exc: BaseException) -> str | None:
    """Why the database cannot serve now (unreachable, locked, read-only), or None when ``exc`` is
    no such fault. Looks through the chain: advanced-alchemy and SQLAlchemy wrap the driver's error."""
    import sqlite3

    import sqlalchemy.exc as sa_exc
    from asyncpg import exceptions as pg_exc

    for item in _chain(exc):
        if isinstance(item, sa_exc.OperationalError | sqlite3.OperationalError):
            message = str(item.orig if isinstance(item, sa_exc.DBAPIError) else item).lower()
            if "locked" in message or "busy" in message:
                return "the database is locked by another writer"
            if "readonly" in message or "read-only" in message:
                return "the database is read-only"
            return "the database is unavailable"
        if isinstance(item, pg_exc.ReadOnlySQLTransactionError):
            return "the database is read-only"
        if isinstance(item, pg_exc.LockNotAvailableError):
            return "the database is locked by another writer"
        if isinstance(
            item,
            sa_exc.InterfaceError
            | sa_exc.TimeoutError
            | sa_exc.DisconnectionError
            | pg_exc.PostgresConnectionError
            | pg_exc.CannotConnectNowError
            | pg_exc.InterfaceError
            | ConnectionError
            | TimeoutError,
        ):
            return "the database is unreachable"
        if isinstance(item, OSError) and item.errno is not None:  # e.g. a refused or unresolvable host
            return "the database is unreachable"
    return None


def _problem(status: int, slug: str, title: str, detail: str, **extra: Any) -> Response[dict[str, Any]]:
    headers = {"Retry-After": str(RETRY_AFTER_S)} if status == 503 else None
    return Response(
        {"type": _TYPE_BASE + slug, "title": title, "status": status, "detail": detail, **extra},
        status_code=status,
        media_type="application/problem+json",
        headers=headers,
    )


def internal_error_handler(request: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    """Unexpected errors: a database fault is a 503 with Retry-After, a body nested beyond the
    decoder's recursion limit a 400; anything else is logged with the request id and answered
    without internals."""
    request_id = request.scope.get("state", {}).get("request_id")
    if isinstance(exc, RecursionError):
        return _problem(
            400,
            "malformed-input",
            "Malformed input",
            "body: the document is nested too deeply",
            field="body",
            errors=[{"field": "body", "message": "the document is nested too deeply"}],
        )
    fault = database_fault(exc)
    if fault is not None:
        request.logger.warning("database unavailable", reason=fault, error=type(exc).__name__)
        return _problem(
            503, "service-unavailable", "Service unavailable", f"{fault}; retry later", request_id=request_id
        )
    import sqlalchemy.exc as sa_exc

    if isinstance(exc, sa_exc.DataError):  # a value the database refused that the edge let through
        request.logger.warning("value refused by the database", error=str(exc.orig))
        return _problem(
            422,
            "invalid-input",
            "Invalid input",
            "body: a value is out of the range the database stores",
            field="body",
            errors=[{"field": "body", "message": "a value is out of the range the database stores"}],
        )
    request.logger.exception("unhandled error", exc_info=exc)
    return Response(
        {
            "type": _TYPE_BASE + "internal-error",
            "title": "Internal server error",
            "status": 500,
            "detail": "an unexpected error occurred; see the server log for the request id",
            "request_id": request_id,
        },
        status_code=HTTP_500_INTERNAL_SERVER_ERROR,
        media_type="application/problem+json",
    )
