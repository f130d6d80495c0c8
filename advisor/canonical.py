"""The canonical run: what every parser produces and what the API accepts as JSON (DESIGN §4).

Units are fixed: milliseconds, tokens per second, ratios in 0..1. ``decode_tok_s`` and
``prefill_tok_s`` are *per sequence*; aggregate figures go in ``output_throughput_tok_s``.

These names are a public contract: extend them, never rename them.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any, Literal

import msgspec

from advisor.errors import InvalidInput, invalid_from_msgspec

__all__ = [
    "PERCENTILE_KEYS",
    "RUNTIMES",
    "SLO",
    "CanonicalRun",
    "Metrics",
    "Percentiles",
    "Setup",
    "Source",
    "Workload",
    "decode_run",
    "run_to_builtins",
    "typed_scalar",
    "validate_run",
    "validate_setup",
    "validate_slo",
]

Runtime = Literal["vllm", "sglang", "tgi", "trtllm", "ollama", "llamacpp", "mlx", "other"]
RUNTIMES: tuple[str, ...] = ("vllm", "sglang", "tgi", "trtllm", "ollama", "llamacpp", "mlx", "other")

#: Percentile keys in ascending order; ``p99_9`` is the 99.9th percentile.
PERCENTILE_KEYS: tuple[str, ...] = ("p25", "p50", "p75", "p90", "p95", "p99", "p99_9")


class _Base(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True, kw_only=True):
    """Strict by default: a misspelt key in a canonical run is an error, not silently dropped."""


class Percentiles(_Base):
    """A latency distribution in milliseconds. Keep whichever statistics the source gives."""

    mean: float | None = None
    min: float | None = None
    p25: float | None = None
    p50: float | None = None
    p75: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    p99_9: float | None = None
    max: float | None = None
    std: float | None = None

    def is_empty(self) -> bool:
        return all(getattr(self, f) is None for f in self.__struct_fields__)


class Setup(_Base):
    """What was measured: runtime, hardware, model, quantization and engine configuration.

    ``hardware``, ``model`` and ``quantization`` take a catalog id, a known alias or an inline spec
    object (DESIGN §4); the catalog resolves them.
    """

    runtime: str | None = None
    runtime_version: str | None = None
    hardware: str | dict[str, Any] | None = None
    gpu_count: int | None = None
    tensor_parallel: int | None = None
    pipeline_parallel: int | None = None
    model: str | dict[str, Any] | None = None
    quantization: str | dict[str, Any] | None = None
    kv_cache_dtype: str | None = None
    max_model_len: int | None = None
    engine_args: dict[str, Any] = msgspec.field(default_factory=dict)


class Workload(_Base):
    """The traffic the benchmark offered."""

    num_requests: int | None = None
    concurrency: float | None = None
    request_rate: float | None = None
    prompt_tokens_mean: float | None = None
    output_tokens_mean: float | None = None
    shared_prefix_tokens: float | None = None
    kv_depth_tokens: float | None = None
    dataset: str | None = None
    streaming: bool | None = None


class Metrics(_Base):
    """What was measured. Times in ms, rates in tok/s or req/s, ratios in 0..1.

    ``tpot_ms`` is per-request decode time per token excluding the first token; ``itl_ms`` is the
    pooled gap between tokens/chunks; ``e2e_per_token_ms`` is end-to-end latency divided by output
    tokens (guidellm ``time_per_output_token_ms``, llmperf ``inter_token_latency_s``), which includes
    TTFT and must never be stored as ITL or TPOT (docs/formats.md §9.2).
    """

    ttft_ms: Percentiles = msgspec.field(default_factory=Percentiles)
    itl_ms: Percentiles = msgspec.field(default_factory=Percentiles)
    tpot_ms: Percentiles = msgspec.field(default_factory=Percentiles)
    e2e_ms: Percentiles = msgspec.field(default_factory=Percentiles)
    e2e_per_token_ms: Percentiles = msgspec.field(default_factory=Percentiles)
    queue_ms: Percentiles = msgspec.field(default_factory=Percentiles)
    prefill_tok_s: float | None = None
    decode_tok_s: float | None = None
    output_throughput_tok_s: float | None = None
    input_throughput_tok_s: float | None = None
    total_throughput_tok_s: float | None = None
    request_throughput_rps: float | None = None
    queue_waiting_mean: float | None = None
    queue_waiting_max: float | None = None
    running_mean: float | None = None
    running_max: float | None = None
    kv_cache_usage_mean: float | None = None
    kv_cache_usage_max: float | None = None
    prefix_cache_hit_rate: float | None = None
    preemptions: float | None = None
    load_ms: float | None = None
    requests_completed: int | None = None
    requests_failed: int | None = None
    duration_s: float | None = None
    cached_prompt_tokens_mean: float | None = None


class Source(_Base):
    """Where the run came from: the parser's format id, the tool and its version, and notes on any
    approximation the parser made (e.g. prefill_tok_s derived from mean TTFT)."""

    format: str | None = None
    tool: str | None = None
    tool_version: str | None = None
    file_name: str | None = None
    notes: list[str] = msgspec.field(default_factory=list)
    #: Names as submitted, where the catalog normalised them (``{"hardware": "NVIDIA A10G"}``).
    given: dict[str, Any] = msgspec.field(default_factory=dict)


class SLO(_Base):
    """Service-level objectives of a deployment. Any subset may be given."""

    ttft_p50_ms: float | None = None
    ttft_p99_ms: float | None = None
    itl_p50_ms: float | None = None
    itl_p99_ms: float | None = None
    tpot_p99_ms: float | None = None
    e2e_p99_ms: float | None = None
    decode_tok_s_min: float | None = None
    output_throughput_tok_s_min: float | None = None


class CanonicalRun(_Base):
    """One measured run in canonical form."""

    deployment: str | None = None
    measured_at: datetime | None = None
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    setup: Setup = msgspec.field(default_factory=Setup)
    workload: Workload = msgspec.field(default_factory=Workload)
    metrics: Metrics = msgspec.field(default_factory=Metrics)
    source: Source = msgspec.field(default_factory=Source)
    slo: SLO | None = None


_DECODER = msgspec.json.Decoder(CanonicalRun)


def decode_run(data: bytes | str | dict[str, Any]) -> CanonicalRun:
    """Decode and validate a canonical run from JSON bytes or a builtin dict.

    Raises :class:`InvalidInput` naming the failing field path.
    """
    try:
        run = msgspec.convert(data, CanonicalRun, strict=False) if isinstance(data, dict) else _DECODER.decode(data)
    except msgspec.ValidationError as exc:
        raise invalid_from_msgspec(exc) from exc
    except msgspec.DecodeError as exc:
        raise InvalidInput(f"invalid JSON: {exc}", field="body") from exc
    validate_run(run)
    return run


def run_to_builtins(run: CanonicalRun) -> dict[str, Any]:
    """The run as plain JSON-compatible builtins, defaults omitted."""
    out: dict[str, Any] = msgspec.to_builtins(run)
    return out


_RATIO_FIELDS = ("kv_cache_usage_mean", "kv_cache_usage_max", "prefix_cache_hit_rate")


def typed_scalar(value: str) -> Any:
    """A ``key=value`` value (engine arg, label, SLO) as the JSON scalar it spells: ``true``/``false``,
    ``null``/``none``, an int, a float, else the string as given. The server types query
    parameters with it and the client its options, so both mean the same."""
    lowered = value.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("null", "none"):
        return None
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            continue
    return value


def validate_run(run: CanonicalRun) -> None:
    """Reject physically impossible values: negative, NaN or infinite metrics, percentiles out of
    order, ratios outside 0..1, and unknown runtimes. Raises :class:`InvalidInput` naming the field."""
    validate_setup(run)
    for name in _WORKLOAD_NUMBERS:
        value = getattr(run.workload, name)
        if value is not None:
            _check_finite_non_negative(float(value), f"workload.{name}")
    metrics = run.metrics
    for name in _PERCENTILE_FIELDS:
        _validate_percentiles(getattr(metrics, name), f"metrics.{name}")
    for name in _METRIC_NUMBERS:
        value = getattr(metrics, name)
        if value is not None:
            _check_finite_non_negative(float(value), f"metrics.{name}")
    for name in _RATIO_FIELDS:
        value = getattr(metrics, name)
        if value is not None and value > 1.0:
            raise InvalidInput(f"is a ratio in 0..1, got {value}", field=f"metrics.{name}")
    if run.slo is not None:
        validate_slo(run.slo)


def validate_setup(run: CanonicalRun) -> None:
    """The setup part of :func:`validate_run` (what a submission's context can change)."""
    if run.setup.runtime is not None and run.setup.runtime not in RUNTIMES:
        raise InvalidInput(
            f"unknown runtime {run.setup.runtime!r}; expected one of {', '.join(RUNTIMES)}",
            field="setup.runtime",
        )
    for name in ("gpu_count", "tensor_parallel", "pipeline_parallel", "max_model_len"):
        value = getattr(run.setup, name)
        if value is not None and value < 1:
            raise InvalidInput(f"must be at least 1, got {value}", field=f"setup.{name}")


# Field lists computed once: validation runs on every ingested run (bulk: thousands per request).
_WORKLOAD_NUMBERS = tuple(n for n in Workload.__struct_fields__ if n not in ("dataset", "streaming"))
_PERCENTILE_FIELDS = tuple(n for n in Metrics.__struct_fields__ if n.endswith("_ms") and n != "load_ms")
_METRIC_NUMBERS = tuple(n for n in Metrics.__struct_fields__ if n not in _PERCENTILE_FIELDS)
_PERCENTILE_ORDER = ("min", *PERCENTILE_KEYS, "max")


def validate_slo(slo: SLO, field: str = "slo") -> None:
    """Every objective is a finite, non-negative number."""
    for name in SLO.__struct_fields__:
        value = getattr(slo, name)
        if value is not None:
            _check_finite_non_negative(value, f"{field}.{name}")


def _check_finite_non_negative(value: float, field: str) -> None:
    if math.isnan(value) or math.isinf(value):
        raise InvalidInput(f"must be a finite number, got {value}", field=field)
    if value < 0:
        raise InvalidInput(f"must not be negative, got {value}", field=field)


def _validate_percentiles(p: Percentiles, field: str) -> None:
    previous: tuple[str, float] | None = None
    for name in _PERCENTILE_ORDER:
        value = getattr(p, name)
        if value is None:
            continue
        _check_finite_non_negative(value, f"{field}.{name}")
        # A tiny tolerance absorbs rounding in tools that print percentiles to 2 decimals.
        if previous is not None and previous[1] > value * (1 + 1e-6) + 1e-9:
            raise InvalidInput(
                f"percentiles out of order: {previous[0]}={previous[1]} > {name}={value}",
                field=f"{field}.{previous[0]}",
            )
        previous = (name, value)
    for name in ("mean", "std"):
        value = getattr(p, name)
        if value is not None:
            _check_finite_non_negative(value, f"{field}.{name}")
