"""ray-project llmperf ``<model>_<in>_<out>_summary.json`` (docs/formats.md §6.3).

A flat document (nested dicts flattened with ``_``). Pitfalls:

* every latency is in **seconds**;
* ``results_inter_token_latency_s`` is per request ``sum(time_to_next_token) / output tokens`` and
  the sum *includes TTFT*: it is end-to-end ÷ tokens, stored as ``e2e_per_token_ms``, never as ITL
  or TPOT (docs/formats.md §9.2). llmperf has no TPOT;
* ``_min``/``_max`` of the token counts are numpy int64 serialised by ``default=str``: strings;
* output tokens are re-counted with a Llama-2 tokenizer whatever the model.

Sweep drivers around llmperf (philschmid/llmperf-bench's ``main.py``) collect the summaries of a
concurrency sweep in one JSON object keyed by concurrency (``{"1": {…summary…}, "2": …}``): each
value is llmperf's own summary, read as one run.
"""

from __future__ import annotations

from typing import Any

from advisor.canonical import CanonicalRun, Metrics, Percentiles, Setup, Source, Workload
from advisor.errors import IngestError
from advisor.ingest.base import Input, ParserBase
from advisor.ingest.stat_names import percentiles_from_mapping
from advisor.ingest.units import epoch_to_utc
from advisor.ingest.values import as_float, as_int

__all__ = ["PARSERS", "LlmperfParser"]

RESULTS_VERSION = "2023-08-31"

# Keys llmperf writes itself; other scalar top-level keys are `--metadata` (labels).
_CONFIG_KEYS = frozenset(
    {
        "version", "name", "model", "mean_input_tokens", "stddev_input_tokens", "mean_output_tokens",
        "stddev_output_tokens", "num_concurrent_requests", "timestamp",
    }
)  # fmt: skip


def _metric(doc: dict[str, Any], name: str, *, unit: str | None) -> Percentiles:
    prefix = f"results_{name}_"
    stats: dict[str, Any] = {}
    for key, value in doc.items():
        if not key.startswith(prefix):
            continue
        stat = key[len(prefix) :].removeprefix("quantiles_")
        stats[stat] = value
    return percentiles_from_mapping(stats, unit=unit, field=f"results_{name}")


def is_summary(doc: Any) -> bool:
    """One ``*_summary.json`` document (docs/formats.md §9.4 rule 4)."""
    return isinstance(doc, dict) and doc.get("version") == RESULTS_VERSION and "results_ttft_s_mean" in doc


def collected_summaries(doc: Any) -> dict[str, dict[str, Any]] | None:
    """The summaries of a JSON object whose every value is one (a sweep driver's file), else None."""
    if isinstance(doc, dict) and doc and not is_summary(doc) and all(is_summary(v) for v in doc.values()):
        return {str(key): value for key, value in doc.items()}
    return None


def parse_llmperf(doc: dict[str, Any]) -> CanonicalRun:
    notes: list[str] = [
        "output token counts come from llmperf's Llama-2 tokenizer (tokenizer_mismatch) and may "
        "differ from the served model's",
    ]
    labels = {
        key: str(value)
        for key, value in doc.items()
        if key not in _CONFIG_KEYS
        and not key.startswith("results_")
        and isinstance(value, str | int | float)
        and not isinstance(value, bool)
    }
    completed = as_int(doc.get("results_num_completed_requests"), "results_num_completed_requests")
    errors = as_int(doc.get("results_number_errors"), "results_number_errors")
    for name, value in (("results_num_completed_requests", completed), ("results_number_errors", errors)):
        if value is not None and value < 0:
            raise IngestError("cannot be negative", field=name)

    workload = Workload(
        num_requests=as_int(doc.get("results_num_requests_started")),
        concurrency=as_float(doc.get("num_concurrent_requests")),
        prompt_tokens_mean=as_float(doc.get("results_number_input_tokens_mean")),
        output_tokens_mean=as_float(doc.get("results_number_output_tokens_mean")),
    )
    metrics = Metrics(requests_completed=completed, requests_failed=errors)
    if completed == 0:
        notes.append("no request completed: latency and throughput statistics are absent")
    else:
        metrics.ttft_ms = _metric(doc, "ttft_s", unit="s")
        metrics.e2e_ms = _metric(doc, "end_to_end_latency_s", unit="s")
        metrics.e2e_per_token_ms = _metric(doc, "inter_token_latency_s", unit="s")
        metrics.output_throughput_tok_s = as_float(doc.get("results_mean_output_throughput_token_per_s"))
        per_min = as_float(doc.get("results_num_completed_requests_per_min"))
        metrics.request_throughput_rps = per_min / 60.0 if per_min is not None else None
        # No TPOT in llmperf. The per-request "output throughput" is output ÷ E2E and counts TTFT as
        # decode time, so it is not a decode speed either. Decode time is what is left of E2E after
        # TTFT; the ratio of means below is the honest approximation.
        e2e, ttft, out = metrics.e2e_ms.mean, metrics.ttft_ms.mean, workload.output_tokens_mean
        if e2e is not None and ttft is not None and out is not None and out > 1 and e2e > ttft:
            metrics.decode_tok_s = (out - 1) * 1000.0 / (e2e - ttft)
            notes.append(
                "decode_tok_s approximated as (output_tokens_mean − 1) / (e2e_ms.mean − ttft_ms.mean); "
                "llmperf reports no TPOT"
            )
    return CanonicalRun(
        measured_at=epoch_to_utc(doc.get("timestamp"), "timestamp"),
        labels=labels,
        setup=Setup(model=doc["model"] if isinstance(doc.get("model"), str) and doc["model"] else None),
        workload=workload,
        metrics=metrics,
        source=Source(notes=notes),
    )


class LlmperfParser(ParserBase):
    format_id = "llmperf"
    description = "ray-project llmperf token_benchmark_ray.py *_summary.json"
    tool = "llmperf"
    priority = 40

    def sniff(self, inp: Input) -> bool:
        doc = inp.json
        return is_summary(doc) or collected_summaries(doc) is not None

    def parse_record(self, record: Any, prefix: str) -> list[CanonicalRun]:
        if not isinstance(record, dict):
            raise self.fail("expected one JSON object (the *_summary.json file)", "body")
        collected = collected_summaries(record)
        if collected is None:
            return [parse_llmperf(record)]
        runs: list[CanonicalRun] = []
        for key, summary in collected.items():
            try:
                run = parse_llmperf(summary)
            except IngestError as exc:
                exc.field = f"{key}.{exc.field}" if exc.field else key
                raise
            run.source.notes.append(
                f"one of {len(collected)} llmperf summaries the file collects by key (this one under '{key}')"
            )
            runs.append(run)
        return runs


PARSERS = [LlmperfParser()]
