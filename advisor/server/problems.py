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

__all__ = ["internal_error_handler", "problem_details_plugin"]

_TYPE_BASE = "https://llm-advisor.dev/problems/"


def _from_advisor_error(exc: AdvisorError) -> ProblemDetailsException:
    problem = exc.to_problem()
    return ProblemDetailsException(
        detail=problem.pop("detail"),
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


def _from_http(exc: HTTPException) -> ProblemDetailsException:
    extra: dict[str, Any] = {}
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


def internal_error_handler(request: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    """Unexpected errors: log with the request id, answer a problem without internals."""
    request.logger.exception("unhandled error", exc_info=exc)
    return Response(
        {
            "type": _TYPE_BASE + "internal-error",
            "title": "Internal server error",
            "status": 500,
            "detail": "an unexpected error occurred; see the server log for the request id",
            "request_id": request.scope.get("state", {}).get("request_id"),
        },
        status_code=HTTP_500_INTERNAL_SERVER_ERROR,
        media_type="application/problem+json",
    )
