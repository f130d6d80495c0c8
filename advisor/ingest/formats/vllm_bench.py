"""vLLM ``vllm bench serve --save-result`` and the legacy ``benchmarks/benchmark_serving.py`` JSON.

Two format ids share one reader (docs/formats.md §1, §9.3):

* ``vllm_bench``: the current CLI. One JSON object, a JSON-Lines file written with
  ``--append-result`` (one run per line), or a ``vllm bench sweep`` ``summary.json`` (a JSON array).
* ``vllm_legacy``: the old script. Recognised by its misspelt ``"request_goodput:"`` key, or by
  lacking both ``failed`` and ``endpoint_type`` (both newer). Its files always carry the per-request
  arrays (``ttfts``/``itls`` in **seconds**, ``errors``), because the script deleted them from the
  wrong dict.

Pitfalls handled here: ``request_rate`` may be the string ``"inf"``; ``--metadata KEY=VALUE`` pairs
are merged into the top level as strings and become labels; ``date`` is naive local time; a run in
which every request failed reports every statistic as ``0.0`` (kept out: no latency at all is the
truth, zeros would look like the fastest server ever measured).
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import Any, ClassVar

from advisor.canonical import CanonicalRun, Metrics, Percentiles, Setup, Source, Workload
from advisor.errors import IngestError
from advisor.ingest.base import Input, ParserBase
from advisor.ingest.derive import decode_from_tpot, prefill_from_ttft
from advisor.ingest.runtimes import runtime_from_backend
from advisor.ingest.statistics import mean_of, summarize
from advisor.ingest.units import to_ms
from advisor.ingest.values import as_float, as_int

__all__ = ["PARSERS", "VllmBenchParser", "VllmLegacyParser", "parse_vllm_result"]

# Percentile-block keys: mean_ttft_ms, median_tpot_ms, std_itl_ms, p99_e2el_ms, p99.9_ttft_ms, ...
_STAT_KEY = re.compile(r"^(mean|median|std|p\d+(?:\.\d+)?)_([a-z0-9_]+?)_ms$")

# Keys the tool itself writes; any other scalar top-level key is user metadata (`--metadata`).
_KNOWN_KEYS = frozenset(
    {
        "date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts",
        "request_rate", "burstiness", "max_concurrency", "ramp_up_strategy", "ramp_up_start_rps",
        "ramp_up_end_rps", "duration", "completed", "failed", "total_input_tokens",
        "total_output_tokens", "request_throughput", "request_goodput", "request_goodput:",
        "output_throughput", "total_token_throughput", "max_output_tokens_per_s",
        "max_concurrent_requests", "rtfx", "input_lens", "output_lens", "ttfts", "itls",
        "start_times", "generated_texts", "errors", "latencies", "queue_times", "probe_completed",
        "probe_failed", "probe_median_e2el_ms", "probe_p99_e2el_ms", "probe_max_e2el_ms",
        "rps_change_events", "best_of", "use_beam_search", "total_input_sequences",
        "input_sequence_throughput", "spec_decode_acceptance_rate", "spec_decode_acceptance_length",
        "spec_decode_num_drafts", "spec_decode_draft_tokens", "spec_decode_accepted_tokens",
        "spec_decode_per_position_acceptance_rates",
    }
)  # fmt: skip

# Families of tool-written keys (speculative decoding, diffusion LMs, probes) that vary by release.
_TOOL_PREFIXES = ("spec_decode_", "diffusion_", "probe_", "ramp_up_")

# `vllm bench sweep` merges the server parameters it varied into each result. These are vLLM engine
# arguments; any other merged key stays a label.
_ENGINE_ARG_KEYS = frozenset(
    {
        "max_num_seqs", "max_num_batched_tokens", "gpu_memory_utilization", "enable_prefix_caching",
        "enable_chunked_prefill", "block_size", "swap_space", "cpu_offload_gb",
        "num_scheduler_steps", "enforce_eager", "pipeline_parallel_size", "data_parallel_size",
    }
)  # fmt: skip

# Percentile-block metric name → canonical metrics field. `client_queue_time` and
# `e2el_including_client_queue` are newer client-side extras with no canonical home.
_METRIC_FIELDS = {"ttft": "ttft_ms", "tpot": "tpot_ms", "itl": "itl_ms", "e2el": "e2e_ms"}


# How each statistic is rebuilt from the per-request arrays, for the source note.
_ARRAY_METHOD = {
    "ttft_ms": "ttfts of successful requests, s → ms",
    "tpot_ms": "per request: sum of chunk gaps ÷ (output tokens − 1), s → ms",
    "itl_ms": "every chunk gap of successful requests pooled, s → ms",
    "e2e_ms": "latencies of successful requests, s → ms",
}


def _is_vllm_object(doc: object) -> bool:
    # docs/formats.md §9.4 rule 7: date, model_id, num_prompts and any *_ttft_ms or *_e2el_ms key.
    if not isinstance(doc, dict):
        return False
    if not all(k in doc for k in ("date", "model_id", "num_prompts")):
        return False
    return any(k.endswith(("_ttft_ms", "_e2el_ms")) for k in doc if isinstance(k, str))


def _is_legacy(doc: dict[str, Any]) -> bool:
    # `endpoint_type` arrived with `vllm bench serve`; the Sep-2025 CLI file in the fixtures has it
    # but lacks `failed`, so "lacks failed" alone would misfile it as legacy.
    return "request_goodput:" in doc or ("failed" not in doc and "endpoint_type" not in doc)


def _sniff(records: list[Any] | None, *, legacy: bool) -> bool:
    if not records or not all(_is_vllm_object(r) for r in records):
        return False
    return all(_is_legacy(r) == legacy for r in records)


def _naive_date(value: object, notes: list[str]) -> datetime | None:
    # `date` is datetime.now().strftime("%Y%m%d-%H%M%S"): local time, zone unknown.
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.strptime(value.strip(), "%Y%m%d-%H%M%S")
    except ValueError:
        notes.append(f"date {value!r} is not in the %Y%m%d-%H%M%S form; measured_at left empty")
        return None
    notes.append("date is the benchmark host's local time without a zone; assumed UTC")
    return parsed.replace(tzinfo=UTC)


def _summary_stats(doc: dict[str, Any], field_prefix: str) -> dict[str, Percentiles]:
    """The percentile block, grouped by metric, in canonical keys (values are already ms)."""
    grouped: dict[str, dict[str, float]] = {}
    for key, raw in doc.items():
        if not isinstance(key, str):
            continue
        match = _STAT_KEY.match(key)
        if match is None:
            continue
        stat, metric = match.groups()
        target = _METRIC_FIELDS.get(metric)
        if target is None:
            continue
        value = to_ms(raw, "ms", f"{field_prefix}{key}")
        if value is None:
            continue
        if stat == "median":
            canon = "p50"
        elif stat == "std":
            canon = "std"
        elif stat == "mean":
            canon = "mean"
        else:
            number = stat[1:]
            canon = "p" + number.replace(".", "_")
            if canon not in Percentiles.__struct_fields__:
                continue
        grouped.setdefault(target, {})[canon] = value
    return {target: Percentiles(**values) for target, values in grouped.items()}


def _successful(doc: dict[str, Any], n: int) -> list[bool] | None:
    """Which of the n per-request entries succeeded, from `errors` ("" means success)."""
    errors = doc.get("errors")
    if isinstance(errors, list) and len(errors) == n:
        return [not e for e in errors]
    return None


def _from_arrays(doc: dict[str, Any], field_prefix: str, notes: list[str]) -> dict[str, Percentiles]:
    """Statistics computed from the per-request arrays (seconds), successful requests only."""
    out: dict[str, Percentiles] = {}
    ttfts = doc.get("ttfts")
    itls = doc.get("itls")
    output_lens = doc.get("output_lens")
    latencies = doc.get("latencies")
    if isinstance(ttfts, list) and ttfts:
        ok = _successful(doc, len(ttfts))
        if ok is not None:
            values = [_seconds_to_ms(t, f"{field_prefix}ttfts[{i}]") for i, t in enumerate(ttfts)]
            # A successful request with TTFT 0.0 produced no streamed token at all.
            chosen = [v for v, good in zip(values, ok, strict=True) if good and v is not None and v > 0]
            if chosen:
                out["ttft_ms"] = summarize(chosen)
            if isinstance(itls, list) and len(itls) == len(ttfts):
                gaps: list[float] = []
                tpots: list[float] = []
                for i, (row, good) in enumerate(zip(itls, ok, strict=True)):
                    if not good or not isinstance(row, list):
                        continue
                    row_ms = [_seconds_to_ms(g, f"{field_prefix}itls[{i}]") for g in row]
                    clean = [g for g in row_ms if g is not None]
                    gaps.extend(clean)
                    n_out = as_int(output_lens[i]) if isinstance(output_lens, list) else None
                    if n_out is not None and n_out > 1 and clean:
                        # latency - ttft is the sum of the chunk gaps, so this is vLLM's TPOT.
                        tpots.append(sum(clean) / (n_out - 1))
                if gaps:
                    out["itl_ms"] = summarize(gaps)
                if tpots:
                    out["tpot_ms"] = summarize(tpots)
    if isinstance(latencies, list) and latencies:
        ok = _successful(doc, len(latencies))
        failed = as_int(doc.get("failed"))
        if ok is None and failed == 0:
            ok = [True] * len(latencies)
        if ok is not None:
            values = [_seconds_to_ms(t, f"{field_prefix}latencies[{i}]") for i, t in enumerate(latencies)]
            chosen = [v for v, good in zip(values, ok, strict=True) if good and v is not None and v > 0]
            if chosen:
                out["e2e_ms"] = summarize(chosen)
        else:
            notes.append("latencies not used: failed requests cannot be told apart without errors[]")
    return out


def _seconds_to_ms(value: object, field: str) -> float | None:
    return to_ms(value, "s", field)


def _merge(summary: Percentiles, computed: Percentiles) -> Percentiles | None:
    """Fill statistics the summary lacks from the arrays, but only when both describe the same
    data (their means agree within 1 %); otherwise the arrays are a different population."""
    if summary.mean is None or computed.mean is None:
        return None
    if not math.isclose(summary.mean, computed.mean, rel_tol=0.01, abs_tol=1e-6):
        return None
    merged = {f: getattr(summary, f) for f in Percentiles.__struct_fields__}
    added = False
    for f in Percentiles.__struct_fields__:
        if merged[f] is None and getattr(computed, f) is not None:
            merged[f] = getattr(computed, f)
            added = True
    return Percentiles(**merged) if added else None


#: Dataset options that set the output length each request asks for (``--random-output-len`` and
#: kin). The result file holds them only where ``vllm bench sweep`` merged its bench parameters, or
#: ``--metadata random_output_len=N`` put them, at the top level.
_REQUESTED_OUTPUT_KEYS = ("random_output_len", "sonnet_output_len", "sharegpt_output_len", "output_len")


def _requested_output(doc: dict[str, Any], field_prefix: str) -> float | None:
    for key in _REQUESTED_OUTPUT_KEYS:
        value = doc.get(key)
        if isinstance(value, bool) or value is None:
            continue
        try:
            requested = as_float(value, f"{field_prefix}{key}")
        except IngestError:
            continue  # a free-text label, not a length
        if requested is not None and requested > 0:
            return requested
    return None


def parse_vllm_result(doc: dict[str, Any], *, legacy: bool, field_prefix: str = "") -> CanonicalRun:
    """One vLLM result object as a canonical run. ``field_prefix`` locates it in a multi-run file
    (``"[2]."``) for error messages."""
    notes: list[str] = []
    labels: dict[str, str] = {}
    engine_args: dict[str, Any] = {}
    for key, value in doc.items():
        if not isinstance(key, str) or key in _KNOWN_KEYS or key.startswith(_TOOL_PREFIXES) or _STAT_KEY.match(key):
            continue
        if key in _ENGINE_ARG_KEYS and isinstance(value, int | float | bool):
            engine_args[key] = value
        elif isinstance(value, bool):
            labels[key] = "true" if value else "false"
        elif isinstance(value, str | int | float):
            labels[key] = str(value)
    if isinstance(doc.get("label"), str) and doc["label"]:
        labels.setdefault("label", doc["label"])

    backend = doc.get("backend", doc.get("endpoint_type"))
    setup = Setup(
        runtime=runtime_from_backend(backend),
        model=doc["model_id"] if isinstance(doc.get("model_id"), str) and doc["model_id"] else None,
        engine_args=engine_args,
    )
    if isinstance(backend, str) and setup.runtime is None:
        notes.append(f"backend {backend!r} names the client API, not the server runtime")

    completed = as_int(doc.get("completed"), f"{field_prefix}completed")
    failed = as_int(doc.get("failed"), f"{field_prefix}failed")
    if failed is None and isinstance(doc.get("errors"), list):
        failed = sum(1 for e in doc["errors"] if e)
    for name, value in (("completed", completed), ("failed", failed)):
        if value is not None and value < 0:
            raise IngestError("cannot be negative", field=f"{field_prefix}{name}")

    rate = as_float(doc.get("request_rate"), f"{field_prefix}request_rate", allow_inf=True)
    if rate is not None and math.isinf(rate):
        notes.append("request_rate is inf: every request was sent at once")
        rate = None
    workload = Workload(
        num_requests=as_int(doc.get("num_prompts")),
        concurrency=as_float(doc.get("max_concurrency")),
        request_rate=rate,
        output_tokens_requested=_requested_output(doc, field_prefix),
    )
    peak = as_float(doc.get("max_concurrent_requests"), f"{field_prefix}max_concurrent_requests")
    if workload.concurrency is None and peak is not None and peak > 0:
        # No --max-concurrency cap: the client's own count of requests in flight at once is what the
        # run implies (newer vLLM releases write it as max_concurrent_requests, docs/formats.md §1.2).
        workload.concurrency = peak
        notes.append(
            f"concurrency {peak:g} derived from max_concurrent_requests (the most requests in flight at "
            "once, as the client counted them; no --max-concurrency cap was set)"
        )
    total_in = as_float(doc.get("total_input_tokens"))
    total_out = as_float(doc.get("total_output_tokens"))
    if completed:
        if total_in is not None:
            workload.prompt_tokens_mean = total_in / completed
        if total_out:
            workload.output_tokens_mean = total_out / completed
        elif total_out == 0:
            notes.append("the completed requests returned no output tokens")

    metrics = Metrics(
        requests_completed=completed,
        requests_failed=failed,
        duration_s=as_float(doc.get("duration")),
    )
    if completed == 0:
        # Every statistic in such a file is 0.0 by construction (np.mean of an empty list or 0).
        notes.append("no request completed: latency and throughput statistics are absent")
    else:
        metrics.request_throughput_rps = as_float(doc.get("request_throughput"))
        metrics.output_throughput_tok_s = as_float(doc.get("output_throughput"))
        metrics.total_throughput_tok_s = as_float(doc.get("total_token_throughput"))
        summary = _summary_stats(doc, field_prefix)
        computed = _from_arrays(doc, field_prefix, notes)
        for target in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
            stats = summary.get(target)
            if stats is not None and all(getattr(stats, f) in (None, 0.0) for f in Percentiles.__struct_fields__):
                notes.append(f"{target} statistics are all 0.0 (nothing measured); dropped")
                stats = None
            extra = computed.get(target)
            if stats is None and extra is not None:
                notes.append(f"{target} computed from the per-request arrays ({_ARRAY_METHOD[target]})")
                stats = extra
            elif stats is not None and extra is not None:
                merged = _merge(stats, extra)
                if merged is not None:
                    notes.append(f"{target}: statistics missing from the summary computed from the arrays")
                    stats = merged
            if stats is not None:
                setattr(metrics, target, stats)
        decode_from_tpot(metrics)
        if isinstance(doc.get("input_lens"), list) and workload.prompt_tokens_mean is None:
            lens = [as_float(x) for x in doc["input_lens"]]
            clean = [x for x in lens if x is not None]
            if clean:
                workload.prompt_tokens_mean = mean_of(clean)
        prefill_from_ttft(metrics, workload, notes)

    return CanonicalRun(
        measured_at=_naive_date(doc.get("date"), notes),
        labels=labels,
        setup=setup,
        workload=workload,
        metrics=metrics,
        source=Source(notes=notes),
    )


class _VllmBase(ParserBase):
    legacy: ClassVar[bool]
    priority = 70

    def sniff(self, inp: Input) -> bool:
        return _sniff(self.records(inp), legacy=self.legacy)

    def records(self, inp: Input) -> list[Any] | None:
        return inp.records

    def parse_record(self, record: Any, prefix: str) -> list[CanonicalRun]:
        if not _is_vllm_object(record):
            raise self.fail("not a vLLM benchmark result object", self.record_field(prefix))
        return [parse_vllm_result(record, legacy=self.legacy, field_prefix=prefix)]


class VllmBenchParser(_VllmBase):
    format_id = "vllm_bench"
    description = "vLLM `vllm bench serve --save-result` JSON (also --append-result JSON-Lines, sweep summary)"
    tool = "vllm bench serve"
    legacy = False


class VllmLegacyParser(_VllmBase):
    format_id = "vllm_legacy"
    description = "vLLM legacy benchmarks/benchmark_serving.py --save-result JSON"
    tool = "vllm benchmark_serving.py"
    legacy = True
    priority = 69


PARSERS = [VllmBenchParser(), VllmLegacyParser()]
