"""llm-d Benchmark Report (``llm-d/llm-d-benchmark`` ``benchmark_report/``), schema v0.1 and v0.2,
as YAML or JSON.

The report wraps another tool's numbers in a standard shape; every statistic carries ``units``
(``ms``, ``s``, ``ms/token``, ``s/token``, ``count``, ``tokens/s``, ``queries/s``), which are read.

* v0.1: ``{version: "0.1", scenario: {model, host, platform, load}, metrics: {time, requests,
  latency, throughput, service}}``.
* v0.2: ``{version: "0.2", run: {uid, eid, time}, scenario: {stack: [components], load},
  results: {request_performance: {aggregate: {requests, latency, throughput}}}}``.

The latency names inherit the wrapped tool's meaning (docs/formats.md §9.2). llm-d's own converters copy
guidellm's ``time_per_output_token_ms`` (end-to-end ÷ tokens) into the report's
``time_per_output_token`` and guidellm's TPOT-like ``inter_token_latency_ms`` into
``inter_token_latency`` (``benchmark_report/native_to_br0_1.py`` and ``native_to_br0_2.py``). So
for a guidellm load the two are swapped back here; for other tools the report's definitions hold
(TPOT excludes the first token, ITL is the token gap, NTPOT is end-to-end ÷ tokens).
"""

from __future__ import annotations

import re
from typing import Any

from advisor.canonical import CanonicalRun, Metrics, Percentiles, Setup, Source, Workload
from advisor.errors import IngestError
from advisor.ingest.base import Input, ParserBase
from advisor.ingest.derive import decode_from_tpot, prefill_from_ttft
from advisor.ingest.stat_names import percentiles_from_mapping
from advisor.ingest.units import epoch_to_utc, iso_to_utc
from advisor.ingest.values import as_dict, as_float, as_int, as_list, dig

__all__ = ["PARSERS", "LlmdReportParser"]

_VERSIONS = ("0.1", "0.2")

# Report latency name → canonical field, by the load generator that produced the numbers.
_LATENCY_DEFAULT = {
    "time_to_first_token": "ttft_ms",
    "time_per_output_token": "tpot_ms",
    "inter_token_latency": "itl_ms",
    "normalized_time_per_output_token": "e2e_per_token_ms",
    "request_latency": "e2e_ms",
}
_LATENCY_GUIDELLM = {
    **_LATENCY_DEFAULT,
    "time_per_output_token": "e2e_per_token_ms",
    "inter_token_latency": "tpot_ms",
}

# vLLM engine-argument flags kept in engine_args (snake_case); the others are setup fields.
_SETUP_ARGS = {"max_model_len", "tensor_parallel_size", "kv_cache_dtype", "pipeline_parallel_size"}
_ISO_DURATION = re.compile(
    r"^P(?:(?P<d>\d+(?:\.\d+)?)D)?(?:T(?:(?P<h>\d+(?:\.\d+)?)H)?(?:(?P<m>\d+(?:\.\d+)?)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$"
)


def _version(doc: object) -> str | None:
    raw = dig(doc, "version")
    if isinstance(raw, float):  # unquoted YAML `version: 0.2`
        raw = f"{raw:.1f}"
    return raw if isinstance(raw, str) and raw in _VERSIONS else None


def _is_report(doc: object) -> bool:
    version = _version(doc)
    if version == "0.1":
        return isinstance(dig(doc, "metrics", "latency"), dict) and isinstance(dig(doc, "scenario"), dict)
    if version == "0.2":
        return isinstance(dig(doc, "results"), dict) and isinstance(dig(doc, "run"), dict)
    return False


def _document(inp: Input) -> Any:
    doc = inp.json
    if doc is not None:
        return doc
    text = inp.text
    # A YAML parse of arbitrary text is costly and matches anything; look for the report's keys first.
    if text is None or "version:" not in text or ("scenario:" not in text and "results:" not in text):
        return None
    return inp.yaml


