"""kubernetes-sigs inference-perf lifecycle reports: ``summary_lifecycle_metrics.json`` and
``stage_<n>_lifecycle_metrics.json``.

``{load_summary: {count, schedule_delay, send_duration?, requested_rate?, achieved_rate?, concurrency?},
successes: {count, latency: {…}, throughput: {…}, prompt_len, output_len}, failures: {count, …}}``.
Every latency is in **seconds**; percentile keys are ``p0.1`` … ``median`` … ``p99.9``.

inference-perf's definitions (``inference_perf/reportgen/base.py``): ``time_per_output_token`` is
``(latency − ttft) / (output tokens − 1)`` (TPOT), ``normalized_time_per_output_token`` is
``latency / output tokens`` (end-to-end ÷ tokens), ``inter_token_latency`` is every gap between
streamed tokens pooled (ITL). A ``concurrent`` stage adds ``load_summary.concurrency`` (its
``concurrency_level``) and reports its request count as ``requested_rate``: the concurrency is
stored and that "rate" is not. The report carries no model or server name; pass them with the
submission. The ``*_prometheus_metrics.json`` companions are server-side aggregates of unverified
units and are not read.
"""

from __future__ import annotations

from typing import Any

from advisor.canonical import CanonicalRun, Metrics, Percentiles, Setup, Source, Workload
from advisor.errors import IngestError
from advisor.ingest.base import Input, ParserBase
from advisor.ingest.derive import decode_from_tpot, prefill_from_ttft
from advisor.ingest.stat_names import percentiles_from_mapping
from advisor.ingest.values import as_dict, as_float, as_int, dig

__all__ = ["PARSERS", "InferencePerfParser"]

_LATENCIES = {
    "time_to_first_token": "ttft_ms",
    "time_per_output_token": "tpot_ms",
    "inter_token_latency": "itl_ms",
    "request_latency": "e2e_ms",
    "normalized_time_per_output_token": "e2e_per_token_ms",
}


def _is_lifecycle(doc: object) -> bool:
    return (
        isinstance(doc, dict)
        and isinstance(doc.get("load_summary"), dict)
        and isinstance(dig(doc, "successes", "latency"), dict)
        and "failures" in doc
    )


def parse_lifecycle(doc: dict[str, Any]) -> CanonicalRun:
    notes: list[str] = ["inference-perf reports no model or server: give them with the submission"]
    load = as_dict(doc.get("load_summary"))
    successes = as_dict(doc.get("successes"))
    completed = as_int(successes.get("count"), "successes.count")
    failed = as_int(dig(doc, "failures", "count"), "failures.count")
    for name, value in (("successes.count", completed), ("failures.count", failed)):
        if value is not None and value < 0:
            raise IngestError("cannot be negative", field=name)

    workload = Workload(
        num_requests=as_int(load.get("count")),
        request_rate=as_float(load.get("requested_rate")),
        prompt_tokens_mean=as_float(dig(successes, "prompt_len", "mean")),
        output_tokens_mean=as_float(dig(successes, "output_len", "mean")),
    )
    concurrency = as_float(load.get("concurrency"), "load_summary.concurrency")
    if concurrency is not None and concurrency > 0:
        # A ``concurrent`` stage (``concurrency_level``, ``num_requests``): inference-perf sets the
        # stage's rate to its request count at run time (``inference_perf/main.py``) and reports it as
        # ``requested_rate``, so that figure is no arrival rate.
        workload.concurrency = concurrency
        notes.append(
            f"concurrency {concurrency:g} derived from the report's load_summary.concurrency (the stage's "
            "concurrency_level: a closed loop)"
        )
        if workload.request_rate is not None:
            notes.append(
                f"requested_rate {workload.request_rate:g} of a concurrent stage is its request count, "
                "not an arrival rate: not stored as request_rate"
            )
            workload.request_rate = None
    elif workload.request_rate is None:
        notes.append("a summary over all stages: the stages' request rates differ, none is recorded")
    metrics = Metrics(
        requests_completed=completed,
        requests_failed=failed,
        duration_s=as_float(load.get("send_duration")),
    )
    if completed == 0:
        notes.append("no request succeeded: latency and throughput statistics are absent")
    else:
        latency = as_dict(successes.get("latency"))
        for name, target in _LATENCIES.items():
            stats = latency.get(name)
            if isinstance(stats, dict):
                parsed = percentiles_from_mapping(stats, unit="s", field=f"successes.latency.{name}")
                setattr(metrics, target, parsed)
        throughput = as_dict(successes.get("throughput"))
        metrics.input_throughput_tok_s = as_float(throughput.get("input_tokens_per_sec"))
        metrics.output_throughput_tok_s = as_float(throughput.get("output_tokens_per_sec"))
        metrics.total_throughput_tok_s = as_float(throughput.get("total_tokens_per_sec"))
        metrics.request_throughput_rps = as_float(throughput.get("requests_per_sec"))
        _reconcile_tpot(metrics, workload.output_tokens_mean, notes)
        decode_from_tpot(metrics)
        if workload.concurrency is not None:
            prefill_from_ttft(metrics, workload, notes)
        else:
            notes.append("prefill_tok_s not derived: inference-perf drives open-loop load, TTFT includes queueing")
    if any(not getattr(metrics, f).is_empty() for f in _LATENCIES.values()):
        _check_order(metrics)
    return CanonicalRun(
        workload=workload,
        metrics=metrics,
        setup=Setup(),
        source=Source(notes=notes),
    )


