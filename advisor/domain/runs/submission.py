"""The HTTP edge of ingestion: what a request brings — its body, the context in its query string and
``X-Advisor-*`` headers, its Idempotency-Key — read once into a :class:`SubmissionRequest`.

Everything after that is pure ingest (:mod:`advisor.ingest.submission`: wrapper, formats, context
layers); the query and headers only add context layers (precedence: query, then headers, then a
wrapper's own context).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from advisor.canonical import typed_scalar
from advisor.errors import InvalidInput, MalformedInput
from advisor.ingest.submission import (
    CONTEXT_FIELDS,
    ParsedSubmission,
    SubmissionContext,
    context_layer,
    parse_submission,
)

if TYPE_CHECKING:
    from litestar import Request

__all__ = ["QUERY_PARAMS", "SubmissionRequest", "context_layers", "near_match", "split_bulk", "unknown_names"]

#: Query parameters the submission routes read besides the context fields: the repeatable ``k=v``
#: ones and the route's own ``format``.
_PAIR_PARAMS = ("engine_arg", "label", "slo")
QUERY_PARAMS: tuple[str, ...] = (*CONTEXT_FIELDS, *_PAIR_PARAMS, "format")
#: ``X-Advisor-*`` headers: the context fields (dashed), the ``k=v`` ones and the file name.
HEADER_FIELDS: tuple[str, ...] = (
    *(f.replace("_", "-") for f in CONTEXT_FIELDS),
    "engine-args",
    "labels",
    "slo",
    "file-name",
)
#: Each context field and the ``X-Advisor-*`` header that carries it.
_HEADER_CONTEXT: tuple[tuple[str, str], ...] = tuple((f, "x-advisor-" + f.replace("_", "-")) for f in CONTEXT_FIELDS)
#: Short spellings people type for a field; difflib alone does not reach them (``hw`` is 40 %
#: like ``hardware``).
_ALIASES: dict[str, str] = {
    "hw": "hardware",
    "gpu": "hardware",
    "device": "hardware",
    "quant": "quantization",
    "dtype": "quantization",
    "tp": "tensor_parallel",
    "engine": "runtime",
    "c": "concurrency",
    "rate": "request_rate",
    "qps": "request_rate",
    "rps": "request_rate",
    "input_tokens": "prompt_tokens",
    "isl": "prompt_tokens",
    "osl": "output_tokens",
}


@dataclass(frozen=True, slots=True)
class SubmissionRequest:
    """One submission as the request carried it, before any parsing."""

    body: bytes
    content_type: str | None
    format_id: str
    layers: tuple[SubmissionContext, ...]
    file_name: str | None = None
    idempotency_key: str | None = None
    token_name: str | None = None  # the name of the bearer token the request came with

    @classmethod
    def of(cls, request: Request[Any, Any, Any], body: bytes, format_id: str = "auto") -> SubmissionRequest:
        scope = request.scope
        query = (
            {key: request.query_params.getall(key) for key in request.query_params} if scope.get("query_string") else {}
        )
        # The raw ASGI headers (lower-case names), the first value of a repeated one: what
        # dict(request.headers) gave, without building a multidict per request.
        headers: dict[str, str] = {}
        for raw_name, raw_value in scope.get("headers", ()):
            headers.setdefault(raw_name.decode("latin-1").lower(), raw_value.decode("latin-1"))
        state = scope.get("state")  # request.state wraps this dict (the token guard writes to it)
        return cls(
            body=body,
            content_type=headers.get("content-type"),
            format_id=format_id,
            layers=context_layers(query, headers),
            file_name=headers.get("x-advisor-file-name"),
            idempotency_key=headers.get("idempotency-key"),
            token_name=state.get("token_name") if isinstance(state, dict) else None,
        )

    def parse(self) -> ParsedSubmission:
        return parse_submission(
            self.body,
            content_type=self.content_type,
            format_id=self.format_id,
            layers=self.layers,
            file_name=self.file_name,
        )

    def bulk_items(self, limit: int | None) -> list[SubmissionRequest]:
        """A bulk body's items, each a submission of its own with this request's context."""
        return [
            SubmissionRequest(item, "application/json", "auto", self.layers, token_name=self.token_name)
            for item in split_bulk(self.body, limit)
        ]


def _pairs(values: Sequence[str], field: str, *, typed: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for chunk in values:
        for item in chunk.split(",") if "," in chunk and "=" in chunk.split(",", 1)[1] else [chunk]:
            if "=" not in item:
                raise InvalidInput(f"expected key=value, got {item!r}", field=field)
            key, value = item.split("=", 1)
            key = key.strip().replace("-", "_") if typed else key.strip()
            if not key:
                raise InvalidInput(f"empty key in {item!r}", field=field)
            out[key] = typed_scalar(value) if typed else value.strip()
    return out


def near_match(name: str, known: Sequence[str]) -> str | None:
    """The known name ``name`` most likely meant: an alias, a close spelling (difflib), or a name
    that holds its letters in order (``hw`` → ``hardware``)."""
    sep = "-" if any("-" in k for k in known) else "_"
    key = name.strip().lower().replace("-", "_").replace(" ", "_")
    alias = _ALIASES.get(key)
    if alias is not None and alias.replace("_", sep) in known:
        return alias.replace("_", sep)
    close = difflib.get_close_matches(key.replace("_", sep), known, n=1, cutoff=0.6)
    if close:
        return close[0]
    for candidate in known:
        it = iter(candidate.replace(sep, ""))
        if key[:1] == candidate[:1] and all(ch in it for ch in key.replace("_", "")):
            return candidate
    return None


def unknown_names(query: Mapping[str, Sequence[str]], headers: Mapping[str, str]) -> list[tuple[str, str | None]]:
    """Query parameters and ``X-Advisor-*`` headers the submission routes do not read, each with
    the field it most likely meant: ``[("query.hw", "hardware")]``."""
    out: list[tuple[str, str | None]] = []
    for name in query:
        if name not in QUERY_PARAMS:
            out.append((f"query.{name}", near_match(name, QUERY_PARAMS)))
    for header in headers:
        lowered = header.lower()
        if lowered.startswith("x-advisor-") and lowered.removeprefix("x-advisor-") not in HEADER_FIELDS:
            suffix = lowered.removeprefix("x-advisor-")
            hit = near_match(suffix, HEADER_FIELDS)
            out.append((f"header.{header}", f"X-Advisor-{hit.title()}" if hit else None))
    return out


def _reject_unknown(query: Mapping[str, Sequence[str]], headers: Mapping[str, str]) -> None:
    unknown = unknown_names(query, headers)
    if not unknown:
        return
    field, hint = unknown[0]
    where, _, name = field.partition(".")
    kind = "query parameter" if where == "query" else "header"
    suggestion = f"; did you mean {hint!r}?" if hint else ""
    known = ", ".join(QUERY_PARAMS if where == "query" else (f"X-Advisor-{h.title()}" for h in HEADER_FIELDS))
    raise InvalidInput(
        f"unknown {kind} {name!r}{suggestion} (known: {known})",
        field=field,
        unknown=[f for f, _ in unknown],
        suggestions={f: h for f, h in unknown if h},
    )


def context_layers(
    query: Mapping[str, Sequence[str]], headers: Mapping[str, str]
) -> tuple[SubmissionContext, SubmissionContext]:
    """The context of ``X-Advisor-*`` headers and of the query string, in that (precedence) order.

    An unknown query parameter or ``X-Advisor-*`` header is a 422 that names it and the field it
    most likely meant (``hw`` → ``hardware``): a silently ignored ``?concurency=12`` would leave the
    analysis without the context the caller thinks they gave.
    """
    _reject_unknown(query, headers)
    from_query: dict[str, Any] = {}
    if query:
        for name in CONTEXT_FIELDS:
            values = query.get(name)
            if values:
                from_query[name] = values[-1]
    if query.get("engine_arg"):
        from_query["engine_args"] = _pairs(query["engine_arg"], "query.engine_arg", typed=True)
    if query.get("label"):
        from_query["labels"] = _pairs(query["label"], "query.label", typed=False)
    if query.get("slo"):
        from_query["slo"] = _pairs(query["slo"], "query.slo", typed=True)

    from_headers: dict[str, Any] = {}
    # Only X-Advisor-* headers carry context: most requests have none, and skip the lookups.
    lowered = {key: v for k, v in headers.items() if (key := k.lower()).startswith("x-advisor-")}
    for name, header in _HEADER_CONTEXT if lowered else ():
        value = lowered.get(header)
        if value:
            from_headers[name] = value
    for name, header, typed in (
        ("engine_args", "x-advisor-engine-args", True),
        ("labels", "x-advisor-labels", False),
        ("slo", "x-advisor-slo", True),
    ):
        if lowered.get(header):
            from_headers[name] = _pairs([lowered[header]], f"header.{header}", typed=typed)
    return context_layer(from_headers, "header"), context_layer(from_query, "query")


def split_bulk(body: bytes, limit: int | None) -> list[bytes]:
    """Split a bulk body into one JSON document per item: a JSON array, or NDJSON."""
    stripped = body.strip()
    if not stripped:
        raise MalformedInput("the body is empty", field="body")
    items: list[bytes]
    if stripped[:1] == b"[":
        try:
            docs = json.loads(stripped)
        except ValueError as exc:
            raise MalformedInput(f"invalid JSON array: {exc}", field="body") from exc
        items = [msgspec.json.encode(doc) for doc in docs]
    else:
        # Each line is decoded once, later, by the ingest layer, which names the bad item.
        items = [line for line in stripped.splitlines() if line.strip()]
    if not items:
        raise MalformedInput("no runs in the body", field="body")
    if limit is not None and len(items) > limit:
        raise InvalidInput(f"at most {limit} runs per bulk request, got {len(items)}", field="body")
    return items
