"""NVIDIA ``trtllm-bench throughput`` (and ``latency``): the report in its stdout log, and the
``--report_json`` file (docs/formats.md §11).

Both come from ``tensorrt_llm/bench/dataclasses/reporting.py``: ``get_statistics_dict`` builds
``{engine, world_info, request_info, performance, streaming_metrics?, dataset}`` (1.2+ adds
``machine``, printed as ``= MACHINE DETAILS``: the GPU name, read as the hardware) and
``report_statistics`` prints it as ``= ENGINE DETAILS`` (or ``= PYTORCH BACKEND``), ``= REQUEST
DETAILS``, ``= WORLD + RUNTIME INFORMATION`` and ``= PERFORMANCE OVERVIEW`` sections, with
``[Latency]``/``[TTFT]``/``[TPOT] <STAT>: value`` breakdown lines (ms). A log is read line by line
into the same dictionary, so both give the same run. Before 0.18 the overview printed one "Token
Throughput (tokens/sec)", which was output tokens ÷ total latency.

A speculative run (``speculative_config`` in ``--extra_llm_api_options``) adds ``decoding_stats``
(``mode``, e.g. "Eagle", and draft/acceptance percentiles), printed as ``= DECODING STATISTICS
(<mode>)`` with ``[AL] AVERAGE`` (acceptance length) lines: its mode is kept as
``engine_args.speculative_algorithm``, so the rules know its decode is not bound by one weight read
per token.

``TPOT`` is trtllm-bench's per-user time per output token (TPOT); ``avg_num_concurrent_requests`` is
measured, not configured; the benchmark queues every request at once (offline)
unless ``--concurrency`` caps the requests in flight.
"""

from __future__ import annotations

import re
from typing import Any

from advisor.canonical import CanonicalRun, Metrics, Percentiles, Setup, Source, Workload
from advisor.errors import IngestError
from advisor.ingest.base import Input, ParserBase
from advisor.ingest.derive import decode_from_tpot
from advisor.ingest.values import as_dict, as_float, as_int

__all__ = ["PARSERS", "TrtllmBenchParser", "report_from_log"]

# Log label → (section of the report dictionary, key).
_LABELS: dict[str, tuple[str, str]] = {
    "Model": ("engine", "model"),
    "TensorRT-LLM Version": ("engine", "version"),
    "TensorRT LLM Version": ("engine", "version"),
    "Dtype": ("engine", "dtype"),
    "KV Cache Dtype": ("engine", "kv_cache_dtype"),
    "Quantization": ("engine", "quantization"),
    "TP Size": ("world_info", "tp_size"),
    "PP Size": ("world_info", "pp_size"),
    "EP Size": ("world_info", "ep_size"),
    "Max Runtime Batch Size": ("world_info", "max_batch_size"),
    "Max Runtime Tokens": ("world_info", "max_num_tokens"),
    "Number of requests": ("request_info", "num_requests"),
    "Number of concurrent requests": ("request_info", "avg_num_concurrent_requests"),
    "Average Input Length (tokens)": ("request_info", "avg_input_length"),
    "Average Output Length (tokens)": ("request_info", "avg_output_length"),
    "Request Throughput (req/sec)": ("performance", "request_throughput_req_s"),
    "Total Output Throughput (tokens/sec)": ("performance", "system_output_throughput_tok_s"),
    "Token Throughput (tokens/sec)": ("performance", "system_output_throughput_tok_s"),
    "Total Token Throughput (tokens/sec)": ("performance", "system_total_throughput_tok_s"),
    "Total Latency (ms)": ("performance", "total_latency_ms"),
    "Average request latency (ms)": ("performance", "avg_request_latency_ms"),
    "Average time-to-first-token [TTFT] (ms)": ("streaming_metrics", "avg_ttft_ms"),
    "Average time-per-output-token [TPOT] (ms)": ("streaming_metrics", "avg_tpot_ms"),
}
_LABEL_LINE = re.compile(
    r"^\s*(?P<label>" + "|".join(re.escape(k) for k in sorted(_LABELS, key=len, reverse=True)) + r"):\s+(?P<value>\S+)"
)
_BREAKDOWN = re.compile(r"^\s*\[(?P<kind>Latency|TTFT|TPOT)\]\s+(?P<stat>[A-Z0-9]+)\s*:\s*(?P<value>\S+)")
_BREAKDOWN_KEYS = {
    "Latency": ("performance", "request_latency_percentiles_ms"),
    "TTFT": ("streaming_metrics", "ttft_percentiles"),
    "TPOT": ("streaming_metrics", "tpot_percentiles"),
}
# "= DECODING STATISTICS (Eagle)": report_statistics prints decoding_stats["mode"] in the header.
_DECODING_HEADER = re.compile(r"^\s*= DECODING STATISTICS \((?P<mode>[^)]*)\)")
_ACCEPTANCE_LENGTH = re.compile(r"^\s*\[AL\]\s+AVERAGE\s*:\s*(?P<value>\S+)")
_SECTIONS = ("= PERFORMANCE OVERVIEW", "= WORLD + RUNTIME INFORMATION")
_STATS = {"minimum": "min", "maximum": "max", "average": "mean", "p50": "p50", "p90": "p90", "p95": "p95", "p99": "p99"}
_NONE = ("none", "null", "")
_FLOAT_DTYPES = ("bfloat16", "float16", "float32")


