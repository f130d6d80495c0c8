"""Prometheus ``/metrics`` scrapes of LLM servers: parsing, deltas and the canonical run they give.

Used by the ``prometheus`` file parser and, later, by the live probe (``advisor measure``), so it works
on text and :class:`Scrape` objects, never on files.

* :func:`parse_scrape` reads one exposition with ``prometheus_client``'s own parser (never a
  hand-written one) into a :class:`Scrape`; :func:`parse_scrapes` splits a file holding several
  scrapes (``cat before.prom after.prom``, or blocks headed by ``# scraped_at: <RFC 3339>``).
* :func:`scrape_delta` turns a before/after pair into :class:`Telemetry`: counter and histogram
  deltas, gauges over the scrapes taken during the run. A counter that went down means the server
  restarted: that is an :class:`~advisor.errors.IngestError`, never a silently negative rate.
* :func:`scrape_totals` does the same for one scrape: cumulative since the server started.
* :func:`telemetry_to_run` maps telemetry onto a :class:`~advisor.canonical.CanonicalRun`
  (FORMATS.md §9.3, "Prometheus scrapes").

Histogram percentiles are estimated like Prometheus' ``histogram_quantile``: find the bucket that
holds the rank, then interpolate linearly inside it (:func:`histogram_quantile`). An estimate that
lands in the first bucket (whose lower edge, 0, is an assumption) or in the ``+Inf`` bucket (no upper
edge) is not a measurement, so it is not reported; vLLM's ITL buckets start at 10 ms, so sub-10 ms
ITL percentiles never come from here (FORMATS.md §9.3).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from prometheus_client.parser import text_string_to_metric_families

from advisor.canonical import CanonicalRun, Metrics, Percentiles, Setup, Source, Workload
from advisor.errors import IngestError, MalformedInput

__all__ = [
    "ENGINES",
    "GaugeStats",
    "Histogram",
    "QuantileEstimate",
    "Scrape",
    "Telemetry",
    "histogram_quantile",
    "parse_scrape",
    "parse_scrapes",
    "scrape_delta",
    "scrape_totals",
    "split_scrapes",
    "telemetry_to_run",
]

#: Engines recognised by their metric prefix, also the ``setup.runtime`` they map to.
ENGINES: tuple[str, ...] = ("vllm", "sglang", "tgi", "llamacpp")
_PREFIXES: dict[str, str] = {"vllm": "vllm:", "sglang": "sglang:", "tgi": "tgi_", "llamacpp": "llamacpp:"}
_TOOL_NAMES: dict[str, str] = {
    "vllm": "vLLM /metrics",
    "sglang": "SGLang /metrics",
    "tgi": "TGI /metrics",
    "llamacpp": "llama-server /metrics",
}

LabelSet = tuple[tuple[str, str], ...]

#: Older metric names read as their newer equivalents when the newer one is absent (FORMATS.md §3.1:
#: vLLM deprecated these in 0.9–0.11; SGLang renamed its token-gap histogram the same way).
_RENAMES: tuple[tuple[str, str], ...] = (
    ("vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc"),
    ("vllm:time_per_output_token_seconds", "vllm:inter_token_latency_seconds"),
    ("vllm:gpu_prefix_cache_queries", "vllm:prefix_cache_queries"),
    ("vllm:gpu_prefix_cache_hits", "vllm:prefix_cache_hits"),
    ("sglang:time_per_output_token_seconds", "sglang:inter_token_latency_seconds"),
)
_SAMPLE_SUFFIXES = ("", "_total", "_created", "_bucket", "_sum", "_count")

#: Labels that split one request stream by tensor/pipeline-parallel rank: the series report the
#: same requests, so they are combined with max, not summed. Every other label (vLLM ``engine``,
#: SGLang ``dp_rank``, ``finished_reason``, …) splits the traffic and is summed.
_RANK_LABELS = frozenset({"tp_rank", "pp_rank", "attn_tp_rank", "moe_ep_rank"})
_MODEL_LABEL = "model_name"

_SCRAPED_AT = re.compile(r"^#\s*scraped_at\s*[:=]?\s*(\S+)\s*$", re.IGNORECASE)
_DIRECTIVE = re.compile(r"^#\s*(HELP|TYPE)\s+(\S+)")

#: Percentiles reported from histograms, with their canonical keys.
_QUANTILES: tuple[tuple[float, str], ...] = (
    (0.5, "p50"),
    (0.9, "p90"),
    (0.95, "p95"),
    (0.99, "p99"),
)


# --------------------------------------------------------------------------------------------------
# Histograms


@dataclass(frozen=True)
class QuantileEstimate:
    """A quantile interpolated inside the bucket ``(lower, upper]`` that holds its rank."""

    value: float
    lower: float
    upper: float
    #: True when the rank fell in the first bucket, whose lower edge (0) is assumed, not measured.
    first_bucket: bool

    @property
    def reliable(self) -> bool:
        """False in the first bucket and in the ``+Inf`` bucket: the estimate is a guess there."""
        return not self.first_bucket and not math.isinf(self.upper)


def histogram_quantile(q: float, bounds: Sequence[float], counts: Sequence[float]) -> QuantileEstimate | None:
    """The ``q``-quantile (0..1) of a histogram given as cumulative bucket counts.

    ``bounds`` are the buckets' upper edges (``le``), strictly ascending, normally ending in ``+Inf``.
    This follows Prometheus' ``histogram_quantile`` (``promql/quantile.go``): counts are made
    monotonic, the rank is ``q × total``, and the value is interpolated linearly inside the bucket
    holding the rank, the first bucket starting at 0. Returns None for an empty histogram. Unlike
    Prometheus, the result says which bucket it came from, so callers can refuse estimates that are
    bounds rather than measurements. Hand-written because no maintained Python library implements it
    (``prometheus_client`` only exposes metrics).
    """
    if math.isnan(q) or not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile must be in 0..1, got {q}")
    if not bounds or len(bounds) != len(counts):
        raise ValueError("bounds and counts must be non-empty and of the same length")
    if any(b2 <= b1 for b1, b2 in itertools.pairwise(bounds)):
        raise ValueError("bucket bounds must be strictly ascending")
    # Prometheus' ensureMonotonic: a cumulative count can only grow (scrapes are not atomic).
    cumulative = list(itertools.accumulate((max(c, 0.0) for c in counts), max))
    total = cumulative[-1]
    if total <= 0:
        return None
    rank = q * total
    # The first bucket that reaches the rank and holds an observation (q = 0 → first non-empty one).
    b = next(i for i, c in enumerate(cumulative) if c >= rank and c > 0)
    upper = bounds[b]
    if b == 0:
        if upper <= 0 or math.isinf(upper):
            # Everything at or below a non-positive edge, or only the +Inf bucket: no interval.
            return None if math.isinf(upper) else QuantileEstimate(upper, upper, upper, first_bucket=True)
        lower, below = 0.0, 0.0
    else:
        lower, below = bounds[b - 1], cumulative[b - 1]
    if math.isinf(upper):
        # Prometheus answers with the largest finite edge: a lower bound, not an estimate.
        return QuantileEstimate(lower, lower, upper, first_bucket=False)
    value = lower + (upper - lower) * (rank - below) / (cumulative[b] - below)
    return QuantileEstimate(min(max(value, lower), upper), lower, upper, first_bucket=b == 0)


@dataclass(frozen=True)
class Histogram:
    """A cumulative histogram: ascending upper bounds (the last is ``+Inf``) and cumulative counts."""

    bounds: tuple[float, ...]
    counts: tuple[float, ...]
    sum: float | None = None

    @property
    def count(self) -> float:
        return self.counts[-1] if self.counts else 0.0

    @property
    def mean(self) -> float | None:
        """Exact mean (``_sum / _count``), unlike the percentiles."""
        if self.sum is None or self.count <= 0:
            return None
        return self.sum / self.count

    def quantile(self, q: float) -> QuantileEstimate | None:
        return histogram_quantile(q, self.bounds, self.counts)

    def minus(self, before: Histogram, name: str) -> Histogram:
        """This histogram less an earlier one of the same series (bucket-wise deltas)."""
        if before.bounds != self.bounds:
            raise IngestError(
                f"the buckets of {name} changed between the scrapes: the server restarted or was "
                "upgraded; take both scrapes from one server process",
                field=name,
            )
        counts = tuple(a - b for a, b in zip(self.counts, before.counts, strict=True))
        total = None if self.sum is None or before.sum is None else self.sum - before.sum
        if any(c < 0 for c in counts) or (total is not None and total < 0):
            raise _reset_error(name, before.count, self.count)
        return Histogram(self.bounds, counts, total)


# --------------------------------------------------------------------------------------------------
# Scrapes


@dataclass(frozen=True)
class Scrape:
    """One ``/metrics`` exposition: every sample by name and label set."""

    samples: Mapping[str, Mapping[LabelSet, float]]
    taken_at: datetime | None = None
    #: Older metric names that were read as their newer equivalents (for source notes).
    renamed: tuple[str, ...] = ()

    @property
    def engine(self) -> str | None:
        """The serving engine, by metric prefix (the one with most series wins)."""
        sizes = {
            engine: sum(len(v) for k, v in self.samples.items() if k.startswith(prefix))
            for engine, prefix in _PREFIXES.items()
        }
        best = max(ENGINES, key=lambda e: sizes[e])
        return best if sizes[best] else None

    @property
    def models(self) -> tuple[str, ...]:
        """The distinct ``model_name`` label values of the engine's series, sorted."""
        engine = self.engine
        if engine is None:
            return ()
        prefix = _PREFIXES[engine]
        found = {
            dict(labels)[_MODEL_LABEL]
            for name, series in self.samples.items()
            if name.startswith(prefix)
            for labels in series
            if _MODEL_LABEL in dict(labels)
        }
        return tuple(sorted(found))

    def series(self, name: str) -> Mapping[LabelSet, float]:
        return self.samples.get(name, {})


