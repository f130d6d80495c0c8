"""What a server's metrics say about one benchmark window: scrapes read through the engine's metric
tables into engine-neutral :class:`Telemetry`.

:func:`scrape_delta` turns a before/after pair into counter and histogram deltas, with gauges over
the scrapes taken during the run. A counter that went down means the server restarted: that is an
:class:`~advisor.errors.IngestError`, never a silently negative rate. :func:`scrape_totals` does the
same for one scrape: cumulative since the server started.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from advisor.errors import IngestError
from advisor.ingest.prometheus.engines import MODEL_LABEL, RANK_LABELS, SPECS, Sel
from advisor.ingest.prometheus.histograms import Histogram, counter_reset_error
from advisor.ingest.prometheus.scrape import LabelSet, Scrape

__all__ = ["GaugeStats", "Reading", "Telemetry", "read_scrape", "scrape_delta", "scrape_totals"]


@dataclass(frozen=True)
class Reading:
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
        if model is not None and as_dict.get(MODEL_LABEL, model) != model:
            continue
        out.append((as_dict, value))
    return out


def _combine(
    items: Iterable[tuple[dict[str, str], float]], drop: frozenset[str] = frozenset()
) -> dict[LabelSet, float]:
    """Per label set without rank labels (and ``drop``): the max over ranks."""
    groups: dict[LabelSet, float] = {}
    for labels, value in items:
        key = tuple(sorted((k, v) for k, v in labels.items() if k not in RANK_LABELS and k not in drop))
        groups[key] = max(groups.get(key, value), value)
    return groups


def _counter_names(name: str) -> tuple[str, ...]:
    # prometheus_client appends ``_total`` to samples of families typed ``counter``; an untyped
    # family (no ``# TYPE`` line) keeps the bare name.
    return (name, name.removesuffix("_total")) if name.endswith("_total") else (name,)


def _read_counter(scrape: Scrape, sel: Sel, model: str | None) -> float | None:
    for name in _counter_names(sel.name):
        items = _selected(scrape, name, model)
        if not items:
            continue
        if sel.label is not None:
            items = [(lb, v) for lb, v in items if (lb.get(sel.label) == sel.value) != sel.exclude]
            if not items:
                return None
        return sum(_combine(items, frozenset({MODEL_LABEL})).values())
    return None


def _read_histogram(scrape: Scrape, base: str, model: str | None) -> Histogram | None:
    buckets = _combine(_selected(scrape, base + "_bucket", model), frozenset({MODEL_LABEL}))
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
    sums = _combine(_selected(scrape, base + "_sum", model), frozenset({MODEL_LABEL}))
    counts = _combine(_selected(scrape, base + "_count", model), frozenset({MODEL_LABEL}))
    bounds = sorted(per_le)
    cumulative = [per_le[b] for b in bounds]
    if not math.isinf(bounds[-1]):
        bounds.append(math.inf)
        cumulative.append(sum(counts.values()) if counts else cumulative[-1])
    return Histogram(tuple(bounds), tuple(cumulative), sum(sums.values()) if sums else None)


def _read_gauge(
    scrape: Scrape, name: str, how: Literal["sum", "mean"], model: str | None, sel: Sel | None = None
) -> tuple[float, float] | None:
    items = _selected(scrape, name, model)
    if sel is not None and sel.label is not None:
        items = [(lb, v) for lb, v in items if (lb.get(sel.label) == sel.value) != sel.exclude]
    groups = _combine(items, frozenset({MODEL_LABEL}))
    if not groups:
        return None
    values = list(groups.values())
    if how == "sum":
        return sum(values), sum(values)
    return sum(values) / len(values), max(values)


def read_scrape(scrape: Scrape, engine: str, model: str | None) -> Reading:
    spec = SPECS[engine]
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
    for key, (sel, how) in spec.labelled_gauges.items():
        if (found := _read_gauge(scrape, sel.name, how, model, sel)) is not None:
            gauges[key] = found
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
    return Reading(counters, histograms, gauges, config, created)


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


def _gauge_stats(readings: Sequence[Reading]) -> dict[str, GaugeStats]:
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
    reading = read_scrape(scrape, engine, model)
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
    first, last = read_scrape(before, engine, model), read_scrape(after, engine, model)
    _check_same_process(first, last)
    counters: dict[str, float] = {}
    spec = SPECS[engine]
    for key, value in last.counters.items():
        earlier = first.counters.get(key, 0.0)
        if value < earlier:
            raise counter_reset_error(spec.counters[key].name, earlier, value)
        counters[key] = value - earlier
    histograms: dict[str, Histogram] = {}
    for key, hist in last.histograms.items():
        earlier_hist = first.histograms.get(key)
        histograms[key] = hist if earlier_hist is None else hist.minus(earlier_hist, spec.histograms[key])
    during_readings = [read_scrape(s, engine, model) for s in during]
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


def _check_same_process(first: Reading, last: Reading) -> None:
    for name, series in last.created.items():
        earlier = first.created.get(name, {})
        for labels, value in series.items():
            if labels in earlier and earlier[labels] != value:
                raise IngestError(
                    f"{name} changed between the scrapes ({earlier[labels]} → {value}): the server "
                    "restarted, so its counters were reset; take both scrapes from one server process",
                    field=name,
                )
