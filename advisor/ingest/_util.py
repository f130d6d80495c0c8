"""Shared helpers for the ingest parsers: unit conversion, tolerant number reading, percentile sets.

Every parser turns a tool's own numbers into :class:`advisor.canonical.Percentiles` and friends. The
pitfalls are the same everywhere (FORMATS.md "General rules"): units differ per tool and must never
be guessed from a number's size; some tools write integers as strings (llmperf), infinity as the
string ``"inf"`` (vLLM) or the bare token ``Infinity`` (SGLang); a failed run reports every latency
statistic as ``0.0``, which must not be stored as a suspiciously fast run.

All helpers raise only :class:`advisor.errors.IngestError`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

import numpy as np

from advisor.canonical import PERCENTILE_KEYS, Metrics, Percentiles, Workload
from advisor.errors import IngestError

__all__ = [
    "RUNTIME_BY_BACKEND",
    "TIME_UNITS_MS",
    "as_dict",
    "as_float",
    "as_int",
    "as_list",
    "canonical_percentile_key",
    "decode_from_tpot",
    "dig",
    "epoch_to_utc",
    "iso_to_utc",
    "mean_of",
    "percentiles_from_mapping",
    "percentiles_from_values",
    "prefill_from_ttft",
    "runtime_from_backend",
    "scalar_labels",
    "to_ms",
]

#: Multipliers from a time unit, as tools spell it, to milliseconds.
TIME_UNITS_MS: Final[dict[str, float]] = {
    "ns": 1e-6,
    "us": 1e-3,
    "µs": 1e-3,
    "ms": 1.0,
    "s": 1000.0,
    "sec": 1000.0,
    "secs": 1000.0,
    "second": 1000.0,
    "seconds": 1000.0,
    # per-token latencies (llm-d Benchmark Report); the "/token" is implied by the metric
    "ms/token": 1.0,
    "s/token": 1000.0,
}

#: Benchmark-client ``backend`` names that identify the *server* runtime. Generic client names such
#: as ``openai`` or ``openai-chat`` say nothing about the server and are deliberately absent.
RUNTIME_BY_BACKEND: Final[dict[str, str]] = {
    "vllm": "vllm",
    "vllm-chat": "vllm",
    "tgi": "tgi",
    "sglang": "sglang",
    "sglang-native": "sglang",
    "sglang-oai": "sglang",
    "sglang-oai-chat": "sglang",
    "tensorrt-llm": "trtllm",
    "trt": "trtllm",
    "tensorrtllm": "trtllm",
    "llama.cpp": "llamacpp",
    "llamacpp": "llamacpp",
    "lmdeploy": "other",
    "deepspeed-mii": "other",
    "scalellm": "other",
}


def runtime_from_backend(name: object) -> str | None:
    """The server runtime a client ``backend`` name implies, or None when it implies none."""
    if not isinstance(name, str):
        return None
    return RUNTIME_BY_BACKEND.get(name.strip().lower())


def as_float(value: object, field: str | None = None, *, allow_inf: bool = False) -> float | None:
    """A number from a JSON/YAML value: ints, floats and numeric strings (llmperf writes some
    integers as strings, vLLM writes ``"inf"``). Missing, null, NaN and non-numeric values are None.

    Infinity is returned only with ``allow_inf`` (request rates); elsewhere it is rejected, because a
    latency or a token count cannot be infinite.
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
    else:
        return None
    if math.isnan(number):
        return None
    if math.isinf(number):
        if allow_inf and number > 0:
            return number
        raise IngestError(f"must be a finite number, got {value!r}", field=field)
    return number


def as_int(value: object, field: str | None = None) -> int | None:
    """An integer count from an int, an integral float or a numeric string; None otherwise."""
    number = as_float(value, field)
    if number is None:
        return None
    if number != int(number):
        return None
    return int(number)


def as_dict(value: object) -> dict[str, Any]:
    """The value when it is a mapping with string keys, else an empty dict (schemas drift)."""
    if isinstance(value, dict):
        return value
    return {}


def as_list(value: object) -> list[Any]:
    """The value when it is a list, else an empty list (schemas drift)."""
    return value if isinstance(value, list) else []


def dig(doc: object, *path: str | int) -> Any:
    """Follow ``path`` through nested dicts/lists; None as soon as a step is missing."""
    current: Any = doc
    for step in path:
        if isinstance(step, int):
            if isinstance(current, list) and -len(current) <= step < len(current):
                current = current[step]
            else:
                return None
        elif isinstance(current, dict):
            current = current.get(step)
        else:
            return None
    return current


