"""SGLang ``python -m sglang.bench_one_batch`` results (``--result-filename``, default
``result.jsonl``; docs/formats.md §7.1).

One static batch, no server: ``batch_size`` prompts of ``input_len`` tokens are prefilled together,
then ``output_len`` tokens are decoded for all of them. The file appends one JSON object per case
(pretty-printed objects back to back in some versions, one per line in others). Every time is in
**seconds** (``python/sglang/bench_one_batch.py``):

* ``prefill_latency`` → ``ttft_ms`` (the whole batch's prefill), ``prefill_throughput`` (``input_len
  × batch_size / prefill_latency``) → ``prefill_tok_s``;
* ``median_decode_latency`` is the median time of one decode step for the whole batch: ``tpot_ms``
  p50, and ``decode_tok_s = 1 / median_decode_latency`` per sequence; ``median_decode_throughput``
  (``batch_size / step``) → ``output_throughput_tok_s``;
* ``total_latency`` → ``e2e_ms``, ``overall_throughput`` → ``total_throughput_tok_s``.
"""

from __future__ import annotations

from typing import Any

from advisor.canonical import CanonicalRun, Metrics, Percentiles, Setup, Source, Workload
from advisor.errors import IngestError
from advisor.ingest.base import Input, ParserBase
from advisor.ingest.records import first_record_is, records_where
from advisor.ingest.values import as_float

__all__ = ["PARSERS", "SglangOneBatchParser"]

_KEYS = frozenset({"batch_size", "input_len", "output_len", "prefill_latency", "prefill_throughput"})


def _is_record(obj: object) -> bool:
    return isinstance(obj, dict) and set(obj) >= _KEYS and ("total_latency" in obj or "overall_throughput" in obj)


class SglangOneBatchParser(ParserBase):
    format_id = "sglang_one_batch"
    description = "SGLang bench_one_batch result JSONL (one static batch per record)"
    tool = "sglang.bench_one_batch"
    priority = 45

    def sniff(self, inp: Input) -> bool:
        return first_record_is(inp, _is_record)

    def read(self, inp: Input) -> tuple[list[Any], list[str]]:
        rows, notes = records_where(inp, _is_record)
        if not rows:
            raise self.fail("no bench_one_batch records (batch_size, input_len, prefill_latency, …)", "body")
        return rows, notes

    def parse_record(self, record: Any, prefix: str) -> list[CanonicalRun]:
        def num(key: str) -> float | None:
            value = as_float(record.get(key), f"{prefix}{key}")
            if value is not None and value < 0:
                raise IngestError(f"cannot be negative, got {value:g}", field=f"{prefix}{key}")
            return value

        batch, prompt, output = num("batch_size"), num("input_len"), num("output_len")
        if not batch:
            raise IngestError("batch_size must be at least 1", field=f"{prefix}batch_size")
        notes = ["one static batch without a server (no scheduling, no HTTP): engine-only figures"]
        metrics = Metrics(prefill_tok_s=num("prefill_throughput"))
        if (prefill := num("prefill_latency")) is not None:
            metrics.ttft_ms = Percentiles(mean=prefill * 1000.0)
        step = num("median_decode_latency")
        if step:
            metrics.tpot_ms = Percentiles(p50=step * 1000.0)
            metrics.decode_tok_s = 1.0 / step
            metrics.output_throughput_tok_s = num("median_decode_throughput") or batch / step
            notes.append("decode_tok_s = 1 / median_decode_latency (one step of the whole batch), per sequence")
        if (total := num("total_latency")) is not None:
            metrics.e2e_ms = Percentiles(mean=total * 1000.0)
        metrics.total_throughput_tok_s = num("overall_throughput")
        run_name = record.get("run_name")
        return [
            CanonicalRun(
                labels={"run_name": run_name} if isinstance(run_name, str) and run_name else {},
                setup=Setup(runtime="sglang"),
                workload=Workload(
                    num_requests=int(batch), concurrency=batch, prompt_tokens_mean=prompt, output_tokens_mean=output
                ),
                metrics=metrics,
                source=Source(notes=notes),
            )
        ]


PARSERS = [SglangOneBatchParser()]
