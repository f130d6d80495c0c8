"""Combine a benchmark run with the server telemetry scraped around it.

The benchmark (vLLM bench, guidellm, …) measures what clients saw: latency percentiles, throughput
and the workload. The server's ``/metrics`` (a ``prometheus`` run, usually a before/after pair) sees
what the client cannot: queue depth, running batch, KV-cache use, prefix-cache hits, preemptions.
:func:`combine` keeps every benchmark figure and fills in the rest from the telemetry:

* metrics the benchmark lacks (queue, KV use, prefix hits, preemptions, ...) come from the telemetry;
  a latency distribution the benchmark lacks entirely (say ITL) is taken from the server histogram,
  with a note, since server and client scopes differ;
* setup hints the benchmark lacks (model, runtime, KV-cache dtype, engine arguments) come from the
  telemetry, and where both state one and they disagree, :class:`~advisor.errors.Conflict` names both
  values: the scrape was probably taken from another server;
* workload fields the benchmark lacks come from the telemetry;
* notes of both are kept, the telemetry's prefixed.
"""

from __future__ import annotations

import copy
from typing import Any

from advisor.canonical import CanonicalRun, Metrics, Percentiles, Setup, Workload, validate_run
from advisor.errors import Conflict

__all__ = ["combine"]

_LATENCIES = ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms", "queue_ms")
_SETUP_SCALARS = (
    "runtime", "runtime_version", "hardware", "gpu_count", "tensor_parallel", "pipeline_parallel",
    "model", "quantization", "kv_cache_dtype", "max_model_len",
)  # fmt: skip


def _same_model(a: str, b: str) -> bool:
    """Model names that refer to one model: equal ignoring case, or one is the other's repository
    base name ("meta-llama/Llama-3.1-8B-Instruct" and "Llama-3.1-8B-Instruct")."""
    x, y = a.strip().lower(), b.strip().lower()
    return x == y or x.rsplit("/", 1)[-1] == y or y.rsplit("/", 1)[-1] == x


def _same(name: str, a: Any, b: Any) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return _same_model(a, b) if name == "model" else a.strip().lower() == b.strip().lower()
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return abs(float(a) - float(b)) <= 1e-9 * max(abs(float(a)), abs(float(b)), 1.0)
    return bool(a == b)


def _conflict(field: str, bench_value: Any, telemetry_value: Any) -> Conflict:
    return Conflict(
        f"the benchmark says {bench_value!r} but the server telemetry says {telemetry_value!r}; "
        "were both taken from the same server?",
        field=field,
        benchmark=bench_value,
        telemetry=telemetry_value,
    )


def _merge_setup(bench: Setup, telemetry: Setup) -> Setup:
    merged = copy.deepcopy(bench)
    for name in _SETUP_SCALARS:
        ours, theirs = getattr(bench, name), getattr(telemetry, name)
        if theirs is None:
            continue
        if ours is None:
            setattr(merged, name, copy.deepcopy(theirs))
        elif not _same(name, ours, theirs):
            raise _conflict(f"setup.{name}", ours, theirs)
    for key, theirs in telemetry.engine_args.items():
        if key not in bench.engine_args:
            merged.engine_args[key] = theirs
        elif not _same(key, bench.engine_args[key], theirs):
            raise _conflict(f"setup.engine_args.{key}", bench.engine_args[key], theirs)
    return merged


def combine(benchmark: CanonicalRun, telemetry: CanonicalRun) -> CanonicalRun:
    """The benchmark run, with what only the server saw filled in from the telemetry run.

    Neither argument is modified. Raises :class:`~advisor.errors.Conflict` when the two disagree on
    the setup (model, runtime, ...), and :class:`~advisor.errors.InvalidInput` if the result is not a
    valid run.
    """
    out = copy.deepcopy(benchmark)
    out.setup = _merge_setup(benchmark.setup, telemetry.setup)
    notes = out.source.notes
    source_name = telemetry.source.tool or telemetry.source.format or "server telemetry"

    filled: list[str] = []
    for name in Metrics.__struct_fields__:
        ours, theirs = getattr(out.metrics, name), getattr(telemetry.metrics, name)
        if isinstance(ours, Percentiles):
            if name in _LATENCIES and ours.is_empty() and isinstance(theirs, Percentiles) and not theirs.is_empty():
                setattr(out.metrics, name, copy.deepcopy(theirs))
                filled.append(name)
                notes.append(
                    f"{name} from the server's histogram ({source_name}): server-side scope, "
                    "bucket-interpolated percentiles"
                )
            continue
        if ours is None and theirs is not None:
            setattr(out.metrics, name, theirs)
            filled.append(name)
    for name in Workload.__struct_fields__:
        if getattr(out.workload, name) is None and (theirs := getattr(telemetry.workload, name)) is not None:
            setattr(out.workload, name, theirs)
    for key, value in telemetry.labels.items():
        out.labels.setdefault(key, value)
    if out.measured_at is None:
        out.measured_at = telemetry.measured_at
    if filled:
        notes.append(f"from {source_name}: {', '.join(filled)}")
    notes.extend(f"telemetry: {note}" for note in telemetry.source.notes)
    validate_run(out)
    return out