def to_ms(value: object, unit: str, field: str) -> float | None:
    """A time in ``unit`` converted to milliseconds. Negative times are rejected: a tool never
    measures one, so the file is corrupt or hand-edited."""
    key = unit.strip()
    factor = TIME_UNITS_MS.get(key, TIME_UNITS_MS.get(key.lower()))
    if factor is None:
        raise IngestError(f"unknown time unit {unit!r}", field=field)
    number = as_float(value, field)
    if number is None:
        return None
    if number < 0:
        raise IngestError(f"a time cannot be negative, got {number}", field=field)
    return number * factor


_PERCENTILE_RE = re.compile(r"^p?(\d+(?:[._p]\d+)?)$")


def canonical_percentile_key(name: str) -> str | None:
    """The canonical key for a tool's percentile name, or None when the canonical record has none.

    Accepts ``p99``, ``99``, ``p99.9``, ``p99_9``, ``p99p9`` (llm-d) and ``p999`` (guidellm's
    99.9th). ``median`` maps to ``p50``. guidellm's ``p001``/``p01``/``p05`` (0.1 %, 1 %, 5 %) and
    other percentiles outside :data:`advisor.canonical.PERCENTILE_KEYS` are dropped.
    """
    lowered = name.strip().lower()
    if lowered == "median":
        return "p50"
    if lowered == "p999":
        return "p99_9"
    match = _PERCENTILE_RE.match(lowered)
    if match is None or lowered.startswith("p0"):
        return None
    digits = match.group(1).replace(".", "_").replace("p", "_")
    if "_" in digits:
        whole, frac = digits.split("_", 1)
        frac = frac.rstrip("0")
        digits = f"{whole}_{frac}" if frac else whole
    key = f"p{digits}"
    return key if key in PERCENTILE_KEYS else None


_STAT_ALIASES: Final[dict[str, str]] = {
    "mean": "mean",
    "avg": "mean",
    "average": "mean",
    "min": "min",
    "max": "max",
    "std": "std",
    "stddev": "std",
    "std_dev": "std",
}


def percentiles_from_mapping(
    stats: Mapping[str, object],
    *,
    unit: str | None,
    field: str,
    zero_is_missing: bool = False,
) -> Percentiles:
    """A canonical percentile set from a ``{stat name: value}`` mapping.

    ``unit`` is a time unit for :func:`to_ms` (None for quantities that are not times, kept as is).
    Statistic names may be ``mean``/``avg``, ``median``, ``min``, ``max``, ``std``/``stddev``/
    ``std_dev`` and any percentile spelling :func:`canonical_percentile_key` knows; a nested
    ``percentiles`` mapping (guidellm) is read too. An explicit percentile wins over ``median``.

    With ``zero_is_missing`` a set whose every value is 0 is returned empty: tools print 0.0 for
    "nothing measured" (a run where every request failed), never a real zero latency.
    """
    values: dict[str, float] = {}
    medians: dict[str, float] = {}

    def put(name: str, raw: object) -> None:
        sub = f"{field}.{name}"
        number = to_ms(raw, unit, sub) if unit is not None else as_float(raw, sub)
        if number is None:
            return
        if unit is None and number < 0:
            raise IngestError(f"cannot be negative, got {number}", field=sub)
        if name.strip().lower() == "median":
            medians["p50"] = number
            return
        key = _STAT_ALIASES.get(name.strip().lower()) or canonical_percentile_key(name)
        if key is not None:
            values[key] = number

    for name, raw in stats.items():
        if name == "percentiles" and isinstance(raw, Mapping):
            for pname, praw in raw.items():
                put(str(pname), praw)
        elif isinstance(name, str):
            put(name, raw)
    for key, number in medians.items():
        values.setdefault(key, number)
    if zero_is_missing and values and all(v == 0.0 for v in values.values()):
        return Percentiles()
    return Percentiles(**values)


