"""The form's way into the API's submission path, in one place.

A submitted form becomes the same JSON wrapper ``POST /api/v1/runs`` accepts
(``{"context", "files" | "run", "slo"}``) and goes through the same ``RunPipeline.submit``: the form
validates nothing the API would not. When the runs domain moves, :func:`submit_form` is the only
call site to follow.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

import msgspec
import structlog
from sqlalchemy.ext.asyncio import AsyncEngine

from advisor.canonical import SLO
from advisor.domain.runs.pipeline import RunPipeline
from advisor.domain.runs.schemas import RunResult
from advisor.domain.runs.submission import SubmissionRequest
from advisor.errors import AdvisorError

__all__ = [
    "CONTEXT_FIELDS",
    "METRIC_FIELDS",
    "SLO_FIELDS",
    "FormErrors",
    "FormInput",
    "build_wrapper",
    "error_field",
    "slo_from_form",
    "submit_form",
]

#: Form field names are the API's names: context fields as in ``?deployment=…``, metrics and SLOs
#: by their dotted path in the canonical run (``metrics.ttft_ms.p50``, ``slo.ttft_p99_ms``).
CONTEXT_FIELDS = ("deployment", "runtime", "hardware", "model", "quantization", "gpu_count", "tensor_parallel")
_SPEC_FIELDS = ("hardware", "model", "quantization")
_INT_FIELDS = ("gpu_count", "tensor_parallel")
METRIC_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("metrics.ttft_ms.p50", "TTFT p50", "ms"),
    ("metrics.ttft_ms.p99", "TTFT p99", "ms"),
    ("metrics.itl_ms.p50", "ITL p50", "ms"),
    ("metrics.itl_ms.p99", "ITL p99", "ms"),
    ("metrics.decode_tok_s", "Decode, per sequence", "tok/s"),
    ("metrics.prefill_tok_s", "Prefill, per sequence", "tok/s"),
    ("workload.prompt_tokens_mean", "Prompt tokens (mean)", "tokens"),
    ("workload.output_tokens_mean", "Output tokens (mean)", "tokens"),
    ("workload.concurrency", "Concurrency", "streams"),
    ("metrics.queue_waiting_mean", "Queue depth (mean waiting)", "requests"),
    ("metrics.kv_cache_usage_mean", "KV cache usage (mean)", "0..1"),
)
SLO_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("slo.ttft_p50_ms", "TTFT p50 at most", "ms"),
    ("slo.ttft_p99_ms", "TTFT p99 at most", "ms"),
    ("slo.itl_p99_ms", "ITL p99 at most", "ms"),
    ("slo.decode_tok_s_min", "Decode at least", "tok/s"),
)
_log = structlog.get_logger(__name__)
_KNOWN = {*CONTEXT_FIELDS, *(f for f, _, _ in METRIC_FIELDS), *(f for f, _, _ in SLO_FIELDS), "file", "paste"}


class FormErrors(Exception):
    """Field name → message, for ``data-error-for``; ``"form"`` holds what belongs to no field."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(f"{k}: {v}" for k, v in errors.items()))
        self.errors = errors


@dataclass
class FormInput:
    """What the browser sent: the text fields, and an uploaded file if any."""

    fields: dict[str, str] = field(default_factory=dict)
    file_name: str | None = None
    file_bytes: bytes | None = None

    def value(self, name: str) -> str:
        return (self.fields.get(name) or "").strip()


def _number(form: FormInput, name: str, errors: dict[str, str], *, integer: bool = False) -> float | int | None:
    raw = form.value(name)
    if not raw:
        return None
    try:
        return int(raw) if integer else float(raw)
    except ValueError:
        errors[name] = "must be a whole number" if integer else "must be a number"
        return None


def _spec(form: FormInput, name: str, errors: dict[str, str]) -> str | dict[str, Any] | None:
    """A catalog id or alias, or an inline spec typed as a JSON object."""
    raw = form.value(name)
    if not raw.startswith("{"):
        return raw or None
    try:
        spec = json.loads(raw)
    except json.JSONDecodeError as exc:
        errors[name] = f"an inline spec must be a JSON object: {exc.msg} at column {exc.colno}"
        return None
    if not isinstance(spec, dict):
        errors[name] = "an inline spec must be a JSON object"
        return None
    return spec


