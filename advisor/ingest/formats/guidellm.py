"""guidellm ``benchmarks.json`` (or ``.yaml``), every layout from v0.2 to v0.8 (docs/formats.md §5).

| layout | top level | where the run's setup lives |
|---|---|---|
| v0.2–v0.3 | ``{benchmarks}`` | ``benchmark.args.strategy``, ``benchmark.worker.backend_model`` |
| v0.4 | ``{args, benchmarks}`` | ``args`` and ``benchmark.config`` |
| v0.5–v0.6 | ``{metadata: {version: 1}, args, benchmarks}`` | same |
| v0.7+ | ``{metadata: {version: 2}, config, benchmarks}`` | ``benchmark.config``, ``config.spec`` |

A sweep holds several benchmarks: one canonical run each. Performance numbers come from each
metric's ``successful`` distribution. The latency names are the trap (docs/formats.md §9.2):
``inter_token_latency_ms`` is ``(last − first token) / (tokens − 1)``, vLLM's TPOT but weighted by
tokens; ``time_per_output_token_ms`` *includes TTFT* (end-to-end ÷ tokens) and is stored as
``e2e_per_token_ms``, never as TPOT or ITL. ``request_latency`` is in **seconds**.
"""

from __future__ import annotations

import re
from typing import Any

from advisor.canonical import CanonicalRun, Metrics, Percentiles, Setup, Source, Workload
from advisor.errors import IngestError
from advisor.ingest.base import Input, ParserBase
from advisor.ingest.derive import decode_from_tpot, prefill_from_ttft
from advisor.ingest.stat_names import percentiles_from_mapping
from advisor.ingest.units import epoch_to_utc
from advisor.ingest.values import as_dict, as_float, as_int, dig

__all__ = ["PARSERS", "GuidellmParser", "parse_guidellm_benchmark"]


def _is_benchmark(bench: object) -> bool:
    return isinstance(dig(bench, "metrics", "time_to_first_token_ms"), dict)


def _is_report(doc: object) -> bool:
    # docs/formats.md §9.4 rule 3.
    benchmarks = dig(doc, "benchmarks")
    return isinstance(benchmarks, list) and bool(benchmarks) and all(_is_benchmark(b) for b in benchmarks)


def _layout(doc: dict[str, Any]) -> str:
    version = dig(doc, "metadata", "version")
    if version == 2:
        return "v0.7+ (report schema 2)"
    if version == 1:
        return "v0.5–v0.6 (report schema 1)"
    if isinstance(version, int):
        return f"report schema {version}"
    if "args" in doc:
        return "v0.4"
    return "v0.2–v0.3"


def _successful(metric: object) -> dict[str, Any] | None:
    """The ``successful`` distribution, or None when it is absent or empty (count 0: all zeros)."""
    dist = dig(metric, "successful")
    if not isinstance(dist, dict):
        return None
    if as_float(dist.get("count")) == 0:
        return None
    return dist


def _dist(metrics: dict[str, Any], name: str, *, unit: str | None, field: str) -> Percentiles:
    dist = _successful(metrics.get(name))
    if dist is None:
        return Percentiles()
    stats = {k: v for k, v in dist.items() if k not in ("mode", "variance", "count", "total_sum", "pdf")}
    return percentiles_from_mapping(stats, unit=unit, field=f"{field}.{name}.successful", zero_is_missing=True)


def _mean(metrics: dict[str, Any], name: str, field: str) -> float | None:
    dist = _successful(metrics.get(name))
    if dist is None:
        return None
    value = as_float(dist.get("mean"), f"{field}.{name}.successful.mean")
    if value is not None and value < 0:
        raise IngestError("cannot be negative", field=f"{field}.{name}.successful.mean")
    return value


def _totals(bench: dict[str, Any]) -> dict[str, Any]:
    for path in (
        ("metrics", "request_totals"),
        ("request_totals",),
        ("scheduler_metrics", "requests_made"),
        ("run_stats", "requests_made"),
    ):
        found = dig(bench, *path)
        if isinstance(found, dict):
            return found
    return {}


def _model(doc: dict[str, Any], bench: dict[str, Any]) -> str | None:
    for value in (
        dig(bench, "config", "backend", "model"),
        dig(bench, "worker", "backend_model"),
        dig(doc, "args", "model"),
        dig(doc, "config", "spec", "backend", "model"),
    ):
        if isinstance(value, str) and value:
            return value
    return None


#: A synthetic data spec's requested output length: ``--data "prompt_tokens=1024,output_tokens=128"``.
_SYNTHETIC_OUTPUT = re.compile(r"(?:^|[,\s'\"\[{])output_tokens\s*=\s*(\d+(?:\.\d+)?)")


def _spec_output_tokens(value: object, depth: int = 0) -> float | None:
    """The first ``output_tokens=N`` in a data spec string, list or object (every version writes
    ``--data`` differently: a string, a list of strings, ``[{kind, config}]``)."""
    if depth > 4:
        return None
    if isinstance(value, str):
        m = _SYNTHETIC_OUTPUT.search(value)
        return float(m.group(1)) if m else None
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    for item in items:
        found = _spec_output_tokens(item, depth + 1)
        if found is not None:
            return found
    return None


def _requested_output(doc: dict[str, Any], bench: dict[str, Any]) -> float | None:
    """The output length the synthetic data asked for, wherever the version keeps ``--data``."""
    for value in (
        dig(bench, "request_loader", "data"),
        dig(bench, "config", "requests", "data"),
        dig(doc, "args", "data"),
        dig(doc, "config", "spec", "data"),
        dig(doc, "config", "spec", "requests", "data"),
        dig(doc, "config", "requests", "data"),
    ):
        found = _spec_output_tokens(value)
        if found is not None and found > 0:
            return found
    return None