def percentiles_from_values(values_ms: Iterable[float]) -> Percentiles:
    """Statistics of raw per-request (or per-gap) values in ms, computed with numpy the way vLLM
    computes its summary (``np.percentile`` with linear interpolation, population ``np.std``)."""
    array = np.asarray(list(values_ms), dtype=float)
    if array.size == 0:
        return Percentiles()
    if not np.all(np.isfinite(array)):
        raise IngestError("per-request values must be finite numbers", field="body")
    if np.any(array < 0):
        raise IngestError("a time cannot be negative", field="body")
    qs = {"p25": 25.0, "p50": 50.0, "p75": 75.0, "p90": 90.0, "p95": 95.0, "p99": 99.0, "p99_9": 99.9}
    computed = np.percentile(array, list(qs.values()))
    out: dict[str, float] = {key: float(v) for key, v in zip(qs, computed, strict=True)}
    out["mean"] = float(np.mean(array))
    out["min"] = float(np.min(array))
    out["max"] = float(np.max(array))
    out["std"] = float(np.std(array))
    return Percentiles(**out)


def epoch_to_utc(value: object, field: str) -> datetime | None:
    """A UTC datetime from epoch seconds; None for missing values."""
    seconds = as_float(value, field)
    if seconds is None:
        return None
    if seconds <= 0:
        raise IngestError(f"not a valid epoch time: {seconds}", field=field)
    try:
        return datetime.fromtimestamp(seconds, tz=UTC)
    except (OverflowError, OSError, ValueError) as exc:
        raise IngestError(f"not a valid epoch time: {seconds}", field=field) from exc


def iso_to_utc(value: object, field: str, notes: list[str]) -> datetime | None:
    """A UTC datetime from an ISO-8601 string or a YAML timestamp. A naive (zone-less) time is the
    tool's local time; the zone is unknown, so it is taken as UTC and a note says so."""
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str) and value.strip():
        try:
            parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError as exc:
            raise IngestError(f"not an ISO-8601 time: {value!r}", field=field) from exc
    else:
        return None
    if parsed.tzinfo is None:
        notes.append(f"{field} has no time zone (tool local time); assumed UTC")
        return parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def scalar_labels(doc: Mapping[str, object], keys: Iterable[str]) -> dict[str, str]:
    """``{key: str(value)}`` for the given keys whose values are scalars (user metadata)."""
    labels: dict[str, str] = {}
    for key in keys:
        value = doc.get(key)
        if isinstance(value, bool):
            labels[key] = "true" if value else "false"
        elif isinstance(value, str | int | float) and value is not None:
            labels[key] = str(value)
    return labels


def decode_from_tpot(metrics: Metrics) -> None:
    """Per-sequence decode speed = 1000 / mean TPOT (DESIGN §4), when TPOT is known and positive."""
    tpot = metrics.tpot_ms.mean
    if metrics.decode_tok_s is None and tpot is not None and tpot > 0:
        metrics.decode_tok_s = 1000.0 / tpot


def prefill_from_ttft(metrics: Metrics, workload: Workload, notes: list[str]) -> None:
    """Approximate per-sequence prefill speed as mean prompt tokens ÷ mean client TTFT.

    Only at concurrency 1: under load the client TTFT also holds queueing behind other requests'
    prefills, and the quotient would describe the queue, not the engine (FORMATS.md §9.3 marks the
    figure approximate even then, since TTFT includes network and HTTP overhead).
    """
    ttft = metrics.ttft_ms.mean
    prompt = workload.prompt_tokens_mean
    if metrics.prefill_tok_s is not None or ttft is None or ttft <= 0 or not prompt:
        return
    if workload.concurrency is not None and workload.concurrency <= 1:
        estimate = prompt / ttft * 1000.0
        if metrics.decode_tok_s is not None and estimate <= metrics.decode_tok_s:
            # Prefill processes the prompt in parallel and always outruns one-token-at-a-time decode;
            # a slower "prefill" means the TTFT holds something else (reasoning tokens the tool did
            # not count as output, a cold start, queueing at a gateway).
            notes.append(
                f"prefill_tok_s not derived: prompt_tokens_mean / ttft_ms.mean = {estimate:.1f} tok/s is "
                "below the decode speed, so TTFT holds more than prefill (reasoning tokens? cold start?)"
            )
            return
        metrics.prefill_tok_s = estimate
        notes.append(
            "prefill_tok_s approximated as prompt_tokens_mean / ttft_ms.mean (client TTFT includes "
            "network and HTTP overhead)"
        )
    else:
        notes.append(
            "prefill_tok_s not derived: with concurrency above 1 (or unknown) the client TTFT "
            "includes queueing behind other requests"
        )


def mean_of(values: Sequence[float]) -> float | None:
    """The arithmetic mean, or None for an empty sequence."""
    return float(np.mean(np.asarray(values, dtype=float))) if values else None
