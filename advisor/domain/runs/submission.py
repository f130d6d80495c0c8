"""From an HTTP submission to normalised canonical runs (pure: no database access).

A submission is a raw file body in any supported format, a canonical run, or a JSON wrapper
``{"context": {...}, "files": [{"name", "content", "format"?, "role"?}]}`` (or ``{"context", "run"}``).
Context the file lacks comes from query parameters, ``X-Advisor-*`` headers or the wrapper's context
(precedence: query, then headers, then the wrapper). What the file itself says is used; when it
contradicts the given context after both are resolved through the catalog, that is a 422 naming both.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import msgspec

from advisor.canonical import SLO, CanonicalRun, run_to_builtins, typed_scalar, validate_setup
from advisor.errors import Conflict, InvalidInput, MalformedInput, UnknownName
from advisor.ingest import Input, parse

__all__ = [
    "CONTEXT_FIELDS",
    "ParsedSubmission",
    "ResolvedRun",
    "SubmissionContext",
    "content_hash",
    "context_from_request",
    "normalise_run",
    "parse_submission",
    "split_bulk",
]


class SubmissionContext(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, omit_defaults=True):
    """What the caller says about the run(s) beyond the file itself."""

    deployment: str | None = None
    hardware: str | dict[str, Any] | None = None
    model: str | dict[str, Any] | None = None
    quantization: str | dict[str, Any] | None = None
    runtime: str | None = None
    runtime_version: str | None = None
    gpu_count: int | None = None
    tensor_parallel: int | None = None
    kv_cache_dtype: str | None = None
    max_model_len: int | None = None
    engine_args: dict[str, Any] = msgspec.field(default_factory=dict)
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    slo: SLO | None = None
    measured_at: datetime | None = None
    submitted_by: str | None = None


#: Context fields that are plain scalars on query strings and headers (the dict-valued ones have
#: their own repeatable ``k=v`` syntax; submitted_by only comes in a wrapper's context).
CONTEXT_FIELDS: tuple[str, ...] = tuple(
    f for f in SubmissionContext.__struct_fields__ if f not in ("engine_args", "labels", "slo", "submitted_by")
)

Role = Literal["benchmark", "metrics", "metrics_before", "metrics_after"]


class SubmissionFile(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    name: str | None = None
    content: Any = None
    encoding: Literal["utf-8", "base64"] = "utf-8"
    format: str | None = None
    role: Role | None = None


class Wrapper(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    context: SubmissionContext = msgspec.field(default_factory=SubmissionContext)
    files: list[SubmissionFile] | None = None
    run: dict[str, Any] | None = None
    slo: SLO | None = None


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


def context_from_request(
    query: Mapping[str, Sequence[str]], headers: Mapping[str, str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Context from the query string and from ``X-Advisor-*`` headers, as two builtin dicts."""
    from_query: dict[str, Any] = {}
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
    lowered = {k.lower(): v for k, v in headers.items()}
    for name in CONTEXT_FIELDS:
        value = lowered.get("x-advisor-" + name.replace("_", "-"))
        if value:
            from_headers[name] = value
    for name, header, typed in (
        ("engine_args", "x-advisor-engine-args", True),
        ("labels", "x-advisor-labels", False),
        ("slo", "x-advisor-slo", True),
    ):
        if lowered.get(header):
            from_headers[name] = _pairs([lowered[header]], f"header.{header}", typed=typed)
    return from_query, from_headers


def _convert_context(data: dict[str, Any], origin: str) -> SubmissionContext:
    try:
        return msgspec.convert(data, SubmissionContext, strict=False)
    except msgspec.ValidationError as exc:
        message = str(exc)
        path = message.split("at `$.", 1)[1].rstrip("`") if "at `$." in message else None
        raise InvalidInput(message, field=f"{origin}.{path}" if path else origin) from exc


def merge_contexts(*layers: SubmissionContext) -> SubmissionContext:
    """Later layers win field by field; dicts merge key by key."""
    merged: dict[str, Any] = {}
    for layer in layers:
        for name, value in msgspec.structs.asdict(layer).items():
            if name in ("engine_args", "labels"):
                merged[name] = {**merged.get(name, {}), **value}
            elif value is not None:
                merged[name] = value
    return SubmissionContext(**merged)


