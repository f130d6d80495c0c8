"""NVIDIA genai-perf ``profile_export_genai_perf.json`` and aiperf ``profile_export_aiperf.json``
(docs/formats.md §6.1, §6.2).

Both write one object per metric with its unit inside (``{"unit": "ms", "avg": …, "p50": …}``); the
unit is read, never assumed. Latency names (docs/formats.md §9.2):

* ``inter_token_latency`` is per request ``(latency − ttft) / (osl − 1)``: TPOT in both tools;
* aiperf ``inter_chunk_latency`` is the pooled gap between streamed chunks: ITL. genai-perf's summary
  has no ITL.

aiperf changed layout twice: June 2025 files nest the metrics under ``records`` keyed by display name
("Time to First Token"), October 2025 files key ``records`` by tag, later files put the tags at the
top level. All three are read. Schema 1.4 adds ``warmup_metrics`` (left out: the run is the profiling
phase); 1.5 renames the DCGM telemetry metrics to ``nvidia_*`` (``amd_*`` on AMD) and adds a per-GPU
``platform``; only ``gpu_name`` is read from the telemetry, which neither version renamed.

From aiperf 0.8 (schema 1.0) ``input_config`` is the new config's shape: the model is
``models.items[].name`` (the served name; ``tokenizer.name`` is kept as a label) and the load is
``phases[]``, one ``{name, type, exclude_from_results, requests, concurrency | rate}`` per phase; the
phase not excluded from the results (the profiling phase) gives the concurrency and the rate, as in
two real files, ai-dynamo/aiperf ``tests/_artifacts/audit/baseline-chat/bare/profile_export_aiperf.json``
@ ``139b8f35769980ced4a94fdeef9a6ca770ff932c`` (0.8.0) and anud18/qwen36-vllm-aiperf-benchmark
``results/nvfp4/5090/agent/c2/profile_export_aiperf.json`` @ ``d254ffc72ef9236ee68c01172b74d8261396a0fd``
(0.10.0, schema 1.3, a warm-up phase with ``exclude_from_results``).
"""

from __future__ import annotations

import re
from typing import Any

from advisor.canonical import CanonicalRun, Metrics, Percentiles, Setup, Source, Workload
from advisor.errors import IngestError
from advisor.ingest.base import Input, ParserBase
from advisor.ingest.derive import decode_from_tpot, prefill_from_ttft
from advisor.ingest.runtimes import runtime_from_backend
from advisor.ingest.stat_names import percentiles_from_mapping
from advisor.ingest.units import TIME_UNITS_MS, iso_to_utc
from advisor.ingest.values import as_dict, as_float, as_int, dig

__all__ = ["PARSERS", "AiperfParser", "GenaiPerfParser"]

# aiperf tags (and display names, normalised) → the genai-perf-style names used below.
_ALIASES = {
    "ttft": "time_to_first_token",
    "ttst": "time_to_second_token",
    "ttlt": "time_to_last_token",
    "icl": "inter_chunk_latency",
    "itl": "inter_token_latency",
}
_AIPERF_MARKERS = ("benchmark_duration", "was_cancelled", "inter_chunk_latency")


def _normalise_name(name: str) -> str:
    tag = re.sub(r"[^a-z0-9]+", "_", name.strip().lower()).strip("_")
    return _ALIASES.get(tag, tag)