def parse_scrape(text: str, *, taken_at: datetime | None = None) -> Scrape:
    """Parse one Prometheus text exposition.

    ``taken_at`` is when it was scraped (the live probe knows); otherwise the newest sample
    timestamp is used when the exposition carries timestamps. Raises :class:`MalformedInput` for
    text that is not an exposition.
    """
    samples: dict[str, dict[LabelSet, float]] = {}
    newest: float | None = None
    try:
        families = list(text_string_to_metric_families(text))
    except Exception as exc:  # the parser raises ValueError, IndexError, … on garbage
        raise MalformedInput(f"not Prometheus text exposition: {exc}", field="body") from exc
    for family in families:
        for sample in family.samples:
            value = float(sample.value)
            if math.isnan(value):
                continue  # a NaN gauge is "no data", never a number to average
            labels: LabelSet = tuple(sorted((str(k), str(v)) for k, v in sample.labels.items()))
            samples.setdefault(sample.name, {})[labels] = value
            if sample.timestamp is not None:
                ts = float(sample.timestamp)
                newest = ts if newest is None else max(newest, ts)
    if taken_at is None and newest is not None:
        taken_at = datetime.fromtimestamp(newest, UTC)
    renamed: list[str] = []
    for old, new in _RENAMES:
        old_names = [old + s for s in _SAMPLE_SUFFIXES if old + s in samples]
        if old_names and not any(new + s in samples for s in _SAMPLE_SUFFIXES):
            for old_name in old_names:
                samples[new + old_name[len(old) :]] = samples.pop(old_name)
            renamed.append(f"{old} (read as {new})")
    return Scrape(samples=samples, taken_at=taken_at, renamed=tuple(renamed))