@dataclass
class ParsedSubmission:
    """Runs parsed from one submission, with the bytes each came from."""

    format_id: str
    runs: list[CanonicalRun]
    raw: bytes
    content_type: str | None
    file_name: str | None
    context: SubmissionContext
    slo: SLO | None = None
    extra_raw: list[tuple[str | None, bytes]] = field(default_factory=list)


def _file_bytes(item: SubmissionFile, index: int) -> bytes:
    field_name = f"files[{index}].content"
    if item.content is None:
        raise InvalidInput("missing", field=field_name)
    if isinstance(item.content, str):
        if item.encoding == "base64":
            try:
                return base64.b64decode(item.content, validate=True)
            except ValueError as exc:
                raise InvalidInput("not valid base64", field=field_name) from exc
        return item.content.encode()
    # An inline JSON document (object or array).
    return msgspec.json.encode(item.content)


def _is_wrapper(doc: Any) -> bool:
    return isinstance(doc, dict) and ("files" in doc or ("context" in doc and "run" in doc))


def parse_submission(
    body: bytes,
    *,
    content_type: str | None,
    format_id: str,
    query_context: dict[str, Any],
    header_context: dict[str, Any],
    file_name: str | None = None,
) -> ParsedSubmission:
    """Decode the body (wrapper, canonical or native file) into runs plus the merged context."""
    if not body.strip():
        raise MalformedInput("the body is empty", field="body")
    inp = Input(body, file_name=file_name)
    doc = inp.json if inp.data.lstrip()[:1] == b"{" else None
    base_context = SubmissionContext()
    slo: SLO | None = None

    if _is_wrapper(doc):
        try:
            wrapper = msgspec.convert(doc, Wrapper, strict=False)
        except msgspec.ValidationError as exc:
            message = str(exc)
            path = message.split("at `$.", 1)[1].rstrip("`") if "at `$." in message else "body"
            raise InvalidInput(message, field=path) from exc
        base_context = wrapper.context
        slo = wrapper.slo or wrapper.context.slo
        context = merge_contexts(
            base_context,
            _convert_context(header_context, "header"),
            _convert_context(query_context, "query"),
        )
        if wrapper.run is not None:
            fmt, runs = parse(Input(msgspec.json.encode(wrapper.run)), "canonical")
            return ParsedSubmission(fmt, runs, body, content_type, file_name, context, slo)
        return _parse_wrapper_files(wrapper.files or [], body, content_type, context, slo, format_id)

    context = merge_contexts(_convert_context(header_context, "header"), _convert_context(query_context, "query"))
    fmt, runs = parse(inp, format_id or "auto")
    if fmt == "canonical":
        slo = next((r.slo for r in runs if r.slo is not None), None)
    return ParsedSubmission(fmt, runs, body, content_type, file_name, context, slo or context.slo)


def _parse_wrapper_files(
    files: list[SubmissionFile],
    body: bytes,
    content_type: str | None,
    context: SubmissionContext,
    slo: SLO | None,
    default_format: str,
) -> ParsedSubmission:
    from advisor.ingest.combine import combine

    if not files:
        raise InvalidInput("a wrapper needs at least one file", field="files")
    benchmarks: list[tuple[str, list[CanonicalRun]]] = []
    telemetry: list[CanonicalRun] = []
    before: bytes | None = None
    after: bytes | None = None
    extra: list[tuple[str | None, bytes]] = []
    for index, item in enumerate(files):
        data = _file_bytes(item, index)
        extra.append((item.name, data))
        if item.role in ("metrics_before", "metrics_after"):
            if item.role == "metrics_before":
                before = data
            else:
                after = data
            continue
        try:
            fmt, runs = parse(Input(data, file_name=item.name), item.format or default_format or "auto")
        except InvalidInput as exc:
            exc.field = f"files[{index}]" + (f".{exc.field}" if exc.field and exc.field != "body" else "")
            raise
        if item.role == "metrics" or (item.role is None and fmt == "prometheus"):
            telemetry.extend(runs)
        else:
            benchmarks.append((fmt, runs))
    if before is not None or after is not None:
        if before is None or after is None:
            raise InvalidInput("give both metrics_before and metrics_after scrapes", field="files")
        telemetry.append(_combine_scrapes(before, after))
    if len(telemetry) > 1:
        raise InvalidInput("give at most one /metrics scrape (or a before/after pair)", field="files")
    if not benchmarks:
        if not telemetry:
            raise InvalidInput("no benchmark file in the wrapper", field="files")
        return ParsedSubmission("prometheus", telemetry, body, content_type, None, context, slo, extra)
    fmt = benchmarks[0][0]
    runs = [run for _, file_runs in benchmarks for run in file_runs]
    if telemetry:
        runs = [combine(run, telemetry[0]) for run in runs]
    return ParsedSubmission(fmt, runs, body, content_type, files[0].name, context, slo, extra)


