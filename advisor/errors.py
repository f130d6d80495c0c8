"""Errors that carry their HTTP meaning.

Every layer raises these; the server maps them to RFC 9457 problem details
(``application/problem+json``) and the CLI to exit codes. Each names the failing ``field`` (a dotted
path into the submitted document, or ``body``/``format`` when the whole input is at fault).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "AdvisorError",
    "Conflict",
    "IngestError",
    "InvalidInput",
    "MalformedInput",
    "NotFound",
    "Overloaded",
    "UnknownName",
    "UnsupportedFormat",
    "UnsupportedMediaType",
    "invalid_from_msgspec",
]


class AdvisorError(Exception):
    """Base class. ``status`` is the HTTP status, ``title`` the short problem type."""

    status: int = 400
    title: str = "Bad request"
    type_slug: str = "bad-request"

    def __init__(self, detail: str, *, field: str | None = None, **extra: Any) -> None:
        super().__init__(detail)
        self.detail = detail
        self.field = field
        self.extra = extra

    def __str__(self) -> str:
        return f"{self.field}: {self.detail}" if self.field else self.detail

    def to_problem(self) -> dict[str, Any]:
        problem: dict[str, Any] = {
            "type": f"https://llm-advisor.dev/problems/{self.type_slug}",
            "title": self.title,
            "status": self.status,
            "detail": str(self),
        }
        if self.field:
            problem["field"] = self.field
            problem["errors"] = [{"field": self.field, "message": self.detail}]
        problem.update(self.extra)
        return problem


class InvalidInput(AdvisorError):
    """Well-formed but semantically invalid input (a negative latency, p50 > p99, ...)."""

    status = 422
    title = "Invalid input"
    type_slug = "invalid-input"


class IngestError(InvalidInput):
    """A parser could not turn a file into a canonical run. The only error parsers raise."""

    type_slug = "ingest-error"


class MalformedInput(AdvisorError):
    """The body cannot be read at all: empty, truncated, not JSON, binary garbage."""

    status = 400
    title = "Malformed input"
    type_slug = "malformed-input"


class UnsupportedFormat(IngestError):
    """No parser recognises the file."""

    title = "Unsupported format"
    type_slug = "unsupported-format"


class UnknownName(InvalidInput):
    """A hardware, model or quantization name that no catalog entry or alias matches."""

    title = "Unknown name"
    type_slug = "unknown-name"

    def __init__(self, kind: str, name: str, matches: list[str], *, field: str | None = None) -> None:
        hint = f"; did you mean {', '.join(repr(m) for m in matches)}?" if matches else ""
        super().__init__(
            f"unknown {kind} {name!r}{hint} (or pass an inline spec object)",
            field=field or kind,
            matches=matches,
        )
        self.kind = kind
        self.name = name
        self.matches = matches


class Conflict(InvalidInput):
    """The file and the given context disagree (the file says one model, the query another)."""

    title = "Conflicting input"
    type_slug = "conflict"


class NotFound(AdvisorError):
    status = 404
    title = "Not found"
    type_slug = "not-found"


class UnsupportedMediaType(AdvisorError):
    """A body type the API never reads (XML, HTML forms, multipart): refused before it is sniffed."""

    status = 415
    title = "Unsupported media type"
    type_slug = "unsupported-media-type"


class Overloaded(AdvisorError):
    """The server sheds this request at once (its write queue is full) rather than queue it for
    seconds; the client retries after ``Retry-After``."""

    status = 503
    title = "Service unavailable"
    type_slug = "overloaded"


def invalid_from_msgspec(exc: Exception, *, prefix: str | None = None, default: str | None = None) -> InvalidInput:
    """A msgspec ``ValidationError`` as :class:`InvalidInput` naming the field it reports.

    msgspec says "... - at `$.metrics.ttft_ms.p50`"; the field is that path without the JSONPath
    root, under ``prefix`` when given ("query.gpu_count"), else ``default`` (or ``prefix``) when the
    message names no path.
    """
    message = str(exc)
    marker = "at `$."
    path = message.split(marker, 1)[1].rstrip("`") if marker in message else None
    if path is None:
        return InvalidInput(message, field=default if default is not None else prefix)
    return InvalidInput(message, field=f"{prefix}.{path}" if prefix else path)