def split_scrapes(text: str) -> list[tuple[str, datetime | None]]:
    """Split text holding one or more concatenated expositions.

    A new scrape starts at a ``# scraped_at: <RFC 3339 or epoch seconds>`` line, or where a ``# HELP``
    or ``# TYPE`` line repeats one already seen in the current scrape (plain ``cat a.prom b.prom``).
    Returns each scrape's text with its ``scraped_at`` time, if given.
    """
    chunks: list[tuple[list[str], datetime | None]] = [([], None)]
    seen: set[tuple[str, str]] = set()
    for line in text.splitlines():
        stamp = _SCRAPED_AT.match(line.strip())
        if stamp:
            when = _parse_time(stamp.group(1))
            if any(not ln.startswith("#") and ln.strip() for ln in chunks[-1][0]):
                chunks.append(([], when))
            else:
                chunks[-1] = (chunks[-1][0], when)
            seen = set()
            continue
        directive = _DIRECTIVE.match(line.strip())
        if directive:
            key = (directive.group(1).upper(), directive.group(2))
            if key in seen:
                chunks.append(([], None))
                seen = set()
            seen.add(key)
        chunks[-1][0].append(line)
    return [("\n".join(lines) + "\n", when) for lines, when in chunks if any(ln.strip() for ln in lines)]


def parse_scrapes(text: str) -> list[Scrape]:
    """Every scrape in ``text`` (see :func:`split_scrapes`), in file order."""
    return [parse_scrape(chunk, taken_at=when) for chunk, when in split_scrapes(text)]


def _parse_time(value: str) -> datetime:
    try:
        if re.fullmatch(r"\d+(\.\d+)?", value):
            return datetime.fromtimestamp(float(value), UTC)
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00") if value.endswith("Z") else value)
    except (ValueError, OverflowError, OSError) as exc:
        raise IngestError(f"scraped_at {value!r} is not an RFC 3339 time", field="scraped_at") from exc
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


# --------------------------------------------------------------------------------------------------
# What each engine exposes (FORMATS.md §3 and the §9.3 "Prometheus scrapes" table)


@dataclass(frozen=True)
class _Sel:
    """A counter: a sample name, optionally restricted to (or excluding) one label value."""

    name: str
    label: str | None = None
    value: str | None = None
    exclude: bool = False