def _combine_scrapes(before: bytes, after: bytes) -> CanonicalRun:
    """Two /metrics scrapes taken around a benchmark: counter and histogram deltas."""
    from advisor.ingest.prometheus import parse_scrape, scrape_delta, telemetry_to_run

    texts = []
    for role, data in (("metrics_before", before), ("metrics_after", after)):
        try:
            texts.append(data.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise MalformedInput("a /metrics scrape must be UTF-8 text", field=f"files.{role}") from exc
    return telemetry_to_run(scrape_delta(parse_scrape(texts[0]), parse_scrape(texts[1])))


# --------------------------------------------------------------------------------------------------
# Normalisation against the catalog


@dataclass(frozen=True)
class ResolvedRun:
    """A run whose names resolved through the catalog, ready to hash and store."""

    run: CanonicalRun
    hardware_id: str | None
    model_id: str | None
    quantization_id: str | None
    given: dict[str, Any]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return a.strip().lower() == b.strip().lower()
    return bool(a == b)


def normalise_run(run: CanonicalRun, context: SubmissionContext, catalog: Any, *, from_file: bool) -> ResolvedRun:
    """Fill the run from the context, resolve names, and reject contradictions.

    ``from_file``: the run came from a native tool file. Names the file itself carries but the catalog
    does not know (a local model path) are kept as given instead of rejected; names the user typed
    (context, canonical JSON) must resolve.
    """
    setup = run.setup
    given: dict[str, Any] = {}
    if context.deployment is not None:
        if run.deployment is not None and not _same(run.deployment, context.deployment):
            raise Conflict(
                f"the file says deployment {run.deployment!r} but the context says {context.deployment!r}",
                field="deployment",
            )
        run.deployment = context.deployment
    for name in (
        "runtime",
        "runtime_version",
        "gpu_count",
        "tensor_parallel",
        "kv_cache_dtype",
        "max_model_len",
    ):
        ctx_value = getattr(context, name)
        if ctx_value is None:
            continue
        file_value = getattr(setup, name)
        if file_value is not None and not _same(file_value, ctx_value):
            raise Conflict(
                f"the file says {name} {file_value!r} but the context says {ctx_value!r}",
                field=f"setup.{name}",
            )
        setattr(setup, name, ctx_value)
    if context.engine_args:
        setup.engine_args = {**setup.engine_args, **context.engine_args}
    if context.labels:
        run.labels = {**run.labels, **context.labels}
    if context.measured_at is not None and run.measured_at is None:
        run.measured_at = context.measured_at

    hardware_id, hw_given = _resolve_one(catalog, "hardware", setup.hardware, context.hardware, from_file=from_file)
    model_id, model_given, implied_quant = _resolve_model(catalog, setup.model, context.model, from_file=from_file)
    quant_value = context.quantization if context.quantization is not None else setup.quantization
    if context.quantization is not None and setup.quantization is not None:
        _check_same(catalog, "quantization", setup.quantization, context.quantization)
    quantization_id: str | None = None
    if quant_value is not None:
        quantization_id = _resolve_quant(catalog, quant_value, from_file=from_file and context.quantization is None)
        if implied_quant is not None and quantization_id is not None and implied_quant != quantization_id:
            raise Conflict(
                f"the model name implies quantization {implied_quant!r} but the run says {quantization_id!r}",
                field="setup.quantization",
            )
    elif implied_quant is not None:
        quantization_id = implied_quant

    for key, value, resolved in (
        ("hardware", hw_given, hardware_id),
        ("model", model_given, model_id),
        ("quantization", quant_value, quantization_id),
    ):
        if value is not None and isinstance(value, str) and value != resolved:
            given[key] = value
    setup.hardware = hardware_id if hardware_id else hw_given
    setup.model = model_id if model_id else model_given
    setup.quantization = quantization_id if quantization_id else quant_value
    if given:
        run.source.given = {**run.source.given, **given}
    validate_setup(run)  # the parser validated the metrics; the context may have changed the setup
    return ResolvedRun(run, hardware_id, model_id, quantization_id, given)


def _cached(catalog: Any, method: str, value: Any, field: str) -> Any:
    """Resolve a name through ``catalog``, memoised on the catalog object (it is immutable), so a
    bulk request naming one device ten thousand times resolves it once."""
    if not isinstance(value, str):
        return getattr(catalog, method)(value, field_prefix=field)
    cache: dict[tuple[str, str], Any] | None = getattr(catalog, "_advisor_resolution_cache", None)
    if cache is None:
        cache = {}
        catalog._advisor_resolution_cache = cache
    key = (method, value)
    if key not in cache:
        if len(cache) > 10_000:
            cache.clear()
        cache[key] = getattr(catalog, method)(value, field_prefix=field)
    return cache[key]


def _resolve_one(
    catalog: Any, kind: str, file_value: Any, ctx_value: Any, *, from_file: bool
) -> tuple[str | None, Any]:
    field = f"setup.{kind}"
    if ctx_value is not None and file_value is not None:
        _check_same(catalog, kind, file_value, ctx_value)
    value = ctx_value if ctx_value is not None else file_value
    if value is None:
        return None, None
    try:
        spec = _cached(catalog, f"resolve_{kind}", value, field)
    except UnknownName as exc:
        if from_file and ctx_value is None:
            return None, value  # a name only the file carries: keep it, the analysis says what it blocks
        exc.field = field
        raise
    return (None, value) if isinstance(value, dict) else (spec.id, value)


def _resolve_model(
    catalog: Any, file_value: Any, ctx_value: Any, *, from_file: bool
) -> tuple[str | None, Any, str | None]:
    field = "setup.model"
    value = ctx_value if ctx_value is not None else file_value
    if value is None:
        return None, None, None
    if ctx_value is not None and file_value is not None:
        _check_same(catalog, "model", file_value, ctx_value)
    try:
        if isinstance(value, dict):
            catalog.resolve_model(value, field_prefix=field)
            return None, value, None
        spec, quant = _cached(catalog, "resolve_model", value, field)
    except UnknownName as exc:
        if from_file and ctx_value is None:
            return None, value, None
        exc.field = field
        raise
    return spec.id, value, quant.id if quant is not None else None


def _resolve_quant(catalog: Any, value: Any, *, from_file: bool) -> str | None:
    if isinstance(value, dict):
        catalog.resolve_quantization(value, field_prefix="setup.quantization")
        return None
    try:
        return str(_cached(catalog, "resolve_quantization", value, "setup.quantization").id)
    except UnknownName as exc:
        if from_file:
            return None
        exc.field = "setup.quantization"
        raise


def _resolved_id(catalog: Any, kind: str, value: Any) -> str | None:
    if isinstance(value, dict):
        return None
    try:
        result = getattr(catalog, f"resolve_{kind}")(value)
    except UnknownName:
        return None
    spec = result[0] if isinstance(result, tuple) else result
    return str(spec.id)


def _check_same(catalog: Any, kind: str, file_value: Any, ctx_value: Any) -> None:
    """The file and the context name the same thing (after resolution), or a 422 naming both."""
    if _same(file_value, ctx_value):
        return
    a, b = _resolved_id(catalog, kind, file_value), _resolved_id(catalog, kind, ctx_value)
    if a is None or b is None or a == b:
        # An unresolvable name in the file (a local path) cannot contradict: the context wins.
        return
    raise Conflict(
        f"the file says {kind} {file_value!r} ({a}) but the context says {ctx_value!r} ({b})",
        field=f"setup.{kind}",
        file_value=file_value if isinstance(file_value, str) else None,
        context_value=ctx_value if isinstance(ctx_value, str) else None,
    )


_HASHED = ("deployment", "measured_at", "setup", "workload", "metrics", "labels")


def content_hash(run: CanonicalRun) -> str:
    """SHA-256 over the normalised run: the same measurement always hashes the same."""
    doc = run_to_builtins(run)
    payload = {key: doc.get(key) for key in _HASHED}
    return hashlib.sha256(msgspec.json.encode(payload, order="sorted")).hexdigest()


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
