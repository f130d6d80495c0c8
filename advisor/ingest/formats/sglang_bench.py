"""SGLang ``python -m sglang.bench_serving --output-file`` JSON-Lines (docs/formats.md §7).

Each run appends one line, so a file is a sweep: one canonical run per line. The line is vLLM's
result shape with SGLang's differences: ``e2e_latency`` instead of ``e2el``, a fixed percentile set,
``concurrency`` is the *observed* mean (Little's law), ``input_throughput`` is given, and
``request_rate`` is a bare ``Infinity`` token (``Input`` decodes it with the lenient stdlib reader).

Newer versions embed ``server_info`` (the server's arguments); its model path, version, parallelism
and the scheduling knobs the rules reason about are read from it. With prefill/decode disaggregation
the router returns the arguments of every worker; the decode worker's are used, because decode sets
the per-token latency.
"""

from __future__ import annotations

import math
import re
from typing import Any

from advisor.canonical import CanonicalRun, Metrics, Percentiles, Setup, Source, Workload
from advisor.errors import IngestError
from advisor.ingest.base import Input, ParserBase
from advisor.ingest.derive import decode_from_tpot, drop_unstreamed_timings, not_streamed, prefill_from_ttft
from advisor.ingest.runtimes import runtime_from_backend
from advisor.ingest.units import to_ms
from advisor.ingest.values import as_dict, as_float, as_int

__all__ = ["PARSERS", "SglangBenchParser"]

_STAT_KEY = re.compile(r"^(mean|median|std|p\d+(?:\.\d+)?)_(ttft|tpot|itl|e2e_latency)_ms$")
_METRIC_FIELDS = {"ttft": "ttft_ms", "tpot": "tpot_ms", "itl": "itl_ms", "e2e_latency": "e2e_ms"}

# SGLang server arguments worth keeping as engine_args (SGLang's own names): the prefill budget,
# the radix (prefix) cache, the KV pool size and the batch cap.
_ENGINE_ARGS = (
    "chunked_prefill_size",
    "max_prefill_tokens",
    "disable_radix_cache",
    "mem_fraction_static",
    "max_running_requests",
    "max_total_tokens",
    "schedule_policy",
    "enable_mixed_chunk",
    "dp_size",
    "ep_size",
    "speculative_algorithm",
    "disaggregation_mode",
)


def _is_sglang_record(doc: object) -> bool:
    # docs/formats.md §9.4 rule 6.
    return isinstance(doc, dict) and "mean_e2e_latency_ms" in doc and "dataset_name" in doc


def _server_args(server_info: object) -> tuple[dict[str, Any], str | None]:
    """The server-argument dict and a note on where it came from."""
    info = as_dict(server_info)
    if "model_path" in info:
        return info, None
    for role in ("decode", "internal_states", "prefill"):
        entries = info.get(role)
        if isinstance(entries, list) and entries and isinstance(entries[0], dict) and "model_path" in entries[0]:
            where = f"server_info.{role}[0]"
            return entries[0], f"server arguments read from {where} (disaggregated or routed deployment)"
    return {}, None


def _role_versions(info: object, labels: dict[str, str], notes: list[str]) -> None:
    """Each worker role's SGLang version and parallelism in a disaggregated deployment, as labels:
    the setup keeps one worker's (decode's), so the other's must not be lost."""
    if not isinstance(info, dict):
        return
    versions: dict[str, str] = {}
    for role in ("prefill", "decode"):
        entries = info.get(role)
        if not (isinstance(entries, list) and entries and isinstance(entries[0], dict)):
            continue
        found = {str(e["version"]) for e in entries if isinstance(e, dict) and isinstance(e.get("version"), str)}
        if found:
            versions[role] = labels[f"runtime_version_{role}"] = ",".join(sorted(found))
        tps = sorted({t for e in entries if isinstance(e, dict) and (t := as_int(e.get("tp_size"))) is not None})
        if tps:
            labels[f"tensor_parallel_{role}"] = ",".join(str(t) for t in tps)
        labels[f"workers_{role}"] = str(len(entries))
    if len(set(versions.values())) > 1:
        notes.append(
            "the prefill and decode workers run different SGLang versions ("
            + ", ".join(f"{role} {v}" for role, v in versions.items())
            + "): runtime_version is the decode worker's, each role's is in labels"
        )


def _stats(doc: dict[str, Any], prefix: str) -> dict[str, Percentiles]:
    grouped: dict[str, dict[str, float]] = {}
    for key, raw in doc.items():
        match = _STAT_KEY.match(key) if isinstance(key, str) else None
        if match is None:
            continue
        stat, metric = match.groups()
        value = to_ms(raw, "ms", f"{prefix}{key}")
        if value is None:
            continue
        if stat in ("mean", "std"):
            canon = stat
        elif stat == "median":
            canon = "p50"
        else:
            canon = "p" + stat[1:].replace(".", "_")
            if canon not in Percentiles.__struct_fields__:
                continue
        grouped.setdefault(_METRIC_FIELDS[metric], {})[canon] = value
    return {field: Percentiles(**values) for field, values in grouped.items()}


