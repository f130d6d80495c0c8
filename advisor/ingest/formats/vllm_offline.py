"""vLLM's offline benchmarks: ``vllm bench latency --output-json`` and ``vllm bench throughput
--output-json`` (before 2025 ``benchmarks/benchmark_latency.py`` and ``benchmark_throughput.py``,
which write the same keys), and the ``*.pytorch.json`` twin both write when
``SAVE_TO_PYTORCH_BENCHMARK_FORMAT`` is set (docs/formats.md §1.5).

* latency: ``{avg_latency, latencies, percentiles}`` in **seconds**; each latency is the time to run
  one batch of ``--batch-size`` prompts of ``--input-len`` tokens to ``--output-len`` tokens each
  (``ignore_eos``), so it is ``e2e_ms`` at concurrency ``batch_size``. ``percentiles`` keys are
  "10" … "99" (numpy's linear method, as :mod:`advisor.ingest.statistics`).
* throughput: ``{elapsed_time, num_requests, total_num_tokens, requests_per_second,
  tokens_per_second}`` (some builds add ``total_output_tokens``); ``tokens_per_second`` counts prompt
  and output tokens: ``total_throughput_tok_s``.
* ``*.pytorch.json``: a list of ``{benchmark: {name: "vLLM benchmark", extra_info: {args}}, model:
  {name}, metric: {name, benchmark_values, extra_info}}`` records; ``args`` are the command line, so
  this twin also gives the model, the batch size, the lengths and the parallelism.

Neither JSON names the model or the lengths: pass them with the submission (``model``,
``concurrency``, ``prompt_tokens``, ``output_tokens``), or send the ``.pytorch.json`` twin.
"""

from __future__ import annotations

from typing import Any

from advisor.canonical import CanonicalRun, Metrics, Percentiles, Setup, Source, Workload
from advisor.errors import IngestError
from advisor.ingest.base import Input, ParserBase
from advisor.ingest.statistics import summarize
from advisor.ingest.values import as_dict, as_float, as_int, as_list, dig

__all__ = ["PARSERS", "VllmOfflineParser"]

_THROUGHPUT_KEYS = frozenset({"elapsed_time", "num_requests", "total_num_tokens", "requests_per_second"})
_PYTORCH_METRICS = frozenset({"latency", "requests_per_second", "tokens_per_second"})


def _is_latency(doc: object) -> bool:
    return isinstance(doc, dict) and "avg_latency" in doc and isinstance(doc.get("latencies"), list)


def _is_throughput(doc: object) -> bool:
    return isinstance(doc, dict) and set(doc) >= _THROUGHPUT_KEYS


def _is_pytorch(doc: object) -> bool:
    if not isinstance(doc, list) or not doc:
        return False
    names = {dig(r, "metric", "name") for r in doc}
    return all(dig(r, "benchmark", "name") == "vLLM benchmark" for r in doc) and names <= _PYTORCH_METRICS


def _positive(value: Any, field: str) -> float | None:
    number = as_float(value, field)
    if number is not None and number < 0:
        raise IngestError(f"cannot be negative, got {number:g}", field=field)
    return number


def _latency_run(doc: dict[str, Any], notes: list[str]) -> tuple[Metrics, str]:
    seconds = [_positive(v, f"latencies[{i}]") for i, v in enumerate(as_list(doc.get("latencies")))]
    values = [v * 1000.0 for v in seconds if v is not None]
    if values:
        e2e = summarize(values)
    else:
        e2e = Percentiles(mean=(_positive(doc.get("avg_latency"), "avg_latency") or 0.0) * 1000.0 or None)
        for key, value in as_dict(doc.get("percentiles")).items():
            stat = f"p{key}".replace(".", "_")
            number = _positive(value, f"percentiles.{key}")
            if number is not None and stat in Percentiles.__struct_fields__:
                setattr(e2e, stat, number * 1000.0)
    notes.append(
        "e2e_ms is the time to run one whole batch (--batch-size prompts, --input-len in, --output-len "
        "out, ignore_eos), measured --num-iters times; the concurrency is the batch size"
    )
    return Metrics(e2e_ms=e2e), "vllm bench latency"