#: How far the report's mean TPOT may sit from what its own mean latencies imply before it is
#: not taken (means of per-request ratios differ from ratios of means by a few per cent when
#: output lengths vary; a factor of 1.5 is no such rounding).
TPOT_MISMATCH = 1.5


def _reconcile_tpot(metrics: Metrics, output_mean: float | None, notes: list[str]) -> None:
    """Keep ``time_per_output_token`` only when it agrees with the report's own definition of it,
    ``(request_latency − ttft) / (output tokens − 1)``, evaluated on the means.

    A real vLLM 0.11 report (kubernetes-sigs/inference-perf's KubeCon NA 2025 demo, Llama-3.1-8B on
    an H100) has a mean TPOT of 3.48 ms and a mean inter-token gap of 3.48 ms whose median is 34 µs,
    while its latencies give (483 − 33) / (62.35 − 1) = 7.34 ms: its streamed gaps count about two
    per output token, half of them near zero. 3.48 ms per token would be 288 tok/s on a device
    whose bandwidth allows 208, so TPOT becomes the latencies' figure (a mean, no percentiles),
    with a note. The inter-token latencies stay as measured: what they time (chunks, not tokens)
    is for the analysis to say (MEAS008)."""
    tpot, e2e, ttft = metrics.tpot_ms.mean, metrics.e2e_ms.mean, metrics.ttft_ms.mean
    if tpot is None or e2e is None or ttft is None or output_mean is None or output_mean <= 2 or tpot <= 0:
        return
    implied = (e2e - ttft) / (output_mean - 1)
    if implied <= 0 or 1 / TPOT_MISMATCH <= tpot / implied <= TPOT_MISMATCH:
        return
    notes.append(
        f"time_per_output_token (mean {tpot:.3g} ms) does not add up to the report's own latencies: "
        f"(request_latency {e2e:.4g} ms - time_to_first_token {ttft:.4g} ms) / ({output_mean:.4g} - 1 output "
        f"tokens) = {implied:.3g} ms; the streamed gaps are not one per token, so TPOT (and the decode "
        "rate) is taken from the latencies, mean only"
    )
    metrics.tpot_ms = Percentiles(mean=implied)


def _check_order(metrics: Metrics) -> None:
    ttft: Percentiles = metrics.ttft_ms
    e2e: Percentiles = metrics.e2e_ms
    if ttft.mean is not None and e2e.mean is not None and e2e.mean < ttft.mean:
        raise IngestError("request_latency is shorter than time_to_first_token", field="successes.latency")


class InferencePerfParser(ParserBase):
    format_id = "inference_perf"
    description = "kubernetes-sigs inference-perf summary/stage lifecycle metrics JSON"
    tool = "inference-perf"
    priority = 85

    def sniff(self, inp: Input) -> bool:
        return _is_lifecycle(inp.json)

    def parse_record(self, record: Any, prefix: str) -> list[CanonicalRun]:
        if not _is_lifecycle(record):
            raise self.fail("expected {load_summary, successes: {latency}, failures}", "body")
        return [parse_lifecycle(record)]


PARSERS = [InferencePerfParser()]