@dataclass(frozen=True)
class _EngineSpec:
    counters: Mapping[str, _Sel]
    histograms: Mapping[str, str]
    gauges: Mapping[str, tuple[str, Literal["sum", "mean"]]]
    info: str | None = None


_SPECS: dict[str, _EngineSpec] = {
    "vllm": _EngineSpec(
        counters={
            "prompt_tokens": _Sel("vllm:prompt_tokens_total"),
            "generation_tokens": _Sel("vllm:generation_tokens_total"),
            "prefix_cache_hits": _Sel("vllm:prefix_cache_hits_total"),
            "prefix_cache_queries": _Sel("vllm:prefix_cache_queries_total"),
            "preemptions": _Sel("vllm:num_preemptions_total"),
            "requests_completed": _Sel("vllm:request_success_total", "finished_reason", "abort", True),
            "requests_aborted": _Sel("vllm:request_success_total", "finished_reason", "abort"),
        },
        histograms={
            "ttft": "vllm:time_to_first_token_seconds",
            "itl": "vllm:inter_token_latency_seconds",
            "tpot": "vllm:request_time_per_output_token_seconds",
            "e2e": "vllm:e2e_request_latency_seconds",
            "queue": "vllm:request_queue_time_seconds",
            "prefill_time": "vllm:request_prefill_time_seconds",
            "prompt_len": "vllm:request_prompt_tokens",
            "output_len": "vllm:request_generation_tokens",
        },
        gauges={
            "waiting": ("vllm:num_requests_waiting", "sum"),
            "running": ("vllm:num_requests_running", "sum"),
            "kv_usage": ("vllm:kv_cache_usage_perc", "mean"),
            # V0 engines exported the hit rate itself as a gauge.
            "prefix_hit_rate": ("vllm:gpu_prefix_cache_hit_rate", "mean"),
        },
        info="vllm:cache_config_info",
    ),
    "sglang": _EngineSpec(
        counters={
            "prompt_tokens": _Sel("sglang:prompt_tokens_total"),
            "generation_tokens": _Sel("sglang:generation_tokens_total"),
            "cached_prompt_tokens": _Sel("sglang:cached_tokens_total"),
            "requests_completed": _Sel("sglang:num_requests_total"),
        },
        histograms={
            "ttft": "sglang:time_to_first_token_seconds",
            "itl": "sglang:inter_token_latency_seconds",
            "e2e": "sglang:e2e_request_latency_seconds",
        },
        gauges={
            "waiting": ("sglang:num_queue_reqs", "sum"),
            "running": ("sglang:num_running_reqs", "sum"),
            "kv_usage": ("sglang:token_usage", "mean"),
            "prefix_hit_rate": ("sglang:cache_hit_rate", "mean"),
        },
    ),
    "tgi": _EngineSpec(
        counters={
            "requests_completed": _Sel("tgi_request_success_total"),
            "requests_aborted": _Sel("tgi_request_failure_total"),
        },
        histograms={
            "tpot": "tgi_request_mean_time_per_token_duration",
            "e2e": "tgi_request_duration",
            "queue": "tgi_request_queue_duration",
            "prompt_len": "tgi_request_input_length",
            "output_len": "tgi_request_generated_tokens",
        },
        gauges={
            "waiting": ("tgi_queue_size", "sum"),
            "running": ("tgi_batch_current_size", "sum"),
        },
    ),
    "llamacpp": _EngineSpec(
        counters={
            "prompt_tokens": _Sel("llamacpp:prompt_tokens_total"),
            "generation_tokens": _Sel("llamacpp:tokens_predicted_total"),
            "cached_prompt_tokens": _Sel("llamacpp:prompt_tokens_cached_total"),
            "prompt_seconds": _Sel("llamacpp:prompt_seconds_total"),
            "predicted_seconds": _Sel("llamacpp:tokens_predicted_seconds_total"),
        },
        histograms={},
        gauges={
            "waiting": ("llamacpp:requests_deferred", "sum"),
            "running": ("llamacpp:requests_processing", "sum"),
            # Older builds only (2024 to mid-2025).
            "kv_usage": ("llamacpp:kv_cache_usage_ratio", "mean"),
        },
    ),
}

#: Histograms in seconds (converted to ms); the others count tokens.
_SECONDS_HISTOGRAMS = frozenset({"ttft", "itl", "tpot", "e2e", "queue", "prefill_time"})


# --------------------------------------------------------------------------------------------------
# Reading one scrape


@dataclass(frozen=True)
class _Reading:
    counters: dict[str, float]
    histograms: dict[str, Histogram]
    #: gauge key → (value for the mean, value for the max); they differ only across DP engines.
    gauges: dict[str, tuple[float, float]]
    config: dict[str, str]
    created: dict[str, dict[LabelSet, float]]


