"""Per-request exports, summarised here: aiperf's ``profile_export.jsonl`` and llmperf's
``*_individual_responses.json`` (docs/formats.md §6.5, §6.6).

Both hold one record per request and no summary, so the distributions are computed from the records
with the one percentile summary (:mod:`advisor.ingest.statistics`), the way the tools compute their
own summary files.

aiperf (``MetricRecordInfo``): ``metadata`` (ns timestamps, ``benchmark_phase``, ``was_cancelled``),
``metrics`` (``{tag: {"value", "unit"}}``; ``inter_chunk_latency`` is the list of gaps between chunks)
and ``error``. Records of the ``warmup`` phase are left out, and so are failed requests (counted as
failed) and the ones aiperf cancelled on purpose (``was_cancelled``, a ``RequestCancellationError``
of ``--request-cancellation-rate``: counted in ``num_requests`` and noted, not failed).
``inter_token_latency`` is TPOT; the pooled chunk gaps are ITL.

llmperf: a JSON list of ``{ttft_s, inter_token_latency_s, end_to_end_latency_s, number_input_tokens,
number_output_tokens, error_code, error_msg}``, seconds throughout. As in its summary,
``inter_token_latency_s`` is end-to-end ÷ output tokens (TTFT included): ``e2e_per_token_ms``.
"""

from __future__ import annotations

from typing import Any

from advisor.canonical import CanonicalRun, Metrics, Setup, Source, Workload
from advisor.errors import IngestError
from advisor.ingest.base import Input, ParserBase
from advisor.ingest.derive import decode_from_tpot, prefill_from_ttft
from advisor.ingest.statistics import distribution, mean_of
from advisor.ingest.units import TIME_UNITS_MS, epoch_to_utc
from advisor.ingest.values import as_dict, as_float, as_int, as_list

__all__ = ["PARSERS", "AiperfRecordsParser", "LlmperfResponsesParser", "max_in_flight"]

_LLMPERF_KEYS = frozenset({"ttft_s", "end_to_end_latency_s", "inter_token_latency_s", "number_output_tokens"})


def max_in_flight(spans: list[tuple[float, float]]) -> int:
    """The most requests in flight at once, from their (start, end) times."""
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans], key=lambda e: (e[0], e[1]))
    best = current = 0
    for _, step in events:
        current += step
        best = max(best, current)
    return best


def _is_aiperf_record(record: object) -> bool:
    return (
        isinstance(record, dict)
        and isinstance(record.get("metadata"), dict)
        and isinstance(record.get("metrics"), dict)
        and "benchmark_phase" in record["metadata"]
    )


def _ms(metric: object, field: str) -> list[float]:
    """A time metric's value(s) in ms: one number, or a list (``inter_chunk_latency``)."""
    obj = as_dict(metric)
    if not obj:
        return []
    unit = obj.get("unit")
    if not isinstance(unit, str) or unit.strip().lower() not in TIME_UNITS_MS:
        raise IngestError(f"not a time unit: {unit!r}", field=f"{field}.unit")
    scale = TIME_UNITS_MS[unit.strip().lower()]
    raw = obj.get("value")
    values = raw if isinstance(raw, list) else [raw]
    out: list[float] = []
    for value in values:
        number = as_float(value, f"{field}.value")
        if number is None:
            continue
        if number < 0:
            raise IngestError("cannot be negative", field=f"{field}.value")
        out.append(number * scale)
    return out


def _count(metric: object, field: str) -> float | None:
    value = as_float(as_dict(metric).get("value"), f"{field}.value")
    if value is not None and value < 0:
        raise IngestError("cannot be negative", field=f"{field}.value")
    return value


def parse_aiperf_records(records: list[Any]) -> CanonicalRun:
    notes: list[str] = []
    ttft: list[float] = []
    tpot: list[float] = []
    gaps: list[float] = []
    e2e: list[float] = []
    prompt: list[float] = []
    output: list[float] = []
    spans: list[tuple[float, float]] = []
    warmup = failed = cancelled = 0
    for index, record in enumerate(records):
        if not _is_aiperf_record(record):
            raise IngestError("not an aiperf record (metadata, metrics)", field=f"[{index}]")
        meta, metrics = record["metadata"], record["metrics"]
        if meta.get("benchmark_phase") == "warmup":
            warmup += 1
            continue
        start, end = as_float(meta.get("request_start_ns")), as_float(meta.get("request_end_ns"))
        if start is not None and end is not None and end >= start:
            spans.append((start, end))
        error = record.get("error")
        if meta.get("was_cancelled") or (isinstance(error, dict) and error.get("type") == "RequestCancellationError"):
            cancelled += 1  # the test's design (--request-cancellation-rate), not a failure
            continue
        if error:
            failed += 1
            continue
        where = f"[{index}].metrics"
        ttft += _ms(metrics.get("time_to_first_token"), f"{where}.time_to_first_token")
        tpot += _ms(metrics.get("inter_token_latency"), f"{where}.inter_token_latency")
        gaps += _ms(metrics.get("inter_chunk_latency"), f"{where}.inter_chunk_latency")
        e2e += _ms(metrics.get("request_latency"), f"{where}.request_latency")
        for bucket, tag in ((prompt, "input_sequence_length"), (output, "output_sequence_length")):
            value = _count(metrics.get(tag), f"{where}.{tag}")
            if value is not None:
                bucket.append(value)
    completed = len(e2e) if e2e else len(ttft)
    if warmup:
        notes.append(f"{warmup} warm-up record(s) left out (benchmark_phase = warmup)")
    if cancelled:
        notes.append(
            f"{cancelled} request(s) cancelled on purpose (was_cancelled, aiperf --request-cancellation-rate): "
            "left out of the statistics and of requests_failed"
        )
    workload = Workload(
        num_requests=completed + failed + cancelled,
        prompt_tokens_mean=mean_of(prompt),
        output_tokens_mean=mean_of(output),
        streaming=True if gaps else None,
    )
    out = Metrics(requests_completed=completed, requests_failed=failed)
    if spans:
        first, last = min(s for s, _ in spans), max(e for _, e in spans)
        duration = (last - first) / 1e9
        workload.concurrency = float(max_in_flight(spans))
        notes.append("concurrency is the most requests in flight at once, from the records' timestamps")
        if duration > 0:
            out.duration_s = duration
            out.request_throughput_rps = completed / duration
            if output:
                out.output_throughput_tok_s = sum(output) / duration
    if completed == 0:
        notes.append("no request completed: latency and throughput statistics are absent")
        out.request_throughput_rps = out.output_throughput_tok_s = None
    else:
        out.ttft_ms = distribution(ttft)
        out.tpot_ms = distribution(tpot)
        out.itl_ms = distribution(gaps)
        out.e2e_ms = distribution(e2e)
        notes.append("distributions computed from the per-request records")
        decode_from_tpot(out)
        prefill_from_ttft(out, workload, notes)
    measured_at = epoch_to_utc(min(s for s, _ in spans) / 1e9, "metadata.request_start_ns") if spans else None
    return CanonicalRun(
        measured_at=measured_at, setup=Setup(), workload=workload, metrics=out, source=Source(notes=notes)
    )