def _nest(doc: dict[str, Any], path: str, value: Any) -> None:
    *parents, leaf = path.split(".")
    for part in parents:
        doc = doc.setdefault(part, {})
    doc[leaf] = value


def build_wrapper(form: FormInput) -> dict[str, Any]:
    """The API wrapper document for ``form``; raises :class:`FormErrors` for what the browser got
    wrong before the API can even look (a number that isn't one, no data at all)."""
    errors: dict[str, str] = {}
    context: dict[str, Any] = {}
    for name in CONTEXT_FIELDS:
        if name in _SPEC_FIELDS:
            value: Any = _spec(form, name, errors)
        elif name in _INT_FIELDS:
            value = _number(form, name, errors, integer=True)
        else:
            value = form.value(name) or None
        if value is not None:
            context[name] = value
    slo: dict[str, Any] = {}
    for name, _, _ in SLO_FIELDS:
        number = _number(form, name, errors)
        if number is not None:
            slo[name.split(".", 1)[1]] = number
    typed: dict[str, Any] = {}
    for name, _, _ in METRIC_FIELDS:
        number = _number(form, name, errors)
        if number is not None:
            _nest(typed, name, number)

    wrapper: dict[str, Any] = {"context": context}
    if slo:
        wrapper["slo"] = slo
    pasted = form.value("paste")
    if form.file_bytes:
        wrapper["files"] = [
            {
                "name": form.file_name or "upload",
                "content": base64.b64encode(form.file_bytes).decode("ascii"),
                "encoding": "base64",
            }
        ]
    elif pasted:
        wrapper["files"] = [{"name": "pasted", "content": pasted}]
    elif typed:
        wrapper["run"] = typed
    elif not errors:
        errors["file"] = "upload a result file, paste one, or type the metrics"
    if errors:
        raise FormErrors(errors)
    return wrapper


def slo_from_form(fields: dict[str, str]) -> SLO:
    """The SLO editor's objectives (``slo.<objective>`` fields; empty removes one), for
    ``PUT /deployments/{name}``'s validation; raises :class:`FormErrors`."""
    form = FormInput(fields=fields)
    errors: dict[str, str] = {}
    values = {name.split(".", 1)[1]: _number(form, name, errors) for name, _, _ in SLO_FIELDS}
    if errors:
        raise FormErrors(errors)
    return SLO(**values)


def error_field(path: str | None, form: FormInput) -> str:
    """The form field an API error path belongs to (``setup.hardware`` → ``hardware``,
    ``files[0].…`` → ``file`` or ``paste``, ``run.metrics.ttft_ms.p50`` → itself)."""
    if not path or path == "body":
        return "file" if form.file_bytes else ("paste" if form.value("paste") else "form")
    if path.startswith("files"):
        return "file" if form.file_bytes else "paste"
    for prefix in ("context.", "run.setup.", "setup.", "run.", ""):
        if path.startswith(prefix):
            rest = path[len(prefix) :]
            for candidate in (rest, rest.split(".", 1)[0], rest.split("[", 1)[0]):
                if candidate in _KNOWN:
                    return candidate
    return "form"


async def submit_form(
    engine: AsyncEngine, form: FormInput, *, submitted_by: str | None = None, refit_after_runs: int = 0
) -> list[RunResult]:
    """Parse, store and analyse a form submission exactly like ``POST /api/v1/runs``.

    Raises :class:`FormErrors`, with each message on the field it is about, for anything the
    submission path rejects.
    """
    wrapper = build_wrapper(form)
    request = SubmissionRequest(
        body=msgspec.json.encode(wrapper),
        content_type="application/json",
        format_id="auto",
        layers=(),
        token_name=submitted_by,
    )
    pipeline = RunPipeline(engine=engine, refit_after_runs=refit_after_runs)
    try:
        return [outcome.result for outcome in await pipeline.submit(request)]
    except AdvisorError as exc:
        raise FormErrors({error_field(exc.field, form): exc.detail}) from exc
    except Exception as exc:
        # Parsers report bad input as AdvisorError; this is the net under one that does not (or a
        # database failure): the user gets the form back with the reason, never a bare 500 page.
        _log.exception("web.submission_failed", error=type(exc).__name__)
        reason = f"advisor could not process this submission ({type(exc).__name__}); nothing was stored"
        raise FormErrors({error_field(None, form): reason}) from exc