def _iso_duration_s(value: object, field: str) -> float | None:
    # Hand-written: the stdlib has no ISO-8601 duration parser, and the report only writes PT…S.
    if not isinstance(value, str):
        return as_float(value, field)
    match = _ISO_DURATION.match(value.strip())
    if match is None:
        raise IngestError(f"not an ISO-8601 duration: {value!r}", field=field)
    parts = {k: float(v) for k, v in match.groupdict().items() if v is not None}
    return parts.get("d", 0) * 86400 + parts.get("h", 0) * 3600 + parts.get("m", 0) * 60 + parts.get("s", 0)


def _stats(obj: object, field: str, *, time: bool) -> Percentiles:
    stats = as_dict(obj)
    if not stats:
        return Percentiles()
    units = stats.get("units")
    if not isinstance(units, str):
        raise IngestError("statistics without units", field=f"{field}.units")
    values = {k: v for k, v in stats.items() if k not in ("units", "mode")}
    return percentiles_from_mapping(values, unit=units if time else None, field=field)


def _runtime(engine: str) -> str | None:
    lowered = engine.lower()
    if "sglang" in lowered:
        return "sglang"
    if "tensorrt" in lowered or "trtllm" in lowered:
        return "trtllm"
    if "text-generation-inference" in lowered or "tgi" in lowered:
        return "tgi"
    if "vllm" in lowered or "llm-d" in lowered:  # llm-d serves with vLLM
        return "vllm"
    return None


def _engine_args(args: object, setup: Setup) -> None:
    for raw_key, value in as_dict(args).items():
        key = str(raw_key).lstrip("-").replace("-", "_")
        if not isinstance(value, str | int | float | bool) or not key:
            continue
        if key == "max_model_len":
            setup.max_model_len = as_int(value)
        elif key == "tensor_parallel_size":
            setup.tensor_parallel = setup.tensor_parallel or as_int(value)
        elif key == "pipeline_parallel_size":
            setup.pipeline_parallel = as_int(value)
        elif key == "kv_cache_dtype" and isinstance(value, str):
            setup.kv_cache_dtype = value
        elif key not in _SETUP_ARGS:
            setup.engine_args.setdefault(key, value)


def _apply_latency(metrics: Metrics, latency: dict[str, Any], tool: str | None, field: str, notes: list[str]) -> None:
    mapping = _LATENCY_GUIDELLM if tool == "guidellm" else _LATENCY_DEFAULT
    if tool == "guidellm":
        notes.append(
            "guidellm load: the report's time_per_output_token is guidellm's end-to-end ÷ tokens "
            "(stored as e2e_per_token_ms) and its inter_token_latency is guidellm's TPOT (tpot_ms)"
        )
    for name, target in mapping.items():
        stats = _stats(latency.get(name), f"{field}.{name}", time=True)
        if not stats.is_empty():
            setattr(metrics, target, stats)
    ttft, e2e = metrics.ttft_ms.mean, metrics.e2e_ms.mean
    if ttft is not None and e2e is not None and e2e < ttft:
        # A request cannot end before its first token: the report's units are wrong (llm-d's v0.1
        # guidellm converter labels guidellm's seconds as ms). Units are never guessed, so drop it.
        metrics.e2e_ms = Percentiles()
        notes.append("request_latency is shorter than TTFT, so its units are mislabelled; e2e_ms dropped")


def _requests(requests: dict[str, Any], field: str, workload: Workload, metrics: Metrics) -> None:
    total = as_int(requests.get("total"), f"{field}.total")
    failures = as_int(requests.get("failures"), f"{field}.failures")
    incomplete = as_int(requests.get("incomplete"), f"{field}.incomplete")
    for name, value in (("total", total), ("failures", failures), ("incomplete", incomplete)):
        if value is not None and value < 0:
            raise IngestError("cannot be negative", field=f"{field}.{name}")
    workload.num_requests = total
    metrics.requests_failed = failures
    if total is not None:
        metrics.requests_completed = max(total - (failures or 0) - (incomplete or 0), 0)
    workload.prompt_tokens_mean = _stats(requests.get("input_length"), f"{field}.input_length", time=False).mean
    workload.output_tokens_mean = _stats(requests.get("output_length"), f"{field}.output_length", time=False).mean