def _selected(scrape: Scrape, name: str, model: str | None) -> list[tuple[dict[str, str], float]]:
    out = []
    for labels, value in scrape.series(name).items():
        as_dict = dict(labels)
        if model is not None and as_dict.get(_MODEL_LABEL, model) != model:
            continue
        out.append((as_dict, value))
    return out


def _combine(
    items: Iterable[tuple[dict[str, str], float]], drop: frozenset[str] = frozenset()
) -> dict[LabelSet, float]:
    """Per label set without rank labels (and ``drop``): the max over ranks."""
    groups: dict[LabelSet, float] = {}
    for labels, value in items:
        key = tuple(sorted((k, v) for k, v in labels.items() if k not in _RANK_LABELS and k not in drop))
        groups[key] = max(groups.get(key, value), value)
    return groups


def _counter_names(name: str) -> tuple[str, ...]:
    # prometheus_client appends ``_total`` to samples of families typed ``counter``; an untyped
    # family (no ``# TYPE`` line) keeps the bare name.
    return (name, name.removesuffix("_total")) if name.endswith("_total") else (name,)


def _read_counter(scrape: Scrape, sel: _Sel, model: str | None) -> float | None:
    for name in _counter_names(sel.name):
        items = _selected(scrape, name, model)
        if not items:
            continue
        if sel.label is not None:
            items = [(lb, v) for lb, v in items if (lb.get(sel.label) == sel.value) != sel.exclude]
            if not items:
                return None
        return sum(_combine(items, frozenset({_MODEL_LABEL})).values())
    return None


def _read_histogram(scrape: Scrape, base: str, model: str | None) -> Histogram | None:
    buckets = _combine(_selected(scrape, base + "_bucket", model), frozenset({_MODEL_LABEL}))
    if not buckets:
        return None
    per_le: dict[float, float] = {}
    for labels, value in buckets.items():
        as_dict = dict(labels)
        try:
            le = float(as_dict.get("le", "nan"))
        except ValueError:
            continue
        if not math.isnan(le):
            per_le[le] = per_le.get(le, 0.0) + value
    if not per_le:
        return None
    sums = _combine(_selected(scrape, base + "_sum", model), frozenset({_MODEL_LABEL}))
    counts = _combine(_selected(scrape, base + "_count", model), frozenset({_MODEL_LABEL}))
    bounds = sorted(per_le)
    cumulative = [per_le[b] for b in bounds]
    if not math.isinf(bounds[-1]):
        bounds.append(math.inf)
        cumulative.append(sum(counts.values()) if counts else cumulative[-1])
    return Histogram(tuple(bounds), tuple(cumulative), sum(sums.values()) if sums else None)


def _read_gauge(
    scrape: Scrape, name: str, how: Literal["sum", "mean"], model: str | None
) -> tuple[float, float] | None:
    groups = _combine(_selected(scrape, name, model), frozenset({_MODEL_LABEL}))
    if not groups:
        return None
    values = list(groups.values())
    if how == "sum":
        return sum(values), sum(values)
    return sum(values) / len(values), max(values)


def _read(scrape: Scrape, engine: str, model: str | None) -> _Reading:
    spec = _SPECS[engine]
    counters = {k: v for k, sel in spec.counters.items() if (v := _read_counter(scrape, sel, model)) is not None}
    for key, value in counters.items():
        if value < 0:
            raise IngestError(f"counter {spec.counters[key].name} is negative ({value})", field=key)
    histograms = {
        k: h for k, base in spec.histograms.items() if (h := _read_histogram(scrape, base, model)) is not None
    }
    gauges = {
        k: g for k, (name, how) in spec.gauges.items() if (g := _read_gauge(scrape, name, how, model)) is not None
    }
    config: dict[str, str] = {}
    if spec.info:
        for labels in scrape.series(spec.info):
            config = {k: v for k, v in labels if k != "engine" and v not in ("None", "")}
            break
    created = {
        name: dict(scrape.series(name))
        for name in [
            *(n.removesuffix("_total") + "_created" for s in spec.counters.values() for n in [s.name]),
            *(base + "_created" for base in spec.histograms.values()),
            "process_start_time_seconds",
        ]
        if scrape.series(name)
    }
    return _Reading(counters, histograms, gauges, config, created)


# --------------------------------------------------------------------------------------------------
# Telemetry


@dataclass(frozen=True)
class GaugeStats:
    """A gauge over the scrapes that observed it."""

    mean: float
    max: float
    samples: int


