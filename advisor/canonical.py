"""The canonical run: what every parser produces and what the API accepts as JSON (DESIGN §4).

Units are fixed: milliseconds, tokens per second, ratios in 0..1. ``decode_tok_s`` and
``prefill_tok_s`` are *per sequence*; aggregate figures go in ``output_throughput_tok_s``.

These names are a public contract: extend them, never rename them.
"""

from __future__ import annotations

import math
import sys
from datetime import datetime
from typing import Any, Literal

import msgspec

from advisor.errors import InvalidInput, invalid_from_msgspec

__all__ = [
    "LIMITS",
    "MAX_DEPTH",
    "MAX_TEXT",
    "PERCENTILE_KEYS",
    "RUNTIMES",
    "SLO",
    "YEAR_MS",
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
    "validate_setup_fields",
    "validate_slo",
    "validate_workload",
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
    #: The output length the benchmark asked for (genai-perf/aiperf ``output_tokens.mean``, vLLM
    #: ``--random-output-len``, guidellm's data ``output_tokens``): a request, not a count. Fewer
    #: counted tokens may be an early EOS or hidden reasoning tokens.
    output_tokens_requested: float | None = None
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
    #: Share (0..1) of the loaded model held in GPU memory; below 1 the rest is read from system
    #: memory every token (partial CPU offload). Ollama ``/api/ps`` ``size_vram / size``, llama.cpp
    #: "offloaded N/M layers to GPU" (N / M). None when not reported.
    gpu_resident_share: float | None = None


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
    #: Quality marks: a metric stored although it says little, and why, keyed by the metric's field
    #: name (``{"prefill_tok_s": "overhead-dominated: 28 prompt tokens"}``). The fit and the rules
    #: ignore a marked metric; the run still shows it.
    quality: dict[str, str] = msgspec.field(default_factory=dict)


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


_RATIO_FIELDS = ("kv_cache_usage_mean", "kv_cache_usage_max", "prefix_cache_hit_rate", "gpu_resident_share")


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
    order, ratios outside 0..1, values beyond the plausibility bounds (:data:`LIMITS`), strings
    no database stores (NUL, lone surrogates, longer than their column) and unknown runtimes, so
    that SQLite and Postgres refuse the same runs before any SQL runs. Raises
    :class:`InvalidInput` naming the field.

    A run that :func:`_plain_run` passes is valid and returns at once; any other run goes through
    the checks below, which find and name the failing field."""
    if not _plain_run(run):
        _validate_run_named(run)


def _validate_run_named(run: CanonicalRun) -> None:
    """validate_run's checks, each naming its field (the path of a run the fast pass doubts)."""
    validate_setup(run)
    validate_workload(run.workload)
    metrics = run.metrics
    for name in _PERCENTILE_FIELDS:
        _validate_percentiles(getattr(metrics, name), f"metrics.{name}")
    for name in _METRIC_NUMBERS:
        value = getattr(metrics, name)
        if value is not None:
            _check_number(value, f"metrics.{name}", LIMITS.get(name))
    for name in _RATIO_FIELDS:
        value = getattr(metrics, name)
        if value is not None and value > 1.0:
            raise InvalidInput(f"is a ratio in 0..1, got {value}", field=f"metrics.{name}")
    _check_strings(run.source, "source")
    if run.slo is not None:
        validate_slo(run.slo)


def validate_setup(run: CanonicalRun) -> None:
    """The setup part of :func:`validate_run` (what a submission's context can change: the setup,
    the deployment name and the labels)."""
    validate_setup_fields(run.setup)
    if run.deployment is not None:
        _check_text(run.deployment, "deployment", 200)
    if len(run.labels) > MAX_LABELS:
        raise InvalidInput(f"at most {MAX_LABELS} labels, got {len(run.labels)}", field="labels")
    for key, value in run.labels.items():
        _check_text(key, "labels", 100)
        _check_text(value, f"labels.{key}", 500)


def validate_setup_fields(setup: Setup, field: str = "setup") -> None:
    """A :class:`Setup` alone (``/predict`` takes one without a run)."""
    if setup.runtime is not None and setup.runtime not in RUNTIMES:
        raise InvalidInput(
            f"unknown runtime {setup.runtime!r}; expected one of {', '.join(RUNTIMES)}",
            field=f"{field}.runtime",
        )
    for name in _SETUP_INT_FIELDS:
        value = getattr(setup, name)
        least = 0 if name == "gpu_count" else 1  # gpu_count 0: a CPU-only run
        if value is not None and value < least:
            raise InvalidInput(f"must be at least {least}, got {value}", field=f"{field}.{name}")
        if value is not None:
            _check_number(value, f"{field}.{name}", LIMITS[name])
    _check_strings(setup, field)


def validate_workload(workload: Workload, field: str = "workload") -> None:
    """Every workload number is finite, non-negative and within :data:`LIMITS`."""
    for name in _WORKLOAD_NUMBERS:
        value = getattr(workload, name)
        if value is not None:
            _check_number(value, f"{field}.{name}", LIMITS[name])
    if workload.dataset is not None:
        _check_text(workload.dataset, f"{field}.dataset", 500)


# Field lists computed once: validation runs on every ingested run (bulk: thousands per request).
_SETUP_INT_FIELDS = ("gpu_count", "tensor_parallel", "pipeline_parallel", "max_model_len")
_WORKLOAD_NUMBERS = tuple(n for n in Workload.__struct_fields__ if n not in ("dataset", "streaming"))
_PERCENTILE_FIELDS = tuple(n for n in Metrics.__struct_fields__ if n.endswith("_ms") and n != "load_ms")
_METRIC_NUMBERS = tuple(n for n in Metrics.__struct_fields__ if n not in _PERCENTILE_FIELDS)
_PERCENTILE_ORDER = ("min", *PERCENTILE_KEYS, "max")

# ---------------------------------------------------------------- plausibility bounds (issue #14.4)
# Upper bounds from physics, each far (10-1000x) above anything a real device or benchmark reaches,
# so that a unit slip or garbage is refused while no real run comes near them:
#: A year: no benchmark, request or model load lasts longer.
YEAR_S = 365 * 24 * 3600.0
YEAR_MS = YEAR_S * 1000.0
#: Context tokens: 10x the longest published context window (10M tokens, Llama 4 Scout).
MAX_TOKENS = 1e8
#: Per-sequence decode: the fastest published single-stream figures are ~2-3k tok/s (wafer-scale
#: and LPU hardware on small models); 100k tok/s is far beyond any device's memory-bandwidth ceiling.
MAX_DECODE_TOK_S = 1e5
#: Per-sequence prefill and aggregate throughput: compute-bound at ~1e15-1e16 FLOP/s per device
#: and 2 FLOP per parameter per token gives ~1e7 tok/s for a 1B model on one device; a benchmark
#: of a few thousand devices stays below 1e10.
MAX_THROUGHPUT_TOK_S = 1e10
#: Requests per second, concurrency and queue depths of one benchmark.
MAX_REQUESTS = 1e9
#: Devices in one run: the largest clusters hold ~100k accelerators.
MAX_DEVICES = 1_000_000
#: Labels per run, and the longest string anywhere in a run (a model id, a note, an engine arg).
MAX_LABELS = 64
MAX_TEXT = 10_000
#: Nesting of inline specs and engine args (``{"a": {"b": ...}}``).
MAX_DEPTH = 8

#: The bound of every number of the canonical run, by field name; latencies (``*_ms``) are
#: bounded by :data:`YEAR_MS`.
LIMITS: dict[str, float] = {
    "gpu_count": MAX_DEVICES,
    "tensor_parallel": MAX_DEVICES,
    "pipeline_parallel": MAX_DEVICES,
    "max_model_len": MAX_TOKENS,
    "num_requests": MAX_REQUESTS,
    "concurrency": MAX_REQUESTS,
    "request_rate": MAX_REQUESTS,
    "prompt_tokens_mean": MAX_TOKENS,
    "output_tokens_mean": MAX_TOKENS,
    "output_tokens_requested": MAX_TOKENS,
    "shared_prefix_tokens": MAX_TOKENS,
    "kv_depth_tokens": MAX_TOKENS,
    "cached_prompt_tokens_mean": MAX_TOKENS,
    "decode_tok_s": MAX_DECODE_TOK_S,
    "prefill_tok_s": MAX_THROUGHPUT_TOK_S,
    "output_throughput_tok_s": MAX_THROUGHPUT_TOK_S,
    "input_throughput_tok_s": MAX_THROUGHPUT_TOK_S,
    "total_throughput_tok_s": MAX_THROUGHPUT_TOK_S,
    "request_throughput_rps": MAX_REQUESTS,
    "queue_waiting_mean": MAX_REQUESTS,
    "queue_waiting_max": MAX_REQUESTS,
    "running_mean": MAX_REQUESTS,
    "running_max": MAX_REQUESTS,
    "kv_cache_usage_mean": 1.0,
    "kv_cache_usage_max": 1.0,
    "prefix_cache_hit_rate": 1.0,
    "gpu_resident_share": 1.0,
    "preemptions": MAX_REQUESTS,
    "load_ms": YEAR_MS,
    "requests_completed": MAX_REQUESTS,
    "requests_failed": MAX_REQUESTS,
    "duration_s": YEAR_S,
    "decode_tok_s_min": MAX_DECODE_TOK_S,
    "output_throughput_tok_s_min": MAX_THROUGHPUT_TOK_S,
}

#: The longest value of each string field (the column that stores it, or :data:`MAX_TEXT`).
_TEXT_LIMITS: dict[str, int] = {
    "runtime": 32,
    "runtime_version": 64,
    "kv_cache_dtype": 32,
    "hardware": 200,
    "model": 300,
    "quantization": 200,
    "format": 64,
    "tool": 200,
    "tool_version": 64,
    "file_name": 500,
}


def validate_slo(slo: SLO, field: str = "slo") -> None:
    """Every objective is a finite, non-negative number within its bound (a latency within a year),
    and a p50 objective is not above the p99 one."""
    for name in SLO.__struct_fields__:
        value = getattr(slo, name)
        if value is not None:
            _check_number(value, f"{field}.{name}", LIMITS.get(name, YEAR_MS))
    for metric in ("ttft", "itl"):
        p50, p99 = getattr(slo, f"{metric}_p50_ms"), getattr(slo, f"{metric}_p99_ms")
        if p50 is not None and p99 is not None and p50 > p99:
            raise InvalidInput(
                f"the p50 objective ({p50} ms) is above the p99 objective ({p99} ms)",
                field=f"{field}.{metric}_p50_ms",
            )


def _check_number(value: float, field: str, limit: float | None) -> None:
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        raise InvalidInput(f"must be a finite number, got {value}", field=field)
    if value < 0:
        raise InvalidInput(f"must not be negative, got {value}", field=field)
    if limit is not None and value > limit:
        raise InvalidInput(f"is beyond physical sense: expected at most {limit:g}, got {value:g}", field=field)


def _check_text(value: str, field: str, limit: int = MAX_TEXT) -> None:
    """A string both databases store alike: no NUL (Postgres refuses it), valid UTF-8 (no lone
    surrogate), and no longer than its column."""
    if len(value) > limit:
        raise InvalidInput(f"is at most {limit} characters, got {len(value)}", field=field)
    if "\x00" in value:
        raise InvalidInput("must not contain NUL characters", field=field)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput("is not valid Unicode (a lone surrogate)", field=field) from exc


def _check_strings(struct: msgspec.Struct, field: str) -> None:
    """Every string of ``struct`` (and of the dicts and lists it holds) through :func:`_check_text`."""
    for name in struct.__struct_fields__:
        value = getattr(struct, name)
        if value is not None and not isinstance(value, (int, float, bool, datetime)):
            _check_value(value, f"{field}.{name}", _TEXT_LIMITS.get(name, MAX_TEXT), 0)


def _check_value(value: Any, field: str, limit: int, depth: int) -> None:
    if isinstance(value, str):
        _check_text(value, field, limit)
    elif isinstance(value, dict):
        if depth >= MAX_DEPTH:
            raise InvalidInput(f"is nested more than {MAX_DEPTH} levels deep", field=field)
        for key, item in value.items():
            _check_text(str(key), field, 200)
            _check_value(item, f"{field}.{key}", MAX_TEXT, depth + 1)
    elif isinstance(value, list):
        if depth >= MAX_DEPTH:
            raise InvalidInput(f"is nested more than {MAX_DEPTH} levels deep", field=field)
        for i, item in enumerate(value):
            _check_value(item, f"{field}[{i}]", MAX_TEXT, depth + 1)
    elif isinstance(value, int) and not isinstance(value, bool) and abs(value) > _INT64_MAX:
        raise InvalidInput(f"is beyond the 64-bit integer range, got {value}", field=field)
    elif isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        raise InvalidInput(f"must be a finite number, got {value}", field=field)


_INT64_MAX = 2**63 - 1


def _validate_percentiles(p: Percentiles, field: str) -> None:
    previous: tuple[str, float] | None = None
    for name in _PERCENTILE_ORDER:
        value = getattr(p, name)
        if value is None:
            continue
        _check_number(value, f"{field}.{name}", YEAR_MS)
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
            _check_number(value, f"{field}.{name}", YEAR_MS)


# ------------------------------------------------------------ the fast pass of validate_run
# validate_run runs for every submitted run (bulk: thousands per request) and nearly every run
# passes. The checks above build each field's name (an f-string per value) before they know
# whether it is needed; this pass asks the same questions without naming anything, and answers
# True only when every check above would pass. Any doubt (a value of another type, an SLO, a
# failure) answers False, and validate_run then runs the checks that name the field. Kept
# equivalent by tests/unit/test_canonical_fast_validation.py.

_FLOAT_MAX = sys.float_info.max  # `0 <= v <= _FLOAT_MAX` refuses NaN, infinities and negatives
_SETUP_INTS = tuple((name, 0 if name == "gpu_count" else 1, LIMITS[name]) for name in _SETUP_INT_FIELDS)
_WORKLOAD_LIMITS = tuple((name, LIMITS[name]) for name in _WORKLOAD_NUMBERS)
_SCALAR_TYPES = (int, float, bool, datetime)
_NO_PERCENTILES = Percentiles()
#: Metrics read as one tuple (msgspec.structs.astuple): each field's index and bound.
_METRIC_INDEX = {name: i for i, name in enumerate(Metrics.__struct_fields__)}
_PERCENTILE_INDEXES = tuple(_METRIC_INDEX[name] for name in _PERCENTILE_FIELDS)
_METRIC_LIMITS = tuple((_METRIC_INDEX[name], LIMITS.get(name, _FLOAT_MAX)) for name in _METRIC_NUMBERS)
#: Percentiles read as one tuple: the ordered statistics' indexes, then mean's and std's.
_ORDER_INDEXES = tuple(Percentiles.__struct_fields__.index(name) for name in _PERCENTILE_ORDER)
_MEAN_INDEX, _STD_INDEX = Percentiles.__struct_fields__.index("mean"), Percentiles.__struct_fields__.index("std")


def _plain_text(value: str, limit: int) -> bool:
    if len(value) > limit or "\x00" in value:
        return False
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _plain_value(value: Any, limit: int, depth: int) -> bool:
    kind = type(value)
    if kind is str:
        return _plain_text(value, limit)
    if kind is dict:
        if depth >= MAX_DEPTH:
            return False
        for key, item in value.items():
            if type(key) is not str or not _plain_text(key, 200) or not _plain_value(item, MAX_TEXT, depth + 1):
                return False
        return True
    if kind is list:
        return depth < MAX_DEPTH and all(_plain_value(item, MAX_TEXT, depth + 1) for item in value)
    if kind is int:
        return bool(-_INT64_MAX <= value <= _INT64_MAX)
    if kind is float:
        return bool(-_FLOAT_MAX <= value <= _FLOAT_MAX)
    return value is None or kind is bool


def _plain_strings(struct: msgspec.Struct) -> bool:
    for name, value in zip(struct.__struct_fields__, msgspec.structs.astuple(struct), strict=True):
        if value is None or isinstance(value, _SCALAR_TYPES):
            continue
        if not _plain_value(value, _TEXT_LIMITS.get(name, MAX_TEXT), 0):
            return False
    return True


def _plain_percentiles(p: Percentiles) -> bool:
    if p == _NO_PERCENTILES:
        return True
    values = msgspec.structs.astuple(p)
    previous: float | None = None
    for index in _ORDER_INDEXES:
        value = values[index]
        if value is None:
            continue
        if not 0 <= value <= YEAR_MS or (previous is not None and previous > value * (1 + 1e-6) + 1e-9):
            return False
        previous = value
    mean, std = values[_MEAN_INDEX], values[_STD_INDEX]
    return (mean is None or 0 <= mean <= YEAR_MS) and (std is None or 0 <= std <= YEAR_MS)


def _plain_run(run: CanonicalRun) -> bool:
    """True when :func:`validate_run` would accept ``run`` (see above); False when in doubt."""
    if run.slo is not None:
        return False
    setup = run.setup
    if setup.runtime is not None and setup.runtime not in RUNTIMES:
        return False
    for name, least, limit in _SETUP_INTS:
        value = getattr(setup, name)
        if value is not None and not least <= value <= limit:
            return False
    if not _plain_strings(setup):
        return False
    if run.deployment is not None and not _plain_text(run.deployment, 200):
        return False
    labels = run.labels
    if len(labels) > MAX_LABELS:
        return False
    for key, text in labels.items():
        if not _plain_text(key, 100) or not _plain_text(text, 500):
            return False
    workload = run.workload
    for name, limit in _WORKLOAD_LIMITS:
        value = getattr(workload, name)
        if value is not None and not 0 <= value <= limit:
            return False
    if workload.dataset is not None and not _plain_text(workload.dataset, 500):
        return False
    metrics = msgspec.structs.astuple(run.metrics)
    for index in _PERCENTILE_INDEXES:
        if not _plain_percentiles(metrics[index]):
            return False
    for index, limit in _METRIC_LIMITS:
        value = metrics[index]
        if value is not None and not 0 <= value <= limit:
            return False
    return _plain_strings(run.source)