def parse_guidellm_benchmark(doc: dict[str, Any], bench: dict[str, Any], index: int) -> CanonicalRun:
    """One benchmark of a report as a canonical run."""
    field = f"benchmarks[{index}]"
    notes: list[str] = []
    metrics_doc = as_dict(bench.get("metrics"))
    strategy = as_dict(dig(bench, "config", "strategy")) or as_dict(dig(bench, "args", "strategy"))
    kind = strategy.get("type_") if isinstance(strategy.get("type_"), str) else None

    labels: dict[str, str] = {}
    for key, value in as_dict(dig(doc, "config", "metadata", "labels")).items():
        if isinstance(value, str | int | float) and not isinstance(value, bool):
            labels[str(key)] = str(value)
    if kind:
        labels["guidellm_strategy"] = kind

    totals = _totals(bench)
    successful = as_int(totals.get("successful"), f"{field}.request_totals.successful")
    errored = as_int(totals.get("errored"), f"{field}.request_totals.errored")
    incomplete = as_int(totals.get("incomplete"))
    for name, value in (("successful", successful), ("errored", errored)):
        if value is not None and value < 0:
            raise IngestError("cannot be negative", field=f"{field}.request_totals.{name}")
    if incomplete:
        notes.append(f"{incomplete} request(s) were still running when the window closed (incomplete)")

    workload = Workload(
        num_requests=as_int(totals.get("total")),
        prompt_tokens_mean=_mean(metrics_doc, "prompt_token_count", field),
        output_tokens_mean=_mean(metrics_doc, "output_token_count", field),
        output_tokens_requested=_requested_output(doc, bench),
    )
    if kind == "synchronous":
        workload.concurrency = 1.0
    elif kind == "concurrent":
        workload.concurrency = as_float(strategy.get("streams"))
    else:
        observed = _mean(metrics_doc, "request_concurrency", field)
        if observed is not None:
            workload.concurrency = observed
            notes.append(f"workload.concurrency is the observed mean ({kind or 'unknown'} strategy)")
    if kind in ("constant", "poisson", "async"):
        workload.request_rate = as_float(strategy.get("rate"))

    metrics = Metrics(
        requests_completed=successful,
        requests_failed=errored,
        duration_s=as_float(bench.get("duration")),
    )
    if successful == 0:
        notes.append("no request succeeded: latency and throughput statistics are absent")
    else:
        metrics.ttft_ms = _dist(metrics_doc, "time_to_first_token_ms", unit="ms", field=field)
        metrics.tpot_ms = _dist(metrics_doc, "inter_token_latency_ms", unit="ms", field=field)
        if not metrics.tpot_ms.is_empty():
            notes.append(
                "tpot_ms is guidellm's inter_token_latency_ms: per-request TPOT weighted by output tokens, "
                "so its mean is a token-level mean"
            )
        metrics.e2e_per_token_ms = _dist(metrics_doc, "time_per_output_token_ms", unit="ms", field=field)
        metrics.e2e_ms = _dist(metrics_doc, "request_latency", unit="s", field=field)
        metrics.request_throughput_rps = _mean(metrics_doc, "requests_per_second", field)
        metrics.output_throughput_tok_s = _mean(metrics_doc, "output_tokens_per_second", field)
        # prompt_tokens_per_second / tokens_per_second are not read: guidellm books a request's prompt
        # tokens at one instant, and the time-weighted rate of such spikes can be absurd (1.4 M tok/s
        # in a real v0.5 report with 4 requests).
        decode_from_tpot(metrics)
        prefill_from_ttft(metrics, workload, notes)

    version = dig(doc, "metadata", "guidellm_version")
    return CanonicalRun(
        measured_at=epoch_to_utc(bench.get("start_time"), f"{field}.start_time"),
        labels=labels,
        setup=Setup(model=_model(doc, bench)),
        workload=workload,
        metrics=metrics,
        source=Source(
            tool_version=version if isinstance(version, str) else None,
            notes=[f"guidellm report layout {_layout(doc)}", *notes],
        ),
    )


def _document(inp: Input) -> Any:
    doc = inp.json
    if doc is not None:
        return doc
    # Parse YAML only when the text can be a guidellm report: a YAML parse of any text is costly and
    # every plain string is valid YAML.
    text = inp.text
    if text is None or "benchmarks:" not in text:
        return None
    return inp.yaml


class GuidellmParser(ParserBase):
    format_id = "guidellm"
    description = "guidellm benchmarks.json / .yaml report (v0.2 to v0.8 layouts; a sweep gives several runs)"
    tool = "guidellm"
    priority = 30

    def sniff(self, inp: Input) -> bool:
        return _is_report(_document(inp))

    def records(self, inp: Input) -> list[Any] | None:
        doc = _document(inp)
        return None if doc is None else [doc]

    def parse_record(self, record: Any, prefix: str) -> list[CanonicalRun]:
        if not isinstance(record, dict) or not isinstance(record.get("benchmarks"), list):
            raise self.fail("expected an object with a `benchmarks` list", "benchmarks")
        runs: list[CanonicalRun] = []
        for index, bench in enumerate(record["benchmarks"]):
            if not isinstance(bench, dict) or not _is_benchmark(bench):
                raise self.fail("not a generative benchmark (no metrics)", f"benchmarks[{index}]")
            runs.append(parse_guidellm_benchmark(record, bench, index))
        if not runs:
            raise self.fail("the report holds no benchmarks", "benchmarks")
        return runs


PARSERS = [GuidellmParser()]