@dataclass(frozen=True)
class Telemetry:
    """What a server's metrics say about one benchmark window (or since start, when cumulative).

    Keys are engine-neutral: counters ``prompt_tokens``, ``generation_tokens``,
    ``cached_prompt_tokens``, ``prefix_cache_hits``, ``prefix_cache_queries``, ``preemptions``,
    ``requests_completed``, ``requests_aborted``, ``prompt_seconds``, ``predicted_seconds``;
    histograms ``ttft``, ``itl``, ``tpot``, ``e2e``, ``queue``, ``prefill_time`` (seconds) and
    ``prompt_len``, ``output_len`` (tokens); gauges ``waiting``, ``running``, ``kv_usage``,
    ``prefix_hit_rate``.
    """

    engine: str
    model: str | None
    cumulative: bool
    started_at: datetime | None
    ended_at: datetime | None
    counters: Mapping[str, float]
    histograms: Mapping[str, Histogram]
    gauges: Mapping[str, GaugeStats]
    config: Mapping[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    @property
    def duration_s(self) -> float | None:
        if self.cumulative or self.started_at is None or self.ended_at is None:
            return None
        seconds = (self.ended_at - self.started_at).total_seconds()
        return seconds if seconds > 0 else None


def _engine_and_model(scrape: Scrape, model: str | None, role: str) -> tuple[str, str | None]:
    engine = scrape.engine
    if engine is None:
        raise IngestError(
            f"the {role} holds no vLLM (vllm:), SGLang (sglang:), TGI (tgi_) or llama-server (llamacpp:) metrics",
            field="body",
        )
    models = scrape.models
    if model is None:
        if len(models) > 1:
            raise IngestError(
                f"the {role} holds metrics of several models ({', '.join(models)}); "
                "choose one (model=...) or submit each model's runs separately",
                field="model_name",
                models=list(models),
            )
        model = models[0] if models else None
    elif models and model not in models:
        raise IngestError(f"model {model!r} is not in the {role} (it has {', '.join(models)})", field="model_name")
    return engine, model


def _gauge_stats(readings: Sequence[_Reading]) -> dict[str, GaugeStats]:
    out: dict[str, GaugeStats] = {}
    keys = {k for r in readings for k in r.gauges}
    for key in sorted(keys):
        values = [r.gauges[key] for r in readings if key in r.gauges]
        out[key] = GaugeStats(
            mean=sum(v[0] for v in values) / len(values), max=max(v[1] for v in values), samples=len(values)
        )
    return out


def _rename_notes(*scrapes: Scrape) -> list[str]:
    renamed = sorted({r for s in scrapes for r in s.renamed})
    return [f"older metric names: {', '.join(renamed)}"] if renamed else []


def scrape_totals(scrape: Scrape, *, model: str | None = None) -> Telemetry:
    """Telemetry from a single scrape: counters and histograms cumulative since the server started."""
    engine, model = _engine_and_model(scrape, model, "scrape")
    reading = _read(scrape, engine, model)
    notes = [
        "single /metrics scrape: counters and histograms are cumulative since the server started, "
        "not this benchmark alone; gauges (queue, running, KV use) are one instant",
        *_rename_notes(scrape),
    ]
    return Telemetry(
        engine=engine,
        model=model,
        cumulative=True,
        started_at=None,
        ended_at=scrape.taken_at,
        counters=reading.counters,
        histograms=reading.histograms,
        gauges=_gauge_stats([reading]),
        config=reading.config,
        notes=tuple(notes),
    )


def scrape_delta(
    before: Scrape, after: Scrape, *, model: str | None = None, during: Sequence[Scrape] = ()
) -> Telemetry:
    """Telemetry for the window between two scrapes of one server.

    Counters and histograms are ``after − before``. Gauges are averaged and maxed over ``during``
    (scrapes taken while the benchmark ran); without them they are the after-scrape's instant.
    A counter that went down, a histogram whose buckets changed, or a changed ``_created`` /
    ``process_start_time_seconds`` means the server restarted in between: :class:`IngestError`.
    Several ``model_name`` values need ``model``.
    """
    engine, model = _engine_and_model(after, model, "after-scrape")
    before_engine = before.engine
    if before_engine != engine:
        raise IngestError(
            f"the before-scrape is from {before_engine or 'no known engine'}, the after-scrape from "
            f"{engine}: they must come from the same server",
            field="body",
        )
    if model is not None and before.models and model not in before.models:
        raise IngestError(
            f"model {model!r} is not in the before-scrape (it has {', '.join(before.models)}): "
            "the scrapes come from different servers",
            field="model_name",
        )
    if before.taken_at and after.taken_at and after.taken_at < before.taken_at:
        raise IngestError("the after-scrape is older than the before-scrape", field="scraped_at")
    first, last = _read(before, engine, model), _read(after, engine, model)
    _check_same_process(first, last)
    counters: dict[str, float] = {}
    spec = _SPECS[engine]
    for key, value in last.counters.items():
        earlier = first.counters.get(key, 0.0)
        if value < earlier:
            raise _reset_error(spec.counters[key].name, earlier, value)
        counters[key] = value - earlier
    histograms: dict[str, Histogram] = {}
    for key, hist in last.histograms.items():
        earlier_hist = first.histograms.get(key)
        histograms[key] = hist if earlier_hist is None else hist.minus(earlier_hist, spec.histograms[key])
    during_readings = [_read(s, engine, model) for s in during]
    notes = _rename_notes(before, after, *during)
    if not during_readings:
        notes.append(
            "gauges (queue, running, KV use) are one instant, at the after-scrape; add scrapes taken "
            "during the run for their mean and peak"
        )
    return Telemetry(
        engine=engine,
        model=model,
        cumulative=False,
        started_at=before.taken_at,
        ended_at=after.taken_at,
        counters=counters,
        histograms=histograms,
        gauges=_gauge_stats(during_readings or [last]),
        config=last.config,
        notes=tuple(notes),
    )


def _check_same_process(first: _Reading, last: _Reading) -> None:
    for name, series in last.created.items():
        earlier = first.created.get(name, {})
        for labels, value in series.items():
            if labels in earlier and earlier[labels] != value:
                raise IngestError(
                    f"{name} changed between the scrapes ({earlier[labels]} → {value}): the server "
                    "restarted, so its counters were reset; take both scrapes from one server process",
                    field=name,
                )


def _reset_error(name: str, before: float, after: float) -> IngestError:
    return IngestError(
        f"counter {name} went down between the scrapes ({before:g} → {after:g}): the server restarted "
        "and its counters were reset; take both scrapes from one server process",
        field=name,
    )


# --------------------------------------------------------------------------------------------------
# Telemetry → canonical run


def _histogram_percentiles(hist: Histogram, name: str, scale: float, notes: list[str]) -> Percentiles:
    out = Percentiles()
    mean = hist.mean
    if mean is not None:
        out.mean = mean * scale
    dropped_low: list[str] = []
    dropped_high: list[str] = []
    first_edge = next((b for b in hist.bounds if b > 0), hist.bounds[0])
    for q, key in _QUANTILES:
        est = hist.quantile(q)
        if est is None:
            continue
        if est.reliable:
            setattr(out, key, est.value * scale)
        elif est.first_bucket:
            dropped_low.append(key)
        else:
            dropped_high.append(key)
    if dropped_low:
        notes.append(
            f"{name} {', '.join(dropped_low)} fall in the first histogram bucket "
            f"(≤ {first_edge * scale:g} ms); not reported, as interpolating from 0 would invent them "
            "(use the client tool's figures)"
        )
    if dropped_high:
        top = max((b for b in hist.bounds if not math.isinf(b)), default=0.0)
        notes.append(
            f"{name} {', '.join(dropped_high)} exceed the largest finite bucket (> {top * scale:g} ms); not reported"
        )
    return out


def _ratio(num: float | None, den: float | None) -> float | None:
    if num is None or den is None or den <= 0:
        return None
    return num / den


def telemetry_to_run(telemetry: Telemetry) -> CanonicalRun:
    """The canonical run described by server telemetry (FORMATS.md §9.3, "Prometheus scrapes")."""
    t = telemetry
    c = t.counters
    h = t.histograms
    notes = list(t.notes)
    metrics = Metrics()
    latency_fields = (("ttft", "ttft_ms"), ("itl", "itl_ms"), ("tpot", "tpot_ms"), ("e2e", "e2e_ms"))
    used_buckets = False
    for key, attr in (*latency_fields, ("queue", "queue_ms")):
        hist = h.get(key)
        if hist is not None and hist.count > 0:
            setattr(metrics, attr, _histogram_percentiles(hist, attr, 1000.0, notes))
            used_buckets = True
    if used_buckets:
        notes.append(
            "latency percentiles estimated from histogram buckets by linear interpolation inside the "
            "bucket (as Prometheus histogram_quantile): approximate; means are exact (_sum/_count)"
        )
    if "ttft" in h and h["ttft"].count > 0:
        notes.append(
            "ttft_ms is server-side: from the request's arrival at the engine, queue included"
            if t.engine == "vllm"
            else "ttft_ms is server-side (the engine's histogram), not what clients measured"
        )

    # Per-sequence speeds.
    prefill_time = h.get("prefill_time")
    if t.engine == "llamacpp":
        metrics.prefill_tok_s = _ratio(c.get("prompt_tokens"), c.get("prompt_seconds"))
        decode = _ratio(c.get("generation_tokens"), c.get("predicted_seconds"))
        if decode:
            metrics.decode_tok_s = decode
            metrics.tpot_ms = Percentiles(mean=1000.0 / decode)
    elif prefill_time is not None and prefill_time.sum:
        metrics.prefill_tok_s = _ratio(c.get("prompt_tokens"), prefill_time.sum)
        if metrics.prefill_tok_s is not None:
            notes.append("prefill_tok_s = prompt tokens / summed request prefill time: approximate under batching")
    if metrics.decode_tok_s is None:
        if metrics.tpot_ms.mean:
            metrics.decode_tok_s = 1000.0 / metrics.tpot_ms.mean
        elif metrics.itl_ms.mean:
            metrics.decode_tok_s = 1000.0 / metrics.itl_ms.mean
            notes.append("decode_tok_s = 1000 / mean ITL (token-weighted; no per-request TPOT histogram)")

    # Gauges.
    gauges = t.gauges
    if "waiting" in gauges:
        metrics.queue_waiting_mean, metrics.queue_waiting_max = gauges["waiting"].mean, gauges["waiting"].max
    if "running" in gauges:
        metrics.running_mean, metrics.running_max = gauges["running"].mean, gauges["running"].max
    if "kv_usage" in gauges:
        kv = gauges["kv_usage"]
        if kv.max > 1.0 or kv.mean < 0:
            raise IngestError(f"KV-cache usage must be a fraction in 0..1, got {kv.max:g}", field="kv_usage")
        metrics.kv_cache_usage_mean, metrics.kv_cache_usage_max = kv.mean, kv.max
        if t.engine == "sglang":
            notes.append("KV use from sglang:token_usage (share of the KV pool's tokens in use)")

    # Prefix cache.
    if t.engine == "vllm":
        metrics.prefix_cache_hit_rate = _ratio(c.get("prefix_cache_hits"), c.get("prefix_cache_queries"))
    elif t.engine == "sglang":
        metrics.prefix_cache_hit_rate = _ratio(c.get("cached_prompt_tokens"), c.get("prompt_tokens"))
    elif t.engine == "llamacpp" and c.get("cached_prompt_tokens") is not None:
        cached = c["cached_prompt_tokens"]
        metrics.prefix_cache_hit_rate = _ratio(cached, cached + c.get("prompt_tokens", 0.0))
    if metrics.prefix_cache_hit_rate is None and "prefix_hit_rate" in gauges:
        metrics.prefix_cache_hit_rate = gauges["prefix_hit_rate"].mean
    if metrics.prefix_cache_hit_rate is not None:
        metrics.prefix_cache_hit_rate = min(max(metrics.prefix_cache_hit_rate, 0.0), 1.0)

    if "preemptions" in c:
        metrics.preemptions = c["preemptions"]
    completed = c.get("requests_completed")
    aborted = c.get("requests_aborted")
    if completed is not None:
        metrics.requests_completed = round(completed)
    if aborted is not None:
        metrics.requests_failed = round(aborted)

    duration = t.duration_s
    if duration:
        metrics.duration_s = duration
        if "prompt_tokens" in c:
            metrics.input_throughput_tok_s = c["prompt_tokens"] / duration
        if "generation_tokens" in c:
            metrics.output_throughput_tok_s = c["generation_tokens"] / duration
        if completed is not None:
            metrics.request_throughput_rps = completed / duration

    workload = Workload()
    for key, attr in (("prompt_len", "prompt_tokens_mean"), ("output_len", "output_tokens_mean")):
        hist = h.get(key)
        if hist is not None and hist.mean is not None:
            setattr(workload, attr, hist.mean)
    if completed is not None:
        workload.num_requests = round(completed + (aborted or 0.0))

    setup = Setup(runtime=t.engine, model=t.model)
    _apply_config(setup, t.config)
    return CanonicalRun(
        measured_at=t.ended_at,
        setup=setup,
        workload=workload,
        metrics=metrics,
        source=Source(format="prometheus", tool=_TOOL_NAMES[t.engine], notes=notes),
    )


def _apply_config(setup: Setup, config: Mapping[str, str]) -> None:
    """vLLM's ``cache_config_info`` labels: the only place a scrape states the KV pool settings."""
    if not config:
        return
    if dtype := config.get("cache_dtype"):
        setup.kv_cache_dtype = dtype
    if (flag := config.get("enable_prefix_caching")) in ("True", "False"):
        setup.engine_args["enable_prefix_caching"] = flag == "True"
    for key, cast in (("gpu_memory_utilization", float), ("block_size", int), ("num_gpu_blocks", int)):
        raw = config.get(key)
        if raw is None:
            continue
        try:
            setup.engine_args[key] = cast(float(raw)) if cast is int else cast(raw)
        except ValueError:
            continue