def _parse_v01(doc: dict[str, Any]) -> CanonicalRun:
    notes: list[str] = []
    scenario = as_dict(doc.get("scenario"))
    results = as_dict(doc.get("metrics"))
    setup = Setup()
    name = dig(scenario, "model", "name")
    setup.model = name if isinstance(name, str) and name and name != "unknown" else None
    quant = dig(scenario, "model", "quantization")
    setup.quantization = quant if isinstance(quant, str) and quant else None

    accelerators = [a for a in as_list(dig(scenario, "host", "accelerator")) if isinstance(a, dict)]
    types = [t for t in as_list(dig(scenario, "host", "type")) if isinstance(t, str)]
    labels: dict[str, str] = {}
    _hosts(setup, labels, notes, accelerators, types)
    engines = [e for e in as_list(dig(scenario, "platform", "engine")) if isinstance(e, dict)]
    for engine in engines:
        engine_name = engine.get("name")
        if isinstance(engine_name, str) and setup.runtime is None:
            setup.runtime = _runtime(engine_name)
        if isinstance(engine.get("version"), str) and setup.runtime_version is None:
            setup.runtime_version = engine["version"]
        _engine_args(engine.get("args"), setup)

    load = as_dict(scenario.get("load"))
    tool = load.get("name") if isinstance(load.get("name"), str) else None
    workload = Workload()
    args = as_dict(load.get("args"))
    workload.concurrency = as_float(args.get("max_concurrency"))
    rate = as_float(args.get("request_rate"), "scenario.load.args.request_rate", allow_inf=True)
    workload.request_rate = rate if rate is not None and rate != float("inf") else None

    metrics = Metrics(duration_s=as_float(dig(results, "time", "duration")))
    _requests(as_dict(results.get("requests")), "metrics.requests", workload, metrics)
    _apply_latency(metrics, as_dict(results.get("latency")), tool, "metrics.latency", notes)
    throughput = as_dict(results.get("throughput"))
    metrics.input_throughput_tok_s = as_float(throughput.get("input_tokens_per_sec"))
    metrics.output_throughput_tok_s = as_float(throughput.get("output_tokens_per_sec"))
    metrics.total_throughput_tok_s = as_float(throughput.get("total_tokens_per_sec"))
    metrics.request_throughput_rps = as_float(throughput.get("requests_per_sec"))
    service = as_dict(results.get("service"))
    queue = _stats(service.get("queue_size"), "metrics.service.queue_size", time=False)
    batch = _stats(service.get("batch_size"), "metrics.service.batch_size", time=False)
    metrics.queue_waiting_mean, metrics.queue_waiting_max = queue.mean, queue.max
    metrics.running_mean, metrics.running_max = batch.mean, batch.max
    return _finish(
        measured_at=epoch_to_utc(dig(results, "time", "start"), "metrics.time.start"),
        setup=setup,
        workload=workload,
        metrics=metrics,
        labels=labels,
        notes=notes,
        tool=tool,
        tool_version=None,
        version="0.1",
    )


def _hosts(
    setup: Setup,
    labels: dict[str, str],
    notes: list[str],
    accelerators: list[dict[str, Any]],
    types: list[str],
) -> None:
    models = {a.get("model") for a in accelerators if isinstance(a.get("model"), str)}
    if len(models) == 1:
        setup.hardware = models.pop()
    counts = [as_int(a.get("count")) for a in accelerators]
    if accelerators and all(c is not None for c in counts):
        setup.gpu_count = sum(c for c in counts if c is not None)
    # Decode sets the per-token latency, so its parallelism describes the run best.
    ranked = sorted(
        zip(types or ["replica"] * len(accelerators), accelerators, strict=False),
        key=lambda pair: {"decode": 0, "replica": 1, "aggregate": 1, "prefill": 2}.get(pair[0], 3),
    )
    for _, accelerator in ranked:
        tp = as_int(dig(accelerator, "parallelism", "tp"))
        if tp is not None:
            setup.tensor_parallel = tp
            pp = as_int(dig(accelerator, "parallelism", "pp"))
            setup.pipeline_parallel = pp if pp and pp > 1 else setup.pipeline_parallel
            break
    if any(t in ("prefill", "decode") for t in types):
        labels["llmd_roles"] = ",".join(f"{t}×{types.count(t)}" for t in dict.fromkeys(types))
        notes.append("prefill/decode disaggregated deployment; gpu_count sums every worker")


