"""A submission's bytes → parsed runs plus the context the caller gave (pure: no database, no HTTP).

A submission is a raw file body in any supported format, a canonical run, or a JSON wrapper
``{"context": {...}, "files": [{"name", "content", "format"?, "role"?}]}`` (or ``{"context", "run"}``).
Context the file lacks comes in layers — the wrapper's context, then ``X-Advisor-*`` headers, then
query parameters, later layers winning field by field — which the HTTP edge
(:mod:`advisor.domain.runs.submission`) reads from the request.

A wrapper may carry a ``/metrics`` scrape beside the benchmark file (``role: "metrics"``), or two
scrapes taken around the benchmark (``metrics_before`` / ``metrics_after``) whose counter and
histogram deltas are the run's telemetry; either is combined into each benchmark run.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import msgspec

from advisor.canonical import SLO, CanonicalRun
from advisor.errors import InvalidInput, MalformedInput, invalid_from_msgspec
from advisor.ingest.base import Input
from advisor.ingest.formats.canonical import plain_canonical_run
from advisor.ingest.registry import parse
from advisor.ingest.side_files import SideReading, apply_side_files, side_file

__all__ = [
    "CONTEXT_FIELDS",
    "ParsedSubmission",
    "SubmissionContext",
    "context_layer",
    "merge_contexts",
    "parse_submission",
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
    #: The workload, when the file does not say (or says it differently): streams in flight, mean
    #: prompt and output length in tokens, offered requests per second.
    concurrency: float | None = None
    prompt_tokens: float | None = None
    output_tokens: float | None = None
    request_rate: float | None = None
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

Role = Literal["benchmark", "metrics", "metrics_before", "metrics_after", "side"]


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


@dataclass
class ParsedSubmission:
    """Runs parsed from one submission, with the bytes they came from and the merged context."""

    format_id: str
    runs: list[CanonicalRun]
    raw: bytes
    content_type: str | None
    file_name: str | None
    context: SubmissionContext
    slo: SLO | None = None


def context_layer(data: dict[str, Any], origin: str) -> SubmissionContext:
    """One layer of context (``origin`` is ``query`` or ``header``, for the error's field)."""
    if not data:  # the usual case (no query string, no X-Advisor-* header): nothing to convert
        return SubmissionContext()
    try:
        return msgspec.convert(data, SubmissionContext, strict=False)
    except msgspec.ValidationError as exc:
        raise invalid_from_msgspec(exc, prefix=origin) from exc


_NO_CONTEXT = SubmissionContext()


def merge_contexts(*layers: SubmissionContext) -> SubmissionContext:
    """Later layers win field by field; dicts merge key by key."""
    merged: dict[str, Any] = {}
    for layer in layers:
        if layer == _NO_CONTEXT:  # the usual layer (no query string, no X-Advisor-* header) adds nothing
            continue
        for name, value in msgspec.structs.asdict(layer).items():
            if name in ("engine_args", "labels"):
                merged[name] = {**merged.get(name, {}), **value}
            elif value is not None:
                merged[name] = value
    return SubmissionContext(**merged)


def parse_submission(
    body: bytes,
    *,
    content_type: str | None,
    format_id: str,
    layers: Sequence[SubmissionContext] = (),
    file_name: str | None = None,
) -> ParsedSubmission:
    """Decode the body (wrapper, canonical or native file) into runs plus the merged context.

    ``layers`` are the request's context layers, lowest precedence first (headers, then query); a
    wrapper's own context sits below them.
    """
    if not body.strip():
        raise MalformedInput("the body is empty", field="body")
    inp = Input(body, file_name=file_name)
    doc = inp.json if inp.data.lstrip()[:1] == b"{" else None

    if _is_wrapper(doc):
        try:
            wrapper = msgspec.convert(doc, Wrapper, strict=False)
        except msgspec.ValidationError as exc:
            raise invalid_from_msgspec(exc, default="body") from exc
        slo = wrapper.slo or wrapper.context.slo
        context = merge_contexts(wrapper.context, *layers)
        if wrapper.run is not None:
            fmt, runs = parse(Input(msgspec.json.encode(wrapper.run)), "canonical")
            return ParsedSubmission(fmt, runs, body, content_type, file_name, context, slo)
        return _parse_wrapper_files(wrapper.files or [], body, content_type, context, slo, format_id)

    context = merge_contexts(*layers)
    plain = plain_canonical_run(inp) if format_id in ("auto", "canonical", "") else None
    if plain is not None:  # the usual POST /runs body: one canonical run, no detection needed
        fmt, runs = "canonical", [plain]
    else:
        fmt, runs = parse(inp, format_id or "auto")
    slo = next((r.slo for r in runs if r.slo is not None), None) if fmt == "canonical" else None
    return ParsedSubmission(fmt, runs, body, content_type, file_name, context, slo or context.slo)


def _is_wrapper(doc: Any) -> bool:
    return isinstance(doc, dict) and ("files" in doc or ("context" in doc and "run" in doc))


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
    scrapes: dict[str, bytes] = {}
    side_notes: list[str] = []
    readings: list[tuple[str, SideReading]] = []
    for index, item in enumerate(files):
        data = _file_bytes(item, index)
        if item.role in ("metrics_before", "metrics_after"):
            scrapes[item.role] = data
            continue
        note = _side_file_note(Input(data, file_name=item.name), item, index, readings)
        if note is not None:
            side_notes.append(note)
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
    if scrapes:
        if len(scrapes) < 2:
            raise InvalidInput("give both metrics_before and metrics_after scrapes", field="files")
        telemetry.append(_scrape_delta_run(scrapes["metrics_before"], scrapes["metrics_after"]))
    if len(telemetry) > 1:
        raise InvalidInput("give at most one /metrics scrape (or a before/after pair)", field="files")
    if not benchmarks:
        if not telemetry:
            detail = "no benchmark file in the wrapper"
            if side_notes:
                detail += " (only side files: send the benchmark file they belong beside)"
            raise InvalidInput(detail, field="files")
        return ParsedSubmission("prometheus", telemetry, body, content_type, None, context, slo)
    fmt = benchmarks[0][0]
    runs = [run for _, file_runs in benchmarks for run in file_runs]
    if telemetry:
        runs = [combine(run, telemetry[0]) for run in runs]
    for run in runs:
        run.source.notes.extend(side_notes)
    apply_side_files(runs, readings)
    return ParsedSubmission(fmt, runs, body, content_type, files[0].name, context, slo)


def _side_file_note(
    inp: Input, item: SubmissionFile, index: int, readings: list[tuple[str, SideReading]]
) -> str | None:
    """A note for a side file sent beside the benchmark (kept in the stored body; read into
    ``readings`` when it says where the model sits), or None when the file is to be parsed. A file
    given ``role: "side"`` is kept whatever it is."""
    if item.role not in (None, "side"):
        return None
    recognised = side_file(inp)
    if recognised is None and item.role != "side":
        return None
    name = item.name or f"files[{index}]"
    what = recognised.what if recognised is not None else "a side file"
    if recognised is not None and recognised.read is not None:
        try:
            readings.append((name, recognised.read(inp, name)))
        except InvalidInput as exc:
            exc.field = f"files[{index}]" + (f".{exc.field}" if exc.field and exc.field != "body" else "")
            raise
        return f"side file {name} ({what}) kept with the submission and read"
    return f"side file {name} ({what}) kept with the submission, not read"


def _scrape_delta_run(before: bytes, after: bytes) -> CanonicalRun:
    """Two /metrics scrapes taken around a benchmark: counter and histogram deltas."""
    from advisor.ingest.prometheus import parse_scrape, scrape_delta, telemetry_to_run

    texts = []
    for role, data in (("metrics_before", before), ("metrics_after", after)):
        try:
            texts.append(data.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise MalformedInput("a /metrics scrape must be UTF-8 text", field=f"files.{role}") from exc
    return telemetry_to_run(scrape_delta(parse_scrape(texts[0]), parse_scrape(texts[1])))
