"""Resolution: a parsed run plus the caller's context → a run whose names mean catalog specs.

The context fills what the file lacks; what the file says is kept, and a contradiction after both
are resolved through the catalog is a 422 naming both. Names the user typed (context, canonical
JSON) must resolve; names only a native tool file carries (a local model path) are kept as given,
and the analysis says what they block. The result carries the specs, so nothing downstream resolves
again, and the content hash that makes ingestion idempotent.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass, field
from typing import Any

import msgspec

from advisor.canonical import CanonicalRun, run_to_builtins, validate_setup
from advisor.catalog import Catalog, ResolvedSetup
from advisor.errors import Conflict, InvalidInput, UnknownName
from advisor.ingest.submission import ParsedSubmission, SubmissionContext
from advisor.physics import HardwareSpec, ModelSpec, QuantSpec
from advisor.rules.context import SweepCapacity, sweep_capacity

__all__ = ["ResolvedRun", "content_hash", "resolve_run", "resolve_submission"]


@dataclass(frozen=True, slots=True)
class ResolvedRun:
    """A run whose names resolved through the catalog, ready to hash, analyse and store."""

    run: CanonicalRun
    specs: ResolvedSetup
    hash: str
    # Catalog ids, as stored: None for a name the catalog does not know and for an inline spec
    # object (which resolves to a spec, but not to a catalog entry).
    hardware_id: str | None
    model_id: str | None
    quantization_id: str | None
    index: int = 0  # its position in the submitted file
    #: The knee of the sweep the file holds (several rates or concurrencies); None for one run.
    sweep: SweepCapacity | None = None
    #: ``run_to_builtins(run)`` as hashed: the store's JSON documents reuse it instead of a second
    #: conversion per run. None when the run was not hashed here (a stored run re-analysed).
    doc: dict[str, Any] | None = field(default=None, compare=False, repr=False)


def _catalog_id(spec: HardwareSpec | ModelSpec | QuantSpec | None, value: Any) -> str | None:
    return spec.id if spec is not None and isinstance(value, str) else None


def resolve_submission(parsed: ParsedSubmission, catalog: Catalog) -> list[ResolvedRun]:
    """Every run of a submission, resolved; a bad name in a file of several runs names its run."""
    from_file = parsed.format_id != "canonical"
    resolved: list[ResolvedRun] = []
    for index, run in enumerate(parsed.runs):
        try:
            resolved.append(resolve_run(run, parsed.context, catalog, from_file=from_file, index=index))
        except InvalidInput as exc:
            if len(parsed.runs) > 1:
                exc.field = f"runs[{index}].{exc.field}" if exc.field else f"runs[{index}]"
            raise
    sweep = sweep_capacity([r.run for r in resolved]) if len(resolved) > 1 else None
    if sweep is not None:
        resolved = [dataclasses.replace(r, sweep=sweep) for r in resolved]
    return resolved


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return a.strip().lower() == b.strip().lower()
    return bool(a == b)


_SCALAR_CONTEXT = ("runtime", "runtime_version", "gpu_count", "tensor_parallel", "kv_cache_dtype", "max_model_len")
#: Context field → the workload field it fills. A file's means are measured floats (1023.7 prompt
#: tokens), so a context value within this relative tolerance agrees with the file.
_WORKLOAD_CONTEXT = (
    ("concurrency", "concurrency"),
    ("prompt_tokens", "prompt_tokens_mean"),
    ("output_tokens", "output_tokens_mean"),
    ("request_rate", "request_rate"),
)
_WORKLOAD_TOLERANCE = 0.02


def resolve_run(
    run: CanonicalRun, context: SubmissionContext, catalog: Catalog, *, from_file: bool, index: int = 0
) -> ResolvedRun:
    """Fill ``run`` from ``context``, resolve its names and reject contradictions (in place)."""
    setup = run.setup
    # Whether the context changed the run: only then is its setup validated again (the parser,
    # or the bulk decoder, validated the run as the file gave it).
    changed = (
        context.hardware is not None
        or context.model is not None
        or context.quantization is not None
        or bool(context.engine_args)
        or bool(context.labels)
    )
    if context.deployment is not None:
        if run.deployment is not None and not _same(run.deployment, context.deployment):
            raise Conflict(
                f"the file says deployment {run.deployment!r} but the context says {context.deployment!r}",
                field="deployment",
            )
        run.deployment = context.deployment
        changed = True
    for name in _SCALAR_CONTEXT:
        ctx_value = getattr(context, name)
        if ctx_value is None:
            continue
        changed = True
        file_value = getattr(setup, name)
        if file_value is not None and not _same(file_value, ctx_value):
            raise Conflict(
                f"the file says {name} {file_value!r} but the context says {ctx_value!r}",
                field=f"setup.{name}",
            )
        setattr(setup, name, ctx_value)
    for name, workload_field in _WORKLOAD_CONTEXT:
        ctx_number = getattr(context, name)
        if ctx_number is None:
            continue
        file_number = getattr(run.workload, workload_field)
        if file_number is not None and abs(file_number - ctx_number) > _WORKLOAD_TOLERANCE * max(
            abs(file_number), abs(ctx_number)
        ):
            raise Conflict(
                f"the file says {workload_field} {file_number:g} but the context says {name} {ctx_number:g}",
                field=f"workload.{workload_field}",
            )
        if file_number is None:
            setattr(run.workload, workload_field, float(ctx_number))
            changed = True
    if context.engine_args:
        setup.engine_args = {**setup.engine_args, **context.engine_args}
    if context.labels:
        run.labels = {**run.labels, **context.labels}
    if context.measured_at is not None and run.measured_at is None:
        run.measured_at = context.measured_at

    unresolved: dict[str, str] = {}
    given: dict[str, Any] = {}
    hardware, hw_value = _resolve_hardware(catalog, setup.hardware, context.hardware, unresolved, from_file=from_file)
    model, model_value, implied = _resolve_model(catalog, setup.model, context.model, unresolved, from_file=from_file)
    quant_value = context.quantization if context.quantization is not None else setup.quantization
    if context.quantization is not None and setup.quantization is not None:
        _check_same(catalog, "quantization", setup.quantization, context.quantization)
    # A model name's implied quantization is stored as the run's; a config.json body's only informs
    # the analysis (it says how the checkpoint was quantized, not necessarily how it was served).
    named_quant = implied if isinstance(model_value, str) else None
    quant: QuantSpec | None = None
    quantization_id: str | None = None
    if quant_value is not None:
        quant = _resolve_quant(catalog, quant_value, unresolved, from_file=from_file and context.quantization is None)
        quantization_id = _catalog_id(quant, quant_value)
        if named_quant is not None and quantization_id is not None and named_quant.id != quantization_id:
            raise Conflict(
                f"the model name implies quantization {named_quant.id!r} but the run says {quantization_id!r}",
                field="setup.quantization",
            )
    elif named_quant is not None:
        quant, quantization_id = named_quant, named_quant.id
    elif implied is not None:
        quant = implied
    else:
        unresolved["quantization"] = "no quantization given"

    hardware_id, model_id = _catalog_id(hardware, hw_value), _catalog_id(model, model_value)
    for kind, value, resolved_id in (
        ("hardware", hw_value, hardware_id),
        ("model", model_value, model_id),
        ("quantization", quant_value, quantization_id),
    ):
        if value is None and kind != "quantization":
            unresolved[kind] = f"no {kind} given"
        elif isinstance(value, str) and value != resolved_id:
            given[kind] = value
    setup.hardware = hardware_id or hw_value
    setup.model = model_id or model_value
    setup.quantization = quantization_id or quant_value
    if given:
        run.source.given = {**run.source.given, **given}
    if changed:
        validate_setup(run)  # the context's values, which no parser has seen
    specs = ResolvedSetup(hardware, model, quant, implied, unresolved)
    doc = run_to_builtins(run)
    return ResolvedRun(run, specs, _hash_of(doc), hardware_id, model_id, quantization_id, index, doc=doc)


def _resolve_hardware(
    catalog: Catalog, file_value: Any, ctx_value: Any, unresolved: dict[str, str], *, from_file: bool
) -> tuple[HardwareSpec | None, Any]:
    if ctx_value is not None and file_value is not None:
        _check_same(catalog, "hardware", file_value, ctx_value)
    value = ctx_value if ctx_value is not None else file_value
    if value is None:
        return None, None
    try:
        return catalog.resolve_hardware(value, field_prefix="setup.hardware"), value
    except UnknownName as exc:
        if from_file and ctx_value is None:
            unresolved["hardware"] = exc.detail  # a name only the file carries: keep it
            return None, value
        exc.field = "setup.hardware"
        raise


def _resolve_model(
    catalog: Catalog, file_value: Any, ctx_value: Any, unresolved: dict[str, str], *, from_file: bool
) -> tuple[ModelSpec | None, Any, QuantSpec | None]:
    value = ctx_value if ctx_value is not None else file_value
    if value is None:
        return None, None, None
    if ctx_value is not None and file_value is not None:
        _check_same(catalog, "model", file_value, ctx_value)
    try:
        spec, implied = catalog.resolve_model(value, field_prefix="setup.model")
    except UnknownName as exc:
        if from_file and ctx_value is None:
            unresolved["model"] = exc.detail
            return None, value, None
        exc.field = "setup.model"
        raise
    return spec, value, implied


def _resolve_quant(catalog: Catalog, value: Any, unresolved: dict[str, str], *, from_file: bool) -> QuantSpec | None:
    try:
        return catalog.resolve_quantization(value, field_prefix="setup.quantization")
    except UnknownName as exc:
        if from_file:
            unresolved["quantization"] = exc.detail
            return None
        exc.field = "setup.quantization"
        raise


def _resolved_id(catalog: Catalog, kind: str, value: Any) -> str | None:
    if isinstance(value, dict):
        return None
    try:
        if kind == "hardware":
            return catalog.resolve_hardware(value).id
        if kind == "model":
            return catalog.resolve_model(value)[0].id
        return catalog.resolve_quantization(value).id
    except (UnknownName, InvalidInput):
        return None


def _check_same(catalog: Catalog, kind: str, file_value: Any, ctx_value: Any) -> None:
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
    return _hash_of(run_to_builtins(run))


def _hash_of(doc: dict[str, Any]) -> str:
    payload = {key: doc.get(key) for key in _HASHED}
    return hashlib.sha256(msgspec.json.encode(payload, order="sorted")).hexdigest()