def parse_sglang_record(doc: dict[str, Any], prefix: str = "") -> CanonicalRun:
    """One bench_serving line as a canonical run."""
    notes: list[str] = []
    args, where = _server_args(doc.get("server_info"))
    if where:
        notes.append(where)
    backend = doc.get("backend")
    runtime = runtime_from_backend(backend)
    if runtime is None and args:
        runtime = "sglang"  # only an SGLang server answers /get_server_info
    model = args.get("served_model_name") or args.get("model_path")
    setup = Setup(
        runtime=runtime,
        runtime_version=args.get("version") if isinstance(args.get("version"), str) else None,
        model=model if isinstance(model, str) and model else None,
        tensor_parallel=as_int(args.get("tp_size")),
        pipeline_parallel=as_int(args.get("pp_size")),
        quantization=args["quantization"] if isinstance(args.get("quantization"), str) else None,
        kv_cache_dtype=args["kv_cache_dtype"] if isinstance(args.get("kv_cache_dtype"), str) else None,
        max_model_len=as_int(args.get("context_length")),
        # SGLang prints some unset options as the string "null".
        engine_args={k: args[k] for k in _ENGINE_ARGS if args.get(k) not in (None, "null")},
    )

    labels: dict[str, str] = {}
    if isinstance(doc.get("tag"), str) and doc["tag"]:
        labels["tag"] = doc["tag"]
    _role_versions(doc.get("server_info"), labels, notes)

    rate_raw = doc.get("request_rate")
    rate = as_float(rate_raw, f"{prefix}request_rate", allow_inf=True)
    if rate is not None and math.isinf(rate):
        notes.append("request_rate is Infinity: every request was sent at once")
        rate = None
    elif rate_raw == "trace":
        notes.append("request_rate is 'trace': requests followed recorded timestamps")
    completed = as_int(doc.get("completed"), f"{prefix}completed")
    if completed is not None and completed < 0:
        raise IngestError("cannot be negative", field=f"{prefix}completed")

    # bench_serving writes no prompt count and no failure count: only the completed requests.
    workload = Workload(
        request_rate=rate,
        dataset=doc["dataset_name"] if isinstance(doc.get("dataset_name"), str) else None,
    )
    configured = as_float(doc.get("max_concurrency"))
    observed = as_float(doc.get("concurrency"))
    if configured is not None:
        workload.concurrency = configured
    elif observed is not None:
        workload.concurrency = observed
        notes.append("workload.concurrency is the observed mean (no --max-concurrency cap was set)")
    if completed:
        total_in = as_float(doc.get("total_input_tokens"))
        total_out = as_float(doc.get("total_output_tokens"))
        workload.prompt_tokens_mean = total_in / completed if total_in else None
        workload.output_tokens_mean = total_out / completed if total_out else None

    metrics = Metrics(requests_completed=completed, duration_s=as_float(doc.get("duration")))
    if completed == 0:
        notes.append("no request completed: latency and throughput statistics are absent")
    else:
        metrics.request_throughput_rps = as_float(doc.get("request_throughput"))
        metrics.input_throughput_tok_s = as_float(doc.get("input_throughput"))
        metrics.output_throughput_tok_s = as_float(doc.get("output_throughput"))
        metrics.total_throughput_tok_s = as_float(doc.get("total_throughput"))
        _derive_rates(metrics, doc, completed, notes)
        by_field = _stats(doc, prefix)
        unstreamed = not_streamed(by_field.get("itl_ms"), workload.output_tokens_mean)
        for field, stats in by_field.items():
            if all(getattr(stats, f) in (None, 0.0) for f in Percentiles.__struct_fields__):
                notes.append(f"{field} statistics are all 0.0 (nothing measured); dropped")
                continue
            setattr(metrics, field, stats)
        if unstreamed:
            drop_unstreamed_timings(metrics, notes)
        decode_from_tpot(metrics)
        prefill_from_ttft(metrics, workload, notes)

    return CanonicalRun(
        labels=labels,
        setup=setup,
        workload=workload,
        metrics=metrics,
        source=Source(notes=notes),
    )


def _derive_rates(metrics: Metrics, doc: dict[str, Any], completed: int | None, notes: list[str]) -> None:
    """The rates early bench_serving releases did not write (late 2024: only ``output_throughput``),
    computed as the tool computes them (``calculate_metrics``: ``completed / dur_s``, ``total_input /
    dur_s``, ``(total_input + total_output) / dur_s``; checked: python/sglang/bench_serving.py @ 0033168f)."""
    duration = metrics.duration_s
    if not completed or not duration or duration <= 0:
        return
    total_in, total_out = as_float(doc.get("total_input_tokens")), as_float(doc.get("total_output_tokens"))
    derived: list[str] = []
    if metrics.request_throughput_rps is None:
        metrics.request_throughput_rps = completed / duration
        derived.append("request_throughput = completed / duration")
    if metrics.input_throughput_tok_s is None and total_in is not None:
        metrics.input_throughput_tok_s = total_in / duration
        derived.append("input_throughput = total_input_tokens / duration")
    if metrics.total_throughput_tok_s is None and total_in is not None and total_out is not None:
        metrics.total_throughput_tok_s = (total_in + total_out) / duration
        derived.append("total_throughput = (total_input_tokens + total_output_tokens) / duration")
    if derived:
        notes.append("not in this bench_serving release's record, computed as the tool does: " + "; ".join(derived))


class SglangBenchParser(ParserBase):
    format_id = "sglang_bench"
    description = "SGLang `python -m sglang.bench_serving --output-file` JSON-Lines (one run per line)"
    tool = "sglang.bench_serving"
    priority = 60

    def sniff(self, inp: Input) -> bool:
        records = self.records(inp)
        return bool(records) and all(_is_sglang_record(r) for r in records or ())

    def records(self, inp: Input) -> list[Any] | None:
        # One result per line; a JSON array is not a file bench_serving writes.
        doc = inp.json
        return [doc] if isinstance(doc, dict) else inp.json_lines

    def parse_record(self, record: Any, prefix: str) -> list[CanonicalRun]:
        if not _is_sglang_record(record):
            raise self.fail("line is not a bench_serving result", self.record_field(prefix))
        return [parse_sglang_record(record, prefix)]


PARSERS = [SglangBenchParser()]
