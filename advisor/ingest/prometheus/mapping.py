"""Server telemetry mapped onto a canonical run (docs/formats.md §9.3, "Prometheus scrapes").

Histogram means are exact (``_sum / _count``); percentiles are bucket estimates, reported only where
the estimate is a measurement: vLLM's ITL buckets start at 10 ms, so sub-10 ms ITL percentiles never
come from here (docs/formats.md §9.3).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from advisor.canonical import CanonicalRun, Metrics, Percentiles, Setup, Source, Workload
from advisor.errors import IngestError
from advisor.ingest.prometheus.engines import TOOL_NAMES
from advisor.ingest.prometheus.histograms import Histogram
from advisor.ingest.prometheus.telemetry import Telemetry

__all__ = ["telemetry_to_run"]

#: Percentiles reported from histograms, with their canonical keys.
_QUANTILES: tuple[tuple[float, str], ...] = (
    (0.5, "p50"),
    (0.9, "p90"),
    (0.95, "p95"),
    (0.99, "p99"),
)


def _histogram_percentiles(hist: Histogram, name: str, scale: float, notes: list[str]) -> Percentiles:
    out = Percentiles()
    mean = hist.mean
    if mean is not None:
        out.mean = mean * scale
    dropped_low: list[str] = []
    dropped_high: list[str] = []
    first_edge = next((b for b in hist.bounds if b > 0), hist.bounds[0])
    for q, key in _QUANTILES:
        est = hist.quantile(q)
        if est is None:
            continue
        if est.reliable:
            setattr(out, key, est.value * scale)
        elif est.first_bucket:
            dropped_low.append(key)
        else:
            dropped_high.append(key)
    if dropped_low:
        notes.append(
            f"{name} {', '.join(dropped_low)} fall in the first histogram bucket "
            f"(≤ {first_edge * scale:g} ms); not reported, as interpolating from 0 would invent them "
            "(use the client tool's figures)"
        )
    if dropped_high:
        top = max((b for b in hist.bounds if not math.isinf(b)), default=0.0)
        notes.append(
            f"{name} {', '.join(dropped_high)} exceed the largest finite bucket (> {top * scale:g} ms); not reported"
        )
    return out


def _ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den <= 0:
        return None
    return num / den


#: vLLM V1's two reasons (``vllm/v1/metrics/loggers.py``, the gauge's own documentation): "capacity"
#: is the scheduler's capacity, whichever binds first (the token budget, ``max_num_seqs``, free KV
#: blocks); "deferred" is a transient hold (LoRA budget, KV transfer, blocked status).
_CAPACITY = "capacity (waiting for scheduling capacity: token budget, max-num-seqs or KV blocks)"
_DEFERRED = "deferred (held by a transient constraint: LoRA budget, KV transfer, blocked status)"


def telemetry_to_run(telemetry: Telemetry) -> CanonicalRun:
    """The canonical run described by server telemetry (docs/formats.md §9.3, "Prometheus scrapes")."""
    t = telemetry
    c = t.counters
    h = t.histograms
    notes = list(t.notes)
    metrics = Metrics()
    latency_fields = (("ttft", "ttft_ms"), ("itl", "itl_ms"), ("tpot", "tpot_ms"), ("e2e", "e2e_ms"))
    used_buckets = False
    for key, attr in (*latency_fields, ("queue", "queue_ms")):
        hist = h.get(key)
        if hist is not None and hist.count > 0:
            setattr(metrics, attr, _histogram_percentiles(hist, attr, 1000.0, notes))
            used_buckets = True
    if used_buckets:
        notes.append(
            "latency percentiles estimated from histogram buckets by linear interpolation inside the "
            "bucket (as Prometheus histogram_quantile): approximate; means are exact (_sum/_count)"
        )
    if "ttft" in h and h["ttft"].count > 0:
        notes.append(
            "ttft_ms is server-side: from the request's arrival at the engine, queue included"
            if t.engine == "vllm"
            else "ttft_ms is server-side (the engine's histogram), not what clients measured"
        )

    # Per-sequence speeds.
    prefill_time = h.get("prefill_time")
    if t.engine == "llamacpp":
        metrics.prefill_tok_s = _ratio(c.get("prompt_tokens"), c.get("prompt_seconds"))
        decode = _ratio(c.get("generation_tokens"), c.get("predicted_seconds"))
        if decode:
            metrics.decode_tok_s = decode
            metrics.tpot_ms = Percentiles(mean=1000.0 / decode)
    elif prefill_time is not None and prefill_time.sum:
        metrics.prefill_tok_s = _ratio(c.get("prompt_tokens"), prefill_time.sum)
        if metrics.prefill_tok_s is not None:
            notes.append("prefill_tok_s = prompt tokens / summed request prefill time: approximate under batching")
    if metrics.decode_tok_s is None:
        if metrics.tpot_ms.mean:
            metrics.decode_tok_s = 1000.0 / metrics.tpot_ms.mean
        elif metrics.itl_ms.mean:
            metrics.decode_tok_s = 1000.0 / metrics.itl_ms.mean
            notes.append("decode_tok_s = 1000 / mean ITL (token-weighted; no per-request TPOT histogram)")

    # Gauges.
    gauges = t.gauges
    if "waiting" in gauges:
        metrics.queue_waiting_mean, metrics.queue_waiting_max = gauges["waiting"].mean, gauges["waiting"].max
    if "running" in gauges:
        metrics.running_mean, metrics.running_max = gauges["running"].mean, gauges["running"].max
    if "kv_usage" in gauges:
        kv = gauges["kv_usage"]
        if kv.max > 1.0 or kv.mean < 0:
            raise IngestError(f"KV-cache usage must be a fraction in 0..1, got {kv.max:g}", field="kv_usage")
        metrics.kv_cache_usage_mean, metrics.kv_cache_usage_max = kv.mean, kv.max
        if t.engine == "sglang":
            notes.append("KV use from sglang:token_usage (share of the KV pool's tokens in use)")

    if any(gauges[k].max > 0 for k in ("waiting_capacity", "waiting_deferred") if k in gauges):
        parts = [
            f"{reason} mean {gauges[key].mean:g}, max {gauges[key].max:g}"
            for key, reason in (("waiting_capacity", _CAPACITY), ("waiting_deferred", _DEFERRED))
            if key in gauges
        ]
        notes.append("waiting requests by reason (vllm:num_requests_waiting_by_reason): " + "; ".join(parts))

    # Prefix cache.
    if t.engine == "vllm":
        metrics.prefix_cache_hit_rate = _ratio(c.get("prefix_cache_hits"), c.get("prefix_cache_queries"))
        by_source = [c.get(k) for k in ("computed_prompt_tokens", "cached_prompt_tokens", "transferred_prompt_tokens")]
        known = [v for v in by_source if v is not None]
        if metrics.prefix_cache_hit_rate is None and c.get("cached_prompt_tokens") is not None and sum(known) > 0:
            metrics.prefix_cache_hit_rate = c["cached_prompt_tokens"] / sum(known)
            notes.append("prefix_cache_hit_rate = local_cache_hit / all prompt tokens of vllm:prompt_tokens_by_source")
        if (transferred := c.get("transferred_prompt_tokens")) and sum(known) > 0:
            notes.append(
                f"{transferred:g} of {sum(known):g} prompt tokens arrived by KV transfer (external_kv_transfer): "
                "a disaggregated decode worker, whose prefill ran elsewhere"
            )
    elif t.engine == "sglang":
        metrics.prefix_cache_hit_rate = _ratio(c.get("cached_prompt_tokens"), c.get("prompt_tokens"))
    elif t.engine == "llamacpp" and c.get("cached_prompt_tokens") is not None:
        cached = c["cached_prompt_tokens"]
        metrics.prefix_cache_hit_rate = _ratio(cached, cached + c.get("prompt_tokens", 0.0))
    if metrics.prefix_cache_hit_rate is None and "prefix_hit_rate" in gauges:
        metrics.prefix_cache_hit_rate = gauges["prefix_hit_rate"].mean
    if metrics.prefix_cache_hit_rate is not None:
        metrics.prefix_cache_hit_rate = min(max(metrics.prefix_cache_hit_rate, 0.0), 1.0)

    if "preemptions" in c:
        metrics.preemptions = c["preemptions"]
    completed = c.get("requests_completed")
    aborted = c.get("requests_aborted")
    if completed is not None:
        metrics.requests_completed = round(completed)
    if aborted is not None:
        metrics.requests_failed = round(aborted)

    duration = t.duration_s
    if duration:
        metrics.duration_s = duration
        if "prompt_tokens" in c:
            metrics.input_throughput_tok_s = c["prompt_tokens"] / duration
        if "generation_tokens" in c:
            metrics.output_throughput_tok_s = c["generation_tokens"] / duration
        if completed is not None:
            metrics.request_throughput_rps = completed / duration

    workload = Workload()
    for key, attr in (("prompt_len", "prompt_tokens_mean"), ("output_len", "output_tokens_mean")):
        hist = h.get(key)
        if hist is not None and hist.mean is not None:
            setattr(workload, attr, hist.mean)
    if completed is not None:
        workload.num_requests = round(completed + (aborted or 0.0))

    setup = Setup(runtime=t.engine, model=t.model)
    _apply_config(setup, t.config)
    return CanonicalRun(
        measured_at=t.ended_at,
        setup=setup,
        workload=workload,
        metrics=metrics,
        source=Source(format="prometheus", tool=TOOL_NAMES[t.engine], notes=notes),
    )


def _apply_config(setup: Setup, config: Mapping[str, str]) -> None:
    """vLLM's ``cache_config_info`` labels: the only place a scrape states the KV pool settings."""
    if not config:
        return
    if dtype := config.get("cache_dtype"):
        setup.kv_cache_dtype = dtype
    if (flag := config.get("enable_prefix_caching")) in ("True", "False"):
        setup.engine_args["enable_prefix_caching"] = flag == "True"
    for key, cast in (("gpu_memory_utilization", float), ("block_size", int), ("num_gpu_blocks", int)):
        raw = config.get(key)
        if raw is None:
            continue
        try:
            setup.engine_args[key] = cast(float(raw)) if cast is int else cast(raw)
        except ValueError:
            continue