def _model_from_load_config(native: dict[str, Any], setup: Setup, notes: list[str]) -> None:
    """The model (and server type) the load generator was pointed at, when no engine component names
    them: inference-perf's own config is copied into ``scenario.load.native.config``
    (``server: {type, model_name}``, ``tokenizer.pretrained_model_name_or_path``)."""
    config = as_dict(native.get("config"))
    if setup.model is None:
        for path in (("server", "model_name"), ("tokenizer", "pretrained_model_name_or_path")):
            value = dig(config, *path)
            if isinstance(value, str) and value.strip():
                setup.model = value.strip()
                notes.append(
                    f"model {setup.model!r} derived from the load generator's config "
                    f"(scenario.load.native.config.{'.'.join(path)}): no engine component names it"
                )
                break
    server_type = dig(config, "server", "type")
    if setup.runtime is None and isinstance(server_type, str) and (runtime := _runtime(server_type)):
        setup.runtime = runtime
        notes.append(
            f"runtime {runtime!r} derived from the load generator's config (scenario.load.native.config.server.type)"
        )


def _parse_v02(doc: dict[str, Any]) -> CanonicalRun:
    notes: list[str] = []
    labels: dict[str, str] = {}
    for key in ("uid", "eid", "cid"):
        value = dig(doc, "run", key)
        if isinstance(value, str) and value:
            labels[f"llmd_run_{key}"] = value

    setup = Setup()
    accelerators: list[dict[str, Any]] = []
    types: list[str] = []
    engines_with_args = 0
    for component in as_list(dig(doc, "scenario", "stack")):
        std = as_dict(dig(component, "standardized"))
        # The component kind sat in ``metadata`` in the first v0.2 drafts; the published schema
        # (``schema_v0_2.py``, ``br_v0_2_example.yaml``) moved it into ``standardized``.
        if (std.get("kind") or dig(component, "metadata", "kind")) != "inference_engine":
            continue
        model = dig(std, "model", "name")
        if isinstance(model, str) and model and setup.model is None:
            setup.model = model
        tool = std.get("tool")
        if isinstance(tool, str) and setup.runtime is None:
            setup.runtime = _runtime(tool) or _runtime(str(std.get("tool_version", "")))
        accelerator = as_dict(std.get("accelerator"))
        replicas = as_int(std.get("replicas")) or 1
        role = std.get("role") if isinstance(std.get("role"), str) else "replica"
        version = std.get("tool_version")
        if isinstance(version, str) and version and role in ("prefill", "decode"):
            # Each worker role keeps its own engine version (image): a disaggregated pair may differ.
            key = f"engine_version_{role}"
            labels[key] = ",".join(sorted({*filter(None, labels.get(key, "").split(",")), version}))
        if accelerator:
            for _ in range(max(replicas, 1)):
                accelerators.append(accelerator)
                types.append(str(role))
        if as_dict(dig(component, "native", "args")):
            engines_with_args += 1
            _engine_args(dig(component, "native", "args"), setup)
    if engines_with_args > 1:
        notes.append("engine_args merged from several engine components (first value wins)")
    _hosts(setup, labels, notes, accelerators, types)

    _model_from_load_config(as_dict(dig(doc, "scenario", "load", "native")), setup, notes)

    load = as_dict(dig(doc, "scenario", "load", "standardized"))
    tool = load.get("tool") if isinstance(load.get("tool"), str) else None
    tool_version = load.get("tool_version") if isinstance(load.get("tool_version"), str) else None
    stage = as_int(load.get("stage"))
    if stage is not None:
        labels["llmd_load_stage"] = str(stage)
    workload = Workload()
    workload.request_rate = as_float(load.get("rate_qps"))
    concurrency = as_float(load.get("concurrency"), "scenario.load.standardized.concurrency", allow_inf=True)
    workload.concurrency = concurrency if concurrency is not None and concurrency != float("inf") else None
    total = as_float(dig(doc, "results", "request_performance", "aggregate", "requests", "total"))
    if workload.concurrency is not None and workload.request_rate is not None and workload.request_rate == total:
        # inference-perf's concurrent load reports its request count as ``requested_rate``, which
        # llm-d's converter copies into ``rate_qps``: it is not an arrival rate, and taken as one it
        # would read as a massive overload.
        notes.append(
            f"rate_qps {workload.request_rate:g} equals the request count of a concurrency-{workload.concurrency:g} "
            "load (a closed loop): it is not an offered rate and was not stored as request_rate"
        )
        workload.request_rate = None
    prefix = as_float(dig(load, "prefix", "prefix_len", "value"))
    workload.shared_prefix_tokens = prefix

    aggregate = as_dict(dig(doc, "results", "request_performance", "aggregate"))
    metrics = Metrics(duration_s=_iso_duration_s(dig(doc, "run", "time", "duration"), "run.time.duration"))
    base = "results.request_performance.aggregate"
    _requests(as_dict(aggregate.get("requests")), f"{base}.requests", workload, metrics)
    if workload.prompt_tokens_mean is None:
        workload.prompt_tokens_mean = as_float(dig(load, "input_seq_len", "value"))
    if workload.output_tokens_mean is None:
        workload.output_tokens_mean = as_float(dig(load, "output_seq_len", "value"))
    _apply_latency(metrics, as_dict(aggregate.get("latency")), tool, f"{base}.latency", notes)
    throughput = as_dict(aggregate.get("throughput"))
    for name, target in (
        ("input_token_rate", "input_throughput_tok_s"),
        ("output_token_rate", "output_throughput_tok_s"),
        ("total_token_rate", "total_throughput_tok_s"),
        ("requests_rate", "request_throughput_rps"),
        ("request_rate", "request_throughput_rps"),
    ):
        stats = _stats(throughput.get(name), f"{base}.throughput.{name}", time=False)
        if stats.mean is not None and getattr(metrics, target) is None:
            setattr(metrics, target, stats.mean)
    return _finish(
        measured_at=iso_to_utc(dig(doc, "run", "time", "start"), "run.time.start", notes),
        setup=setup,
        workload=workload,
        metrics=metrics,
        labels=labels,
        notes=notes,
        tool=tool,
        tool_version=tool_version,
        version="0.2",
    )


