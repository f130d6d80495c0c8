"""SGLang ``python -m sglang.bench_offline_throughput --result-filename FILE`` (docs/formats.md §7.2).

The offline engine (no HTTP server) is handed every prompt at once and batches them itself; the
file appends one JSON object per run (``python/sglang/bench_offline_throughput.py``,
``throughput_test_once``). Times are in **seconds**, rates in tok/s and req/s:

* ``successful_requests`` → ``num_requests`` and ``requests_completed``; ``total_latency`` (the
  makespan of the whole set) → ``duration_s``; ``total_input_tokens`` / ``total_output_tokens`` per
  request → the mean prompt and output lengths;
* ``output_throughput``, ``input_throughput``, ``total_throughput`` and ``request_throughput`` are
  aggregate rates: ``output_throughput_tok_s``, ``input_throughput_tok_s``, ``total_throughput_tok_s``,
  ``request_throughput_rps``;
* ``last_gen_throughput`` (newer builds) is the scheduler's last logged decode rate of the whole
  running batch, taken when the run ends, often with the batch drained to a few stragglers: kept as
  a label, never as a rate of the run.

No per-request latency is written, so no TTFT or TPOT. With one prompt the makespan is that request's
latency: ``e2e_ms``, and when the prompt is short beside the output (at most a tenth of it) the output
rate is the sequence's decode speed (``decode_tok_s``, a lower bound: the prefill is inside it). The
file names neither the model nor the hardware: pass them with the submission.
"""

from __future__ import annotations

from typing import Any

from advisor.canonical import CanonicalRun, Metrics, Percentiles, Setup, Source, Workload
from advisor.errors import IngestError
from advisor.ingest.base import Input, ParserBase
from advisor.ingest.records import first_record_is, records_where
from advisor.ingest.values import as_float

__all__ = ["PARSERS", "SglangOfflineParser"]

_KEYS = frozenset(
    {"successful_requests", "total_latency", "total_input_tokens", "total_output_tokens", "output_throughput"}
)
#: With one prompt, the output rate is its decode speed when the prompt is at most this share of the
#: output (the prefill hidden in the makespan then costs little).
_SHORT_PROMPT = 0.1


def _is_record(obj: object) -> bool:
    # bench_one_batch also writes total_latency, but with batch_size / prefill_latency and no
    # successful_requests; bench_serving writes completed / duration.
    return isinstance(obj, dict) and set(obj) >= _KEYS and "backend" in obj


class SglangOfflineParser(ParserBase):
    format_id = "sglang_offline"
    description = "SGLang bench_offline_throughput result JSONL (one offline-engine run per record)"
    tool = "sglang.bench_offline_throughput"
    priority = 45

    def sniff(self, inp: Input) -> bool:
        return first_record_is(inp, _is_record)

    def read(self, inp: Input) -> tuple[list[Any], list[str]]:
        rows, notes = records_where(inp, _is_record)
        if not rows:
            raise self.fail(
                "no bench_offline_throughput records (successful_requests, total_latency, output_throughput, …)",
                "body",
            )
        return rows, notes

    def parse_record(self, record: Any, prefix: str) -> list[CanonicalRun]:
        def num(key: str) -> float | None:
            value = as_float(record.get(key), f"{prefix}{key}")
            if value is not None and value < 0:
                # The tool starts every figure at -1 and overwrites it when the run ends.
                raise IngestError(f"cannot be negative, got {value:g} (an unfinished run?)", field=f"{prefix}{key}")
            return value

        requests = num("successful_requests")
        if not requests:
            raise IngestError("no request completed (successful_requests is 0)", field=f"{prefix}successful_requests")
        latency = num("total_latency")
        prompt_total, output_total = num("total_input_tokens"), num("total_output_tokens")
        notes = [
            "offline engine (no HTTP server): every prompt is queued at once and the engine batches them; "
            "the rates are aggregates over the makespan, and no per-request latency is written"
        ]
        metrics = Metrics(
            duration_s=latency,
            requests_completed=int(requests),
            output_throughput_tok_s=num("output_throughput"),
            input_throughput_tok_s=num("input_throughput"),
            total_throughput_tok_s=num("total_throughput"),
            request_throughput_rps=num("request_throughput"),
        )
        workload = Workload(
            num_requests=int(requests),
            prompt_tokens_mean=prompt_total / requests if prompt_total is not None else None,
            output_tokens_mean=output_total / requests if output_total is not None else None,
        )
        if requests == 1:
            workload.concurrency = 1
            if latency:
                metrics.e2e_ms = Percentiles(mean=latency * 1000.0)
            short = prompt_total is not None and output_total and prompt_total <= _SHORT_PROMPT * output_total
            if short and metrics.output_throughput_tok_s:
                metrics.decode_tok_s = metrics.output_throughput_tok_s
                notes.append(
                    "one prompt: e2e_ms is its latency, and decode_tok_s = output_throughput, a lower bound: the "
                    f"prefill of its {prompt_total:.0f} prompt tokens is inside the time of its {output_total:.0f} "
                    "output tokens"
                )
        labels: dict[str, str] = {}
        if (last := num("last_gen_throughput")) is not None:
            labels["last_gen_throughput_tok_s"] = f"{last:.1f}"
            notes.append(
                "last_gen_throughput (the scheduler's last logged batch decode rate, at the end of the run) "
                "is kept as a label, not as a rate of the run"
            )
        backend = record.get("backend")
        if isinstance(backend, str) and backend:
            labels["backend"] = backend
        notes.append("the file names neither the model nor the hardware: pass them with the submission")
        return [
            CanonicalRun(
                labels=labels,
                setup=Setup(runtime="sglang"),
                workload=workload,
                metrics=metrics,
                source=Source(notes=notes),
            )
        ]


PARSERS = [SglangOfflineParser()]