class AiperfRecordsParser(ParserBase):
    format_id = "aiperf_records"
    description = "NVIDIA aiperf per-request profile_export.jsonl"
    tool = "aiperf"
    priority = 45

    def sniff(self, inp: Input) -> bool:
        records = inp.json_lines
        return bool(records) and _is_aiperf_record(records[0])  # type: ignore[index]

    def records(self, inp: Input) -> list[Any] | None:
        return inp.json_lines

    def parse_records(self, records: list[Any]) -> list[CanonicalRun]:
        return [parse_aiperf_records(records)]


def _is_llmperf_response(record: object) -> bool:
    return isinstance(record, dict) and set(record) >= _LLMPERF_KEYS


def parse_llmperf_responses(records: list[Any]) -> CanonicalRun:
    ttft: list[float] = []
    e2e: list[float] = []
    per_token: list[float] = []
    prompt: list[float] = []
    output: list[float] = []
    failed = 0
    for index, record in enumerate(records):
        if not _is_llmperf_response(record):
            raise IngestError("not an llmperf response record", field=f"[{index}]")
        if record.get("error_code") is not None or record.get("error_msg"):
            failed += 1
            continue
        for bucket, key in ((ttft, "ttft_s"), (e2e, "end_to_end_latency_s"), (per_token, "inter_token_latency_s")):
            value = as_float(record.get(key), f"[{index}].{key}")
            if value is None:
                continue
            if value < 0:
                raise IngestError("cannot be negative", field=f"[{index}].{key}")
            bucket.append(value * 1000.0)
        for bucket, key in ((prompt, "number_input_tokens"), (output, "number_output_tokens")):
            count = as_int(record.get(key), f"[{index}].{key}")
            if count is not None:
                bucket.append(float(count))
    notes = [
        "output token counts come from llmperf's Llama-2 tokenizer (tokenizer_mismatch) and may "
        "differ from the served model's",
        "individual_responses names neither the model nor the concurrency: the *_summary.json beside it does",
    ]
    completed = len(e2e)
    workload = Workload(
        num_requests=completed + failed, prompt_tokens_mean=mean_of(prompt), output_tokens_mean=mean_of(output)
    )
    metrics = Metrics(requests_completed=completed, requests_failed=failed)
    if completed == 0:
        notes.append("no request completed: latency and throughput statistics are absent")
    else:
        metrics.ttft_ms = distribution(ttft)
        metrics.e2e_ms = distribution(e2e)
        metrics.e2e_per_token_ms = distribution(per_token)
        notes.append("distributions computed from the per-request records")
        e2e_mean, ttft_mean, out = metrics.e2e_ms.mean, metrics.ttft_ms.mean, workload.output_tokens_mean
        if e2e_mean is not None and ttft_mean is not None and out is not None and out > 1 and e2e_mean > ttft_mean:
            metrics.decode_tok_s = (out - 1) * 1000.0 / (e2e_mean - ttft_mean)
            notes.append(
                "decode_tok_s approximated as (output_tokens_mean − 1) / (e2e_ms.mean − ttft_ms.mean); "
                "llmperf reports no TPOT"
            )
    return CanonicalRun(setup=Setup(), workload=workload, metrics=metrics, source=Source(notes=notes))


class LlmperfResponsesParser(ParserBase):
    format_id = "llmperf_responses"
    description = "ray-project llmperf *_individual_responses.json"
    tool = "llmperf"
    priority = 45

    def sniff(self, inp: Input) -> bool:
        doc = inp.json
        return isinstance(doc, list) and bool(doc) and _is_llmperf_response(doc[0])

    def records(self, inp: Input) -> list[Any] | None:
        doc = inp.json
        return as_list(doc) if isinstance(doc, list) else None

    def parse_records(self, records: list[Any]) -> list[CanonicalRun]:
        return [parse_llmperf_responses(records)]


PARSERS = [AiperfRecordsParser(), LlmperfResponsesParser()]