def _finish(
    *,
    measured_at: Any,
    setup: Setup,
    workload: Workload,
    metrics: Metrics,
    labels: dict[str, str],
    notes: list[str],
    tool: str | None,
    tool_version: str | None,
    version: str,
) -> CanonicalRun:
    if tool:
        labels["llmd_load_tool"] = tool
    if metrics.requests_completed == 0:
        notes.append("no request completed: latency and throughput statistics are absent")
        for name in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "e2e_per_token_ms"):
            setattr(metrics, name, Percentiles())
    decode_from_tpot(metrics)
    prefill_from_ttft(metrics, workload, notes)
    return CanonicalRun(
        measured_at=measured_at,
        labels=labels,
        setup=setup,
        workload=workload,
        metrics=metrics,
        source=Source(
            tool=f"llm-d benchmark report v{version}" + (f" ({tool})" if tool else ""),
            tool_version=tool_version,
            notes=notes,
        ),
    )


class LlmdReportParser(ParserBase):
    format_id = "llmd_report"
    description = "llm-d Benchmark Report v0.1 / v0.2 (YAML or JSON)"
    tool = "llm-d-benchmark"
    priority = 80

    def sniff(self, inp: Input) -> bool:
        return _is_report(_document(inp))

    def records(self, inp: Input) -> list[Any] | None:
        doc = _document(inp)
        return None if doc is None else [doc]

    def parse_record(self, record: Any, prefix: str) -> list[CanonicalRun]:
        if not isinstance(record, dict) or not _is_report(record):
            raise self.fail("not an llm-d Benchmark Report v0.1 or v0.2", "version")
        return [_parse_v01(record) if _version(record) == "0.1" else _parse_v02(record)]


PARSERS = [LlmdReportParser()]