def _value(text: str) -> Any:
    number = text.rstrip("%")
    try:
        return float(number)
    except ValueError:
        return None if text.lower() in _NONE else text


def report_from_log(text: str) -> dict[str, Any]:
    """The ``--report_json`` dictionary of a trtllm-bench stdout log (the last report in it)."""
    report: dict[str, Any] = {}
    engine_at = text.rfind("= ENGINE DETAILS")
    pytorch_at = max(text.rfind("= PYTORCH BACKEND"), text.rfind("= PyTorch backend"))
    start = max(engine_at, pytorch_at)
    body = text[start:] if start >= 0 else text
    if start >= 0:
        # The header is the backend: report_statistics prints "= PYTORCH BACKEND" for the PyTorch
        # and AutoDeploy backends and "= ENGINE DETAILS" for a TensorRT engine, whose --report_json
        # says "backend": "TRT" (checked: tensorrt_llm/bench/dataclasses/reporting.py @ 2787769c).
        report["engine"] = {"backend": "pytorch" if pytorch_at > engine_at else "trt"}
    lines = body.splitlines()
    for i, line in enumerate(lines):
        if line.strip() == "= MACHINE DETAILS" and i + 2 < len(lines):
            # 1.2+: "NVIDIA B200, memory 178.35 GB, 4.00 GHz" under its own rule line.
            machine = lines[i + 2].split(",")[0].strip()
            if machine and not machine.startswith("="):
                report.setdefault("machine", {}).setdefault("name", machine)
        elif (match := _DECODING_HEADER.match(line)) is not None:
            report.setdefault("decoding_stats", {}).setdefault("mode", match.group("mode").strip())
        elif (match := _ACCEPTANCE_LENGTH.match(line)) is not None and "decoding_stats" in report:
            lengths = report["decoding_stats"].setdefault("acceptance_length_percentiles", {})
            lengths.setdefault("average", _value(match.group("value")))
        elif (match := _LABEL_LINE.match(line)) is not None:
            section, key = _LABELS[match.group("label")]
            report.setdefault(section, {}).setdefault(key, _value(match.group("value")))
        elif (match := _BREAKDOWN.match(line)) is not None:
            section, key = _BREAKDOWN_KEYS[match.group("kind")]
            stats = report.setdefault(section, {}).setdefault(key, {})
            stats[match.group("stat").lower()] = _value(match.group("value"))
    return report


def _is_report(doc: object) -> bool:
    return (
        isinstance(doc, dict)
        and isinstance(doc.get("performance"), dict)
        and "request_info" in doc
        and "world_info" in doc
    )


def _percentiles(stats: object, field: str) -> Percentiles:
    out = Percentiles()
    for key, value in as_dict(stats).items():
        target = _STATS.get(str(key).lower())
        number = as_float(value, f"{field}.{key}")
        if target is None or number is None:
            continue
        if number < 0:
            raise IngestError(f"cannot be negative, got {number:g}", field=f"{field}.{key}")
        setattr(out, target, number)
    return out


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value.lower() not in _NONE else None


def _speculative(decoding: dict[str, Any], setup: Setup, notes: list[str]) -> None:
    """``decoding_stats`` is written only for a speculative run (reporting.py, ``spec_decoding``)."""
    mode = _text(decoding.get("mode"))
    if mode is None:
        return
    setup.engine_args["speculative_algorithm"] = mode
    length = as_float(as_dict(decoding.get("acceptance_length_percentiles")).get("average"))
    rate = as_float(as_dict(decoding.get("draft_acceptance_rate_percentiles")).get("average"))
    told = [f"{length:.2f} tokens per step accepted on average" if length is not None else None]
    told.append(f"draft acceptance rate {rate:.2f}" if rate is not None else None)
    said = ", ".join(t for t in told if t)
    notes.append(f"speculative decoding ({mode}){': ' + said if said else ''}: decode is not one weight read per token")