def _metric_objects(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every ``{unit, avg, …}`` metric object, keyed by its genai-perf-style name."""
    found: dict[str, dict[str, Any]] = {}
    records = doc.get("records")
    if isinstance(records, dict):
        for key, value in records.items():
            if isinstance(value, dict) and "unit" in value:
                name = value.get("tag") or value.get("name") or key
                found[_normalise_name(str(name))] = value
    for key, value in doc.items():
        if isinstance(key, str) and isinstance(value, dict) and "unit" in value:
            found.setdefault(_normalise_name(key), value)
    return found


def _is_metric_doc(doc: object) -> bool:
    if not isinstance(doc, dict):
        return False
    metrics = _metric_objects(doc)
    # A run without --streaming has request_latency alone (no TTFT, no inter-token latency), as
    # ai-dynamo/aiperf tests/_artifacts/audit/baseline-chat/bare/profile_export_aiperf.json shows.
    if any(name in metrics for name in ("time_to_first_token", "inter_token_latency", "request_latency")):
        return True
    # A run whose every request failed writes error_request_count and error_summary alone (aiperf
    # 0.8, databloom/aiperf-lab-tests: 20 of 20 timed out): a run, with nothing completed.
    return "error_request_count" in metrics and _is_aiperf(doc)


def _is_aiperf(doc: dict[str, Any]) -> bool:
    # docs/formats.md §9.4 rule 5, plus the `records` layout only aiperf ever wrote.
    return any(k in doc for k in _AIPERF_MARKERS) or "records" in doc or "error_summary" in doc


def _latency(metrics: dict[str, dict[str, Any]], name: str) -> Percentiles | None:
    obj = metrics.get(name)
    if obj is None:
        return None
    unit = obj.get("unit")
    if not isinstance(unit, str) or unit.strip().lower() not in TIME_UNITS_MS:
        raise IngestError(f"not a time unit: {unit!r}", field=f"{name}.unit")
    stats = {k: v for k, v in obj.items() if k not in ("unit", "name", "tag", "header", "count")}
    result = percentiles_from_mapping(stats, unit=unit, field=name)
    return None if result.is_empty() else result


def _avg(metrics: dict[str, dict[str, Any]], name: str) -> float | None:
    obj = metrics.get(name)
    if obj is None:
        return None
    value = as_float(obj.get("avg"), f"{name}.avg")
    if value is not None and value < 0:
        raise IngestError("cannot be negative", field=f"{name}.avg")
    return value


def _seconds(metrics: dict[str, dict[str, Any]], name: str) -> float | None:
    obj = metrics.get(name)
    if obj is None:
        return None
    unit = obj.get("unit")
    if unit not in ("sec", "s", "seconds"):
        return None
    return _avg(metrics, name)


def _first_str(*values: object) -> str | None:
    for value in values:
        if isinstance(value, list) and value and isinstance(value[0], str) and value[0]:
            return value[0]
        if isinstance(value, str) and value:
            return value
    return None


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _profiling_phase(config: dict[str, Any]) -> dict[str, Any]:
    """The phase whose records are the results (aiperf 0.8+ ``input_config.phases``): the one not
    ``exclude_from_results`` (the warm-up is), preferring the one named ``profiling``."""
    kept = [p for p in _list(config.get("phases")) if isinstance(p, dict) and not p.get("exclude_from_results")]
    named = [p for p in kept if p.get("name") == "profiling"]
    return (named or kept or [{}])[0]


def _telemetry_gpu(doc: dict[str, Any], notes: list[str]) -> str | None:
    """The GPU name from aiperf's DCGM telemetry, when every GPU seen has the same name."""
    names: set[str] = set()
    for endpoint in as_dict(dig(doc, "telemetry_data", "endpoints")).values():
        for gpu in as_dict(dig(endpoint, "gpus")).values():
            name = dig(gpu, "gpu_name")
            if isinstance(name, str) and name:
                names.add(name)
    if len(names) == 1:
        notes.append("setup.hardware is the GPU name DCGM reported; the GPU count is not inferred")
        return names.pop()
    return None


def _requested_output(config: dict[str, Any], *, aiperf: bool) -> float | None:
    """The output length the run asked for: aiperf ``input.prompt.output_tokens.mean`` (``--osl``;
    from aiperf 0.8 the config echo's ``datasets[].prompts.osl.mean``), genai-perf
    ``input.output_tokens.mean`` or, in the flat 0.0.x config, ``output_tokens_mean``
    (``--output-tokens-mean``, sent as ``max_tokens``)."""
    if aiperf:
        value = dig(config, "input", "prompt", "output_tokens", "mean")
        datasets = config.get("datasets")
        if value is None and isinstance(datasets, list):
            value = next((v for d in datasets if (v := dig(d, "prompts", "osl", "mean")) is not None), None)
    else:
        value = dig(config, "input", "output_tokens", "mean")
        if value is None:
            value = config.get("output_tokens_mean")
    requested = as_float(value, "input_config.output_tokens.mean")
    return requested if requested is not None and requested > 0 else None


def _is_cancellation(entry: object) -> bool:
    """aiperf's deliberate cancellation (``--request-cancellation-rate``): a ``RequestCancellationError``,
    code 499, what its records carry for ``was_cancelled``."""
    details = as_dict(dig(entry, "error_details"))
    return details.get("type") == "RequestCancellationError" or (
        details.get("code") == 499 and "cancel" in str(details.get("message", "")).lower()
    )


def _without_cancellations(
    doc: dict[str, Any], config: dict[str, Any], failed: int | None, notes: list[str]
) -> tuple[int | None, int]:
    """aiperf's failed count without the requests it cancelled on purpose, and how many those were.

    ``--request-cancellation-rate N`` disconnects N % of the requests after
    ``--request-cancellation-delay`` to measure the server under user cancellations (aiperf docs,
    "Request Cancellation Testing"); each is an error of type ``RequestCancellationError`` (code 499)
    in ``error_summary`` and in ``error_request_count``. They are the test's design, not failures:
    counting them would call an intact sample biased (MEAS005)."""
    summary = doc.get("error_summary")
    if not isinstance(summary, list):
        return failed, 0
    cancelled = errors = 0
    kinds: dict[str, int] = {}
    for entry in summary:
        count = as_int(dig(entry, "count")) or 0
        if _is_cancellation(entry):
            cancelled += count
        else:
            errors += count
            kind = dig(entry, "error_details", "type") or dig(entry, "error_details", "code") or "unknown"
            kinds[str(kind)] = kinds.get(str(kind), 0) + count
    if kinds:
        notes.append("failed requests by error type: " + ", ".join(f"{k} ×{n}" for k, n in kinds.items()))
    if failed is None:
        failed = errors + cancelled
    if cancelled:
        rate = as_float(dig(config, "loadgen", "request_cancellation_rate"))
        asked = f" (--request-cancellation-rate {rate:g} %)" if rate else ""
        notes.append(
            f"{cancelled} request(s) cancelled on purpose{asked}: aiperf's RequestCancellationError (code 499), "
            "left out of requests_failed"
        )
        failed = max(0, failed - cancelled)
    return failed, cancelled


def parse_profile(doc: dict[str, Any], *, aiperf: bool) -> CanonicalRun:
    notes: list[str] = []
    metrics_by_name = _metric_objects(doc)
    config = as_dict(doc.get("input_config"))
    endpoint = as_dict(config.get("endpoint"))

    model = _first_str(endpoint.get("model_names"), config.get("model_names"), config.get("model"))
    service_kind = endpoint.get("service_kind", config.get("service_kind"))
    backend = endpoint.get("backend", config.get("backend"))
    # genai-perf's `backend` (tensorrtllm, vllm) names the Triton backend, and only means anything
    # when it talks to Triton; through the OpenAI API the server runtime is unknown.
    runtime = runtime_from_backend(backend) if service_kind == "triton" else None
    streaming = endpoint.get("streaming", config.get("streaming"))

    labels: dict[str, str] = {}
    if aiperf:
        loadgen = as_dict(config.get("loadgen"))
        concurrency = as_float(loadgen.get("concurrency"))
        rate = as_float(loadgen.get("request_rate"))
        if model is None:
            model = _first_str([dig(item, "name") for item in _list(dig(config, "models", "items"))])
        tokenizer = dig(config, "tokenizer", "name")
        if isinstance(tokenizer, str) and tokenizer and tokenizer != model:
            labels["tokenizer"] = tokenizer
        phase = _profiling_phase(config)
        if concurrency is None and rate is None and phase:
            concurrency = as_float(phase.get("concurrency"), "input_config.phases.concurrency")
            rate = as_float(phase.get("rate"), "input_config.phases.rate")
    else:
        stimulus = as_dict(dig(config, "perf_analyzer", "stimulus"))
        concurrency = as_float(stimulus.get("concurrency", config.get("concurrency")))
        rate = as_float(stimulus.get("request_rate", config.get("request_rate")))

    completed_f = _avg(metrics_by_name, "request_count")
    completed = int(completed_f) if completed_f is not None else None
    failed_f = _avg(metrics_by_name, "error_request_count")
    failed = int(failed_f) if failed_f is not None else None
    if completed is None and failed and not _latency(metrics_by_name, "request_latency"):
        completed = 0  # every request failed: request_count is not written for an empty sample
    cancelled = 0
    if aiperf:
        failed, cancelled = _without_cancellations(doc, config, failed, notes)

    workload = Workload(
        num_requests=(completed + (failed or 0) + cancelled) if completed is not None else None,
        concurrency=concurrency,
        request_rate=rate,
        prompt_tokens_mean=_avg(metrics_by_name, "input_sequence_length"),
        output_tokens_mean=_avg(metrics_by_name, "output_sequence_length"),
        output_tokens_requested=_requested_output(config, aiperf=aiperf),
        streaming=streaming if isinstance(streaming, bool) else None,
    )
    if workload.prompt_tokens_mean is None:
        configured = as_float(dig(config, "input", "prompt", "input_tokens", "mean"))
        if configured:
            workload.prompt_tokens_mean = configured
            notes.append("prompt_tokens_mean is the configured synthetic input length, not a measurement")

    metrics = Metrics(
        requests_completed=completed,
        requests_failed=failed,
        request_throughput_rps=_avg(metrics_by_name, "request_throughput"),
        output_throughput_tok_s=_avg(metrics_by_name, "output_token_throughput"),
        total_throughput_tok_s=_avg(metrics_by_name, "total_token_throughput"),
        duration_s=_seconds(metrics_by_name, "benchmark_duration"),
    )
    if completed == 0:
        notes.append("no request completed: latency and throughput statistics are absent")
        metrics.request_throughput_rps = metrics.output_throughput_tok_s = metrics.total_throughput_tok_s = None
    else:
        for field, name in (
            ("ttft_ms", "time_to_first_token"),
            ("tpot_ms", "inter_token_latency"),
            ("itl_ms", "inter_chunk_latency"),
            ("e2e_ms", "request_latency"),
        ):
            stats = _latency(metrics_by_name, name)
            if stats is not None:
                setattr(metrics, field, stats)
        if metrics.e2e_ms.is_empty():
            last = _latency(metrics_by_name, "time_to_last_token")
            if last is not None:
                metrics.e2e_ms = last
                notes.append("e2e_ms is aiperf's time_to_last_token")
        decode_from_tpot(metrics)
        if metrics.decode_tok_s is None:
            per_user = _avg(metrics_by_name, "output_token_throughput_per_user")
            if per_user is None:
                per_user = _avg(metrics_by_name, "output_token_throughput_per_request")
            metrics.decode_tok_s = per_user
        prefill_from_ttft(metrics, workload, notes)

    hardware = _telemetry_gpu(doc, notes) if aiperf else None
    measured_at = iso_to_utc(doc.get("start_time"), "start_time", notes)
    if aiperf and isinstance(doc.get("warmup_metrics"), dict):
        # Schema 1.4+: the warm-up phase has its own block; the top-level metrics are profiling only.
        notes.append("warmup_metrics (the warm-up phase) left out: the run is the profiling phase")
    version = doc.get("aiperf_version") if aiperf else None
    return CanonicalRun(
        measured_at=measured_at,
        setup=Setup(runtime=runtime, model=model, hardware=hardware),
        workload=workload,
        metrics=metrics,
        labels=labels,
        source=Source(tool_version=version if isinstance(version, str) and version else None, notes=notes),
    )


class _ProfileParser(ParserBase):
    aiperf: bool
    priority = 50

    def sniff(self, inp: Input) -> bool:
        doc = inp.json
        return _is_metric_doc(doc) and _is_aiperf(doc) == self.aiperf

    def parse_record(self, record: Any, prefix: str) -> list[CanonicalRun]:
        if not isinstance(record, dict):
            raise self.fail("expected one JSON object", "body")
        if not _is_metric_doc(record):
            raise self.fail(
                "no time_to_first_token, inter_token_latency, request_latency or error_request_count metric object",
                "body",
            )
        return [parse_profile(record, aiperf=self.aiperf)]


class GenaiPerfParser(_ProfileParser):
    format_id = "genai_perf"
    description = "NVIDIA genai-perf profile_export_genai_perf.json"
    tool = "genai-perf"
    aiperf = False


class AiperfParser(_ProfileParser):
    format_id = "aiperf"
    description = "NVIDIA aiperf profile_export_aiperf.json (June 2025, October 2025 and later layouts)"
    tool = "aiperf"
    aiperf = True


PARSERS = [GenaiPerfParser(), AiperfParser()]