def _throughput_run(doc: dict[str, Any], notes: list[str]) -> tuple[Metrics, str]:
    elapsed = _positive(doc.get("elapsed_time"), "elapsed_time")
    metrics = Metrics(
        duration_s=elapsed,
        request_throughput_rps=_positive(doc.get("requests_per_second"), "requests_per_second"),
        total_throughput_tok_s=_positive(doc.get("tokens_per_second"), "tokens_per_second"),
        requests_completed=as_int(doc.get("num_requests")),
    )
    output = _positive(doc.get("total_output_tokens"), "total_output_tokens")
    if output is not None and elapsed:
        metrics.output_throughput_tok_s = output / elapsed
    notes.append(
        "offline throughput: every request is queued at once and the engine batches them; "
        "total_throughput_tok_s counts prompt and output tokens"
    )
    return metrics, "vllm bench throughput"


def parse_offline(doc: dict[str, Any], args: dict[str, Any], model: str | None) -> CanonicalRun:
    notes: list[str] = []
    if _is_latency(doc):
        metrics, tool = _latency_run(doc, notes)
        concurrency = as_float(args.get("batch_size"))
        num_requests = as_int(args.get("num_iters"))
    else:
        metrics, tool = _throughput_run(doc, notes)
        concurrency = None
        num_requests = as_int(doc.get("num_requests"))
    workload = Workload(
        num_requests=num_requests,
        concurrency=concurrency,
        prompt_tokens_mean=as_float(args.get("input_len")),
        output_tokens_mean=as_float(args.get("output_len")),
    )
    if not args:
        notes.append(
            "the JSON names neither the model nor the batch size and lengths: pass model, concurrency, "
            "prompt_tokens and output_tokens with the submission, or send the .pytorch.json twin"
        )
    backend = args.get("backend")
    runtime = "vllm" if backend in (None, "vllm", "vllm-chat") else None
    setup = Setup(
        runtime=runtime,
        model=model,
        tensor_parallel=as_int(args.get("tensor_parallel_size")),
    )
    for key in ("max_num_seqs", "max_num_batched_tokens", "gpu_memory_utilization", "enable_prefix_caching"):
        if (value := args.get(key)) is not None and isinstance(value, int | float | bool | str):
            setup.engine_args[key] = value
    if isinstance(args.get("dtype"), str) and args["dtype"] != "auto":
        setup.engine_args["dtype"] = args["dtype"]
    if isinstance(args.get("quantization"), str):
        setup.quantization = args["quantization"]
    if isinstance(args.get("kv_cache_dtype"), str) and args["kv_cache_dtype"] != "auto":
        setup.kv_cache_dtype = args["kv_cache_dtype"]
    return CanonicalRun(setup=setup, workload=workload, metrics=metrics, source=Source(tool=tool, notes=notes))


def _from_pytorch(records: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any], str | None]:
    """The plain JSON document, the command-line args and the model of a ``.pytorch.json`` file."""
    doc: dict[str, Any] = {}
    args: dict[str, Any] = {}
    model = None
    for record in records:
        metric = as_dict(record.get("metric"))
        values = as_list(metric.get("benchmark_values"))
        extra = as_dict(metric.get("extra_info"))
        args = args or as_dict(dig(record, "benchmark", "extra_info", "args"))
        name = dig(record, "model", "name")
        model = model or (name if isinstance(name, str) and name else None)
        if metric.get("name") == "latency":
            doc.update({"latencies": values, **extra})
        else:
            doc[str(metric.get("name"))] = values[0] if values else None
            doc.update(extra)
    return doc, args, model


class VllmOfflineParser(ParserBase):
    format_id = "vllm_offline"
    description = "vLLM bench latency / bench throughput --output-json (and their .pytorch.json twin)"
    tool = None
    priority = 55

    def sniff(self, inp: Input) -> bool:
        doc = inp.json
        return _is_latency(doc) or _is_throughput(doc) or _is_pytorch(doc)

    def records(self, inp: Input) -> list[Any] | None:
        doc = inp.json
        return None if doc is None else [doc]

    def parse_record(self, record: Any, prefix: str) -> list[CanonicalRun]:
        if _is_pytorch(record):
            doc, args, model = _from_pytorch(record)
            run = parse_offline(doc, args, model)
            run.source.notes.append("read from the .pytorch.json twin (SAVE_TO_PYTORCH_BENCHMARK_FORMAT)")
            return [run]
        if _is_latency(record) or _is_throughput(record):
            return [parse_offline(record, {}, None)]
        raise self.fail("expected the latency {avg_latency, latencies, percentiles} or throughput JSON", "body")


PARSERS = [VllmOfflineParser()]