def parse_report(report: dict[str, Any]) -> CanonicalRun:
    engine = as_dict(report.get("engine"))
    world = as_dict(report.get("world_info"))
    requests = as_dict(report.get("request_info"))
    perf = as_dict(report.get("performance"))
    streaming = as_dict(report.get("streaming_metrics"))
    notes = [
        "trtllm-bench is offline: it queues every request at once unless --concurrency caps the requests "
        "in flight (the report does not say which); concurrency is its measured average"
    ]
    for section, values in (("request_info", requests), ("performance", perf)):
        for key, value in values.items():
            number = as_float(value) if not isinstance(value, dict) else None
            if number is not None and number < 0:
                raise IngestError(f"cannot be negative, got {number:g}", field=f"{section}.{key}")
            if number is None and isinstance(value, str):
                # Recipes print the report with "X.XX" where their numbers were: a template, not a run.
                raise IngestError(
                    f"is {value!r}, not a number: a template's placeholder, not a measurement",
                    field=f"{section}.{key}",
                )
    num_requests = as_int(requests.get("num_requests"))
    workload = Workload(
        num_requests=num_requests,
        concurrency=as_float(requests.get("avg_num_concurrent_requests")),
        prompt_tokens_mean=as_float(requests.get("avg_input_length")),
        output_tokens_mean=as_float(requests.get("avg_output_length")),
    )
    total_ms = as_float(perf.get("total_latency_ms"))
    metrics = Metrics(
        requests_completed=num_requests,
        request_throughput_rps=as_float(perf.get("request_throughput_req_s")),
        output_throughput_tok_s=as_float(perf.get("system_output_throughput_tok_s")),
        total_throughput_tok_s=as_float(perf.get("system_total_throughput_tok_s")),
        duration_s=total_ms / 1000.0 if total_ms is not None else None,
        e2e_ms=_percentiles(perf.get("request_latency_percentiles_ms"), "performance.request_latency_percentiles_ms"),
    )
    if metrics.e2e_ms.mean is None and (avg := as_float(perf.get("avg_request_latency_ms"))) is not None:
        metrics.e2e_ms.mean = avg
    if streaming:
        metrics.ttft_ms = _percentiles(streaming.get("ttft_percentiles"), "streaming_metrics.ttft_percentiles")
        metrics.tpot_ms = _percentiles(streaming.get("tpot_percentiles"), "streaming_metrics.tpot_percentiles")
        if metrics.ttft_ms.mean is None:
            metrics.ttft_ms.mean = as_float(streaming.get("avg_ttft_ms"))
        if metrics.tpot_ms.mean is None:
            metrics.tpot_ms.mean = as_float(streaming.get("avg_tpot_ms"))
        decode_from_tpot(metrics)
    else:
        notes.append("not streamed (--streaming not given): no TTFT or TPOT")
    version = engine.get("version")
    quantization = _text(engine.get("quantization"))
    dtype = _text(engine.get("dtype"))
    if quantization is None and "quantization" in engine and dtype is not None and dtype.lower() in _FLOAT_DTYPES:
        # quant_algo None: the weights are held at the checkpoint's dtype (reporting.py prints
        # pretrained_config quantization.quant_algo, or the PyTorch model's quant_config).
        quantization = dtype.lower()
        notes.append(f"quantization {quantization}: the report's Quantization is None, so the weights are at its Dtype")
    machine = _text(as_dict(report.get("machine")).get("name"))
    setup = Setup(
        runtime="trtllm",
        hardware=machine,
        runtime_version=_text(version) or (f"{version:g}" if isinstance(version, float) else None),
        model=_text(engine.get("model")),
        tensor_parallel=as_int(world.get("tp_size")),
        quantization=quantization,
        kv_cache_dtype=_text(engine.get("kv_cache_dtype")),
    )
    pp = as_int(world.get("pp_size"))
    tp = setup.tensor_parallel
    if tp is not None:
        setup.gpu_count = tp * (pp or 1)
    for key, flag in (
        ("max_batch_size", "max_batch_size"),
        ("max_num_tokens", "max_num_tokens"),
        ("pp_size", "pp_size"),
    ):
        if (value := as_int(world.get(key))) is not None:
            setup.engine_args[flag] = value
    if (ep := as_int(world.get("ep_size"))) is not None:
        setup.engine_args["ep_size"] = ep
    if (backend := _text(engine.get("backend"))) is not None:
        setup.engine_args["backend"] = backend.lower()
    _speculative(as_dict(report.get("decoding_stats")), setup, notes)
    return CanonicalRun(setup=setup, workload=workload, metrics=metrics, source=Source(notes=notes))


class TrtllmBenchParser(ParserBase):
    format_id = "trtllm_bench"
    description = "NVIDIA trtllm-bench report: its stdout log, or the --report_json file"
    tool = "trtllm-bench"
    priority = 35

    def sniff(self, inp: Input) -> bool:
        doc = inp.json
        if doc is not None:
            return _is_report(doc)
        text = inp.text
        return text is not None and any(s in text for s in _SECTIONS) and "Request Throughput (req/sec):" in text

    def read(self, inp: Input) -> tuple[list[Any], list[str]]:
        doc = inp.json
        if doc is not None:
            if not _is_report(doc):
                raise self.fail(
                    "expected the --report_json object {engine, world_info, request_info, performance}", "body"
                )
            return [doc], []
        text = inp.text
        if text is None:
            raise self.fail("the body is not text", "body")
        report = report_from_log(text)
        if not as_dict(report.get("performance")):
            raise self.fail("no '= PERFORMANCE OVERVIEW' section with 'Request Throughput (req/sec):'", "body")
        return [report], ["read from the trtllm-bench log's report (values printed with four decimals)"]

    def parse_record(self, record: Any, prefix: str) -> list[CanonicalRun]:
        return [parse_report(record)]


PARSERS = [TrtllmBenchParser()]
