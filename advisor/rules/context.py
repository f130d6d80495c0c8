"""The frozen input of every rule: the run, what it resolves to, the physics and the expectations.

:func:`build_context` is pure: it resolves names through the catalog (an unresolvable name is
recorded in ``missing``, never raised: the API validates names before it gets here), computes the
roofline, asks the expectations function for bands, and summarises comparable earlier runs into a
:class:`Baseline`. Rules read only this.
"""

from __future__ import annotations

import functools
import math
import operator
import statistics
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from advisor.canonical import SLO, CanonicalRun, Percentiles
from advisor.catalog.lookup import KV_CACHE_DTYPE_ALIASES, ResolvedSetup
from advisor.errors import AdvisorError
from advisor.physics import HardwareSpec, ModelSpec, QuantSpec, Roofline, analyse
from advisor.rules.base import fast_frozen_init
from advisor.rules.knobs import EngineConfig, clear_engine_configs, engine_config, normalise_key
from advisor.rules.memo import remember

if TYPE_CHECKING:
    from advisor.canonical import Setup, Workload
    from advisor.catalog import Catalog
    from advisor.ml.expectations import Expectations

__all__ = [
    "ASSUMED_PREFILL_MFU",
    "BASELINE_METRICS",
    "BASELINE_TOLERANCE",
    "IMPLAUSIBLE_ITL_MS",
    "SUPPLY_HINTS",
    "TGI_WIGGLE_ROOM",
    "Baseline",
    "BaselinePoint",
    "ExpectationsFn",
    "Measured",
    "MetricBaseline",
    "MissingField",
    "RunContext",
    "SweepCapacity",
    "TtftBreakdown",
    "TtftPart",
    "baseline_key",
    "baseline_point",
    "build_baseline",
    "build_context",
    "clear_caches",
    "comparable",
    "expectations_of",
    "is_microbenchmark",
    "kv_pool_runtime",
    "measure",
    "metric_value",
    "normalise_kv_dtype",
    "per_run",
    "per_setup",
    "sweep_capacity",
    "ttft_breakdown",
]

#: ``isinstance(x, _NUMBER)``: a tuple, since ``int | float`` builds a Union on every call (hot paths).
_NUMBER = (int, float)

#: Fraction of the compute ceiling prefill reaches when nothing better is known. Published vLLM and
#: SGLang prefill runs land at 40-60 % MFU for 7-70B models; 0.5 keeps estimates in that band.
ASSUMED_PREFILL_MFU = 0.5
#: An ITL below this (10,000 tok/s per stream) is chunk arrival timed by the client, not a token
#: gap: MEAS008 says so, and no decode speed is derived from it.
IMPLAUSIBLE_ITL_MS = 0.1

ExpectationsFn = Callable[..., "Expectations"]

#: How a user supplies each field the advisor may miss (DESIGN §4: deployment and setup come via
#: query, headers or a wrapper; the CLI has matching options).
SUPPLY_HINTS: dict[str, str] = {
    "setup.hardware": (
        "set setup.hardware (a catalog id such as nvidia-a10g, or an inline spec "
        '{"mem_bandwidth_gb_s": ..., "memory_gb": ..., "fp16_tflops": ...}); with a native file use '
        "?hardware=<id> on POST /api/v1/runs, the X-Advisor-Hardware header, or `advisor submit "
        "--hardware <id>`"
    ),
    "setup.model": (
        "set setup.model (a catalog id, a Hugging Face repo id, an inline spec with params_b and the "
        "attention shape, or a config.json body); with a native file use ?model=<id>, the X-Advisor-Model "
        "header, or `advisor submit --model <id>`"
    ),
    "setup.quantization": (
        'set setup.quantization (bf16, fp8, awq-int4-g128, Q4_K_M, or {"bits_per_weight": 4.5}); with a '
        "native file use ?quantization=<id>, the X-Advisor-Quantization header, or `advisor submit "
        "--quantization <id>`"
    ),
    "setup.runtime": (
        "set setup.runtime (vllm, sglang, tgi, trtllm, ollama, llamacpp, mlx); with a native file use "
        "?runtime=<name>, the X-Advisor-Runtime header, or `advisor submit --runtime <name>`"
    ),
    "workload.prompt_tokens_mean": (
        "set workload.prompt_tokens_mean (mean prompt length in tokens): ?prompt_tokens=<n>, the "
        "X-Advisor-Prompt-Tokens header, or `advisor submit --prompt-tokens <n>`"
    ),
    "workload.concurrency": (
        "set workload.concurrency (streams in flight): ?concurrency=<n> on POST /api/v1/runs, the "
        "X-Advisor-Concurrency header, or `advisor submit --concurrency <n>`; or give the request rate "
        "(--request-rate) with a latency, or a /metrics scrape (--metrics) for the server's running count"
    ),
    "metrics.decode_tok_s": (
        "report metrics.decode_tok_s (per-sequence decode speed) or metrics.tpot_ms / metrics.itl_ms; Ollama "
        "gives it as eval_count / eval_duration"
    ),
}

#: Metrics a baseline summarises: path → True when higher is better.
BASELINE_METRICS: dict[str, bool] = {
    "decode_tok_s": True,
    "prefill_tok_s": True,
    "output_throughput_tok_s": True,
    "request_throughput_rps": True,
    "ttft_ms.p50": False,
    "ttft_ms.p99": False,
    "itl_ms.p50": False,
    "itl_ms.p99": False,
    "tpot_ms.p50": False,
    "tpot_ms.p99": False,
    "e2e_ms.p50": False,
}


def normalise_kv_dtype(dtype: str | None) -> str:
    """A KV-cache dtype spelling → the physics' key; unknown spellings count as ``auto`` (16 bit)."""
    if not dtype:
        return "auto"
    # One alias table for the whole project: the catalog's.
    return KV_CACHE_DTYPE_ALIASES.get(dtype.strip().lower().replace("-", "_"), "auto")


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class MissingField:
    """A field whose absence blocks part of the diagnosis, and how to supply it."""

    field: str
    reason: str
    blocks: str
    how: str

    def to_dict(self) -> dict[str, str]:
        return {"field": self.field, "reason": self.reason, "blocks": self.blocks, "how": self.how}


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class MetricBaseline:
    """One metric over the baseline runs: median and a robust spread (1.4826 × MAD ≈ σ)."""

    median: float
    spread: float
    n: int
    higher_is_better: bool


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class Baseline:
    """A summary of ``n`` comparable earlier runs of the same deployment and setup."""

    n: int
    metrics: Mapping[str, MetricBaseline]

    def get(self, metric: str) -> MetricBaseline | None:
        return self.metrics.get(metric)


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class Measured:
    """Values rules need that the canonical run may give in several ways, derived once.

    ``decode_tok_s`` is per sequence: ``metrics.decode_tok_s``, else 1000 / TPOT, else 1000 / ITL
    (never from end-to-end per token, which includes TTFT; docs/formats.md §9.2). ``concurrency`` is the
    number of sequences decoding together: the server's running mean, the offered concurrency, or
    Little's law (rate × mean latency).
    """

    decode_tok_s: float | None
    decode_source: str | None
    prefill_tok_s: float | None
    prompt_tokens: float | None
    output_tokens: float | None
    concurrency: float | None
    concurrency_source: str | None
    n_requests: int | None
    uncached_prompt_tokens: float | None


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class RunContext:
    """Everything a rule may read. Frozen; built by :func:`build_context`."""

    run: CanonicalRun
    hardware: HardwareSpec | None
    model: ModelSpec | None
    quant: QuantSpec | None
    runtime: str | None
    slo: SLO | None
    baseline: Baseline | None
    roofline: Roofline | None
    expectations: Expectations | None
    missing: tuple[MissingField, ...]
    engine: EngineConfig
    measured: Measured
    #: For what-if predictions (e.g. the same model on other hardware). Not part of equality.
    catalog: Catalog | None = field(default=None, compare=False, repr=False)
    expectations_fn: ExpectationsFn | None = field(default=None, compare=False, repr=False)
    #: Where the typical TTFT goes (:func:`ttft_breakdown`); None without a TTFT.
    ttft: TtftBreakdown | None = field(default=None, compare=False)
    #: What was derived from the file rather than given ("concurrency 12 by Little's law ...").
    notes: tuple[str, ...] = ()
    #: The knee of the sweep file the run came from (:func:`sweep_capacity`); None for one run.
    sweep: SweepCapacity | None = field(default=None, compare=False)
    #: What identifies this context's setup for :func:`per_setup` (its key and the objects the key
    #: names), set by :func:`build_context`. Not an ``__init__`` field, so a context copied with
    #: ``dataclasses.replace`` (another roofline, other expectations) has none and remembers nothing.
    setup_id: tuple[tuple[Any, ...], tuple[object, ...]] | None = field(
        default=None, init=False, compare=False, repr=False
    )
    #: What several rules derive alike from this run (:func:`per_run`). Fresh for every context.
    run_memo: dict[Hashable, Any] = field(default_factory=dict, init=False, compare=False, repr=False)

    @property
    def microbenchmark(self) -> bool:
        """An engine test (llama-bench, vLLM bench latency/throughput): no workload advice."""
        known = self.run_memo.get("microbenchmark")
        if known is None:
            known = self.run_memo["microbenchmark"] = is_microbenchmark(self.run)
        return known  # type: ignore[no-any-return]

    def metric(self, path: str) -> float | None:
        """A metric by dotted path (``ttft_ms.p99``, ``decode_tok_s``); derived values first."""
        if path == "decode_tok_s":
            return self.measured.decode_tok_s
        if path == "prefill_tok_s":
            return self.measured.prefill_tok_s
        return metric_value(self.run, path)

    @property
    def bits_per_weight(self) -> float | None:
        return self.quant.bits_per_weight if self.quant is not None else None

    def is_missing(self, field_path: str) -> bool:
        return any(m.field == field_path for m in self.missing)


def metric_value(run: CanonicalRun, path: str) -> float | None:
    """``"ttft_ms.p99"`` → ``run.metrics.ttft_ms.p99``; ``"queue_waiting_mean"`` → the scalar."""
    try:
        head, tail = _PATHS[path]
    except KeyError:
        head, _, tail = path.partition(".")
        if len(_PATHS) < 1024:
            _PATHS[path] = (head, tail)
    value: Any = getattr(run.metrics, head, None)
    if tail:
        value = getattr(value, tail, None) if value.__class__ is Percentiles or isinstance(value, Percentiles) else None
    if value.__class__ is float:  # the usual case, without the checks below (rules ask per metric)
        return value  # type: ignore[no-any-return]
    if value is None or isinstance(value, bool) or not isinstance(value, _NUMBER):
        return None
    return float(value)


#: :func:`metric_value`'s paths split once (rules ask a few dozen paths of every run).
_PATHS: dict[str, tuple[str, str]] = {}


def _first(p: Percentiles, *keys: str) -> tuple[float, str] | None:
    for key in keys:
        value = getattr(p, key)
        if value is not None and value > 0:
            return float(value), key
    return None


def _implausible_itl(itl: Percentiles) -> bool:
    typical = itl.p50 if itl.p50 is not None else itl.mean
    return typical is not None and typical < IMPLAUSIBLE_ITL_MS


def _rate(run: CanonicalRun) -> tuple[float, str] | None:
    """Requests per second through the system: achieved, else offered."""
    m, w = run.metrics, run.workload
    if m.request_throughput_rps is not None and m.request_throughput_rps > 0:
        return float(m.request_throughput_rps), "metrics.request_throughput_rps"
    if w.request_rate is not None and w.request_rate > 0:
        return float(w.request_rate), "workload.request_rate"
    return None


def _latency_ms(run: CanonicalRun) -> tuple[float, str] | None:
    """Mean time a request spends in the system: e2e, else TTFT + output × TPOT."""
    m, w = run.metrics, run.workload
    e2e = _first(m.e2e_ms, "mean", "p50")
    if e2e is not None:
        return e2e[0], f"e2e_ms.{e2e[1]}"
    ttft = _first(m.ttft_ms, "mean", "p50")
    tpot = _first(m.tpot_ms, "mean", "p50") or (None if _implausible_itl(m.itl_ms) else _first(m.itl_ms, "mean", "p50"))
    if tpot is None and m.decode_tok_s is not None and m.decode_tok_s > 0:
        tpot = 1000.0 / m.decode_tok_s, "1000 / decode_tok_s"
    if ttft is not None and tpot is not None and w.output_tokens_mean:
        return ttft[0] + tpot[0] * w.output_tokens_mean, "(ttft + output_tokens × tpot)"
    return None


def measure(run: CanonicalRun) -> Measured:
    """Derive :class:`Measured` from a canonical run."""
    m, w = run.metrics, run.workload
    decode: float | None = None
    decode_source: str | None = None
    if m.decode_tok_s is not None and m.decode_tok_s > 0:
        decode, decode_source = m.decode_tok_s, "metrics.decode_tok_s"
    else:
        for name in ("tpot_ms", "itl_ms"):
            hit = _first(getattr(m, name), "mean", "p50")
            if name == "itl_ms" and _implausible_itl(m.itl_ms):
                continue
            if hit is not None:
                decode, decode_source = 1000.0 / hit[0], f"1000 / {name}.{hit[1]}"
                break

    concurrency: float | None = None
    concurrency_source: str | None = None
    if m.running_mean is not None and m.running_mean > 0:
        concurrency, concurrency_source = m.running_mean, "metrics.running_mean"
    elif w.concurrency is not None and w.concurrency > 0:
        concurrency, concurrency_source = w.concurrency, "workload.concurrency"
    elif (
        (rate := _rate(run)) is not None
        and (latency := _latency_ms(run)) is not None
        # A latency derived from a vanishing decode rate (5e-324 tok/s) is infinite: no estimate.
        and math.isfinite(in_flight := rate[0] * latency[0] / 1000.0)
    ):
        # Little's law: sequences in flight = arrival rate × time each spends in the system.
        concurrency = max(1.0, in_flight)
        concurrency_source = f"Little's law: {rate[1]} × {latency[1]}"
    elif w.num_requests == 1 or m.requests_completed == 1:
        concurrency, concurrency_source = 1.0, "single request"

    n_requests = m.requests_completed if m.requests_completed is not None else w.num_requests

    prefill = m.prefill_tok_s if m.prefill_tok_s is not None and m.prefill_tok_s > 0 else None
    prompt = w.prompt_tokens_mean if w.prompt_tokens_mean else None
    uncached = prompt
    if prompt is not None:
        if m.cached_prompt_tokens_mean is not None:
            uncached = max(prompt - m.cached_prompt_tokens_mean, 0.0)
        elif m.prefix_cache_hit_rate is not None:
            uncached = prompt * (1.0 - m.prefix_cache_hit_rate)
    return Measured(
        decode_tok_s=decode,
        decode_source=decode_source,
        prefill_tok_s=prefill,
        prompt_tokens=prompt,
        output_tokens=w.output_tokens_mean if w.output_tokens_mean else None,
        concurrency=concurrency,
        concurrency_source=concurrency_source,
        n_requests=n_requests,
        uncached_prompt_tokens=uncached,
    )


def _setup_key(run: CanonicalRun) -> tuple[Any, ...]:
    s = run.setup

    def norm(v: str | dict[str, Any] | None) -> Any:
        if isinstance(v, str):
            return v.strip().lower()
        if isinstance(v, dict):
            return tuple(sorted((k, repr(x)) for k, x in v.items()))
        return v

    # runtime_version is deliberately *not* part of the key: an engine upgrade that slows the
    # same deployment down is exactly the regression a baseline must catch.
    key = (
        (run.deployment or "").lower(),
        s.runtime,
        norm(s.hardware),
        norm(s.model),
        norm(s.quantization),
        s.tensor_parallel or 1,
        s.gpu_count or 1,
        normalise_kv_dtype(s.kv_cache_dtype),
    )
    # One tuple per distinct key: build_baseline compares the current run's key with each earlier
    # point's, and equal keys made of the same objects compare by identity, not character by
    # character. Bounded (a key per deployment and setup).
    if len(_SETUP_KEYS) >= 4096:
        _SETUP_KEYS.clear()
    return _SETUP_KEYS.setdefault(key, key)


_SETUP_KEYS: dict[tuple[Any, ...], tuple[Any, ...]] = {}


#: Relative difference in prompt and output length, concurrency and request rate within which two
#: runs count as the same traffic (a baseline of different traffic is no baseline).
BASELINE_TOLERANCE = 0.25

_Workload = tuple[float | None, float | None, float | None, float | None]  # prompt, output, concurrency, rate


def _workload(run: CanonicalRun) -> _Workload:
    w = run.workload
    return (w.prompt_tokens_mean, w.output_tokens_mean, w.concurrency, w.request_rate)


def comparable(
    run: CanonicalRun | BaselinePoint,
    other: CanonicalRun | BaselinePoint,
    *,
    tolerance: float = BASELINE_TOLERANCE,
) -> bool:
    """Same deployment and setup, and a workload within ``tolerance`` (prompt and output length,
    concurrency, request rate). The one test of "comparable", used by :func:`build_baseline`."""
    a = run if isinstance(run, BaselinePoint) else baseline_key(run)
    b = other if isinstance(other, BaselinePoint) else baseline_key(other)
    return a.setup_key == b.setup_key and _same_traffic(a.workload, b.workload, tolerance)


def _same_traffic(a: _Workload, b: _Workload, tolerance: float) -> bool:
    """Each of the four workload values within ``tolerance`` of the other's, relative to the larger
    (both missing counts as the same, one missing does not). Unrolled over the four: the
    baseline's inner loop asks it of every point of the cell, most of which differ in the first."""
    return (
        _close(a[0], b[0], tolerance)
        and _close(a[1], b[1], tolerance)
        and _close(a[2], b[2], tolerance)
        and _close(a[3], b[3], tolerance)
    )


def _close(x: float | None, y: float | None, tolerance: float) -> bool:
    """:func:`_same_traffic` of one value (NaN is close to nothing, itself included):
    ``abs(x - y) <= tolerance * max(abs(x), abs(y))`` spelled with comparisons, since the
    baseline's inner loop asks it of most points of a cell (``y - x`` is exactly ``-(x - y)``, so
    each absolute value is the same float; with a NaN every comparison is False, as before)."""
    if x is None or y is None:
        return x is None and y is None
    if x == y:
        return True
    ax = x if x >= 0 else -x
    ay = y if y >= 0 else -y
    return (x - y if x >= y else y - x) <= tolerance * (ay if ay > ax else ax)


def _point_of(run: CanonicalRun | BaselinePoint) -> BaselinePoint:
    return run if isinstance(run, BaselinePoint) else baseline_point(run)


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class BaselinePoint:
    """What the baseline needs of one earlier run, derived once (:func:`baseline_point`): a process
    that keeps recent runs in memory keeps these, not the runs."""

    measured_at: datetime | None
    setup_key: tuple[Any, ...]
    workload: _Workload
    values: Mapping[str, float]  # BASELINE_METRICS that the run has
    #: ``values`` in the order of :data:`BASELINE_METRICS`, None where absent (derived, so that
    #: :func:`build_baseline` fills its columns with one ``zip`` instead of a lookup per value).
    row: tuple[float | None, ...] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        values = self.values
        object.__setattr__(self, "row", tuple(values.get(path) for path in BASELINE_METRICS) if values else _NO_ROW)


#: The row of a point without values.
_NO_ROW: tuple[float | None, ...] = (None,) * len(BASELINE_METRICS)
_AT = operator.attrgetter("measured_at")


def baseline_key(run: CanonicalRun) -> BaselinePoint:
    """What :func:`comparable` compares of ``run``, without its metrics (cheap)."""
    return BaselinePoint(run.measured_at, _setup_key(run), _workload(run), {})


def baseline_point(run: CanonicalRun) -> BaselinePoint:
    meas = measure(run)
    values: dict[str, float] = {}
    for path in BASELINE_METRICS:
        v = meas.decode_tok_s if path == "decode_tok_s" else metric_value(run, path)
        if v is not None and math.isfinite(v):
            values[path] = v
    return BaselinePoint(run.measured_at, _setup_key(run), _workload(run), values)


def build_baseline(
    runs: Iterable[CanonicalRun | BaselinePoint],
    *,
    current: CanonicalRun | None = None,
    max_runs: int = 20,
    min_runs: int = 3,
) -> Baseline | None:
    """Summarise the most recent ``max_runs`` runs comparable with ``current`` (all given runs
    when ``current`` is None) that were measured before it. None with fewer than ``min_runs``."""
    pool: list[BaselinePoint]
    if current is None:
        pool = [r if isinstance(r, BaselinePoint) else baseline_point(r) for r in runs]
    else:
        # comparable(baseline_key(current), p) and measured before, in one pass over the runs
        # (every submission runs this over its cell's points: the key is computed once).
        key, workload, at = _setup_key(current), _workload(current), current.measured_at
        # A point of the very same traffic (the usual case: a cell repeats one workload) passes
        # _same_traffic; one tuple comparison in C says so first. Only while the current workload
        # has no NaN (x != x), which _same_traffic never matches but a tuple compares equal to itself.
        w0, w1, w2, w3 = workload
        exact = not (w0 != w0 or w1 != w1 or w2 != w2 or w3 != w3)  # noqa: PLR0124
        # _same_traffic once per distinct workload among the points (a cell repeats a few).
        same: dict[_Workload, bool] = {}
        pool = []
        for r in runs:
            if r is current:
                continue
            p = r if r.__class__ is BaselinePoint else _point_of(r)
            if p.setup_key != key:
                continue
            w = p.workload
            if not (exact and w == workload):
                if w not in same:
                    same[w] = _same_traffic(workload, w, BASELINE_TOLERANCE)
                if not same[w]:
                    continue
            if at is None or p.measured_at is None or p.measured_at < at:
                pool.append(p)
    if len(pool) < min_runs:
        return None  # chosen below is at most the pool
    # Most recent first; runs without a timestamp keep their given order, after dated ones.
    undated = [p for p in pool if p.measured_at is None]
    if undated:
        dated = sorted([p for p in pool if p.measured_at is not None], key=_AT, reverse=True)
        chosen = (dated + undated)[:max_runs]
    else:
        chosen = sorted(pool, key=_AT, reverse=True)[:max_runs]
    if len(chosen) < min_runs:
        return None
    # Every metric's column in the chosen order, by one zip over the points' rows.
    metrics: dict[str, MetricBaseline] = {}
    columns = zip(*[p.row for p in chosen], strict=True) if chosen else [()] * len(BASELINE_METRICS)
    full = len(chosen)
    for (path, higher), column in zip(BASELINE_METRICS.items(), columns, strict=True):
        # Most columns are full (every point has the metric) or empty: filter only the others.
        if None in column:
            if column.count(None) > full - min_runs:
                continue  # fewer than min_runs values
            values: Sequence[float] = [v for v in column if v is not None]
            n = len(values)
        else:
            values, n = column, full
        if n >= min_runs:
            # Median and 1.4826 × MAD (a σ estimate that a single outlier run cannot inflate):
            # statistics.median twice, the same arithmetic, spelled inline (once per metric per
            # submission); abs mapped in C rather than called per value.
            if n == 0:  # min_runs 0 and no value: as statistics.median says
                raise statistics.StatisticsError("no median for empty data")
            data = sorted(values)
            i = n // 2
            med = data[i] if n % 2 == 1 else (data[i - 1] + data[i]) / 2
            deviations = sorted(map(abs, [v - med for v in data]))
            mad = deviations[i] if n % 2 == 1 else (deviations[i - 1] + deviations[i]) / 2
            metrics[path] = MetricBaseline(med, 1.4826 * mad, n, higher)
    return Baseline(len(chosen), metrics)


def _concurrency_for_physics(measured: Measured, engine: EngineConfig) -> int:
    c = measured.concurrency or 1.0
    if engine.max_num_seqs.value and engine.max_num_seqs.value > 0:
        c = min(c, float(engine.max_num_seqs.value))
    return max(1, round(c))


def build_context(
    run: CanonicalRun,
    *,
    catalog: Catalog | None = None,
    slo: SLO | None = None,
    baseline_runs: Iterable[CanonicalRun | BaselinePoint] = (),
    expectations_fn: ExpectationsFn | None = None,
    resolved: ResolvedSetup | None = None,
    sweep: SweepCapacity | None = None,
) -> RunContext:
    """Compute the physics and the expectations, and freeze them with the run for the rules.

    ``resolved`` is what the run's names mean in the catalog, as the ingestion resolved them; left
    out, the names are resolved here (tests, library use). ``slo`` wins over ``run.slo``.
    ``expectations_fn(roofline, runtime=..., hardware_kind=..., hardware=..., model=..., quant=...)``
    defaults to :func:`advisor.ml.prior.prior_expectations`.
    """
    if catalog is None:
        from advisor.catalog import Catalog

        catalog = Catalog.default()
    if expectations_fn is None:
        from advisor.ml.prior import prior_expectations

        expectations_fn = prior_expectations

    setup = run.setup
    if resolved is None:
        resolved = catalog.resolve_setup(setup)
    missing: list[MissingField] = []
    blocks = {
        "hardware": "the decode and prefill ceilings, the KV pool and every expectation",
        "model": "weight and KV bytes, so every ceiling and the KV pool",
        "quantization": "the bytes per weight, so every ceiling and the quantization advice",
    }
    notes: list[str] = []
    measured_bits = _measured_bits(run)
    for kind, reason in resolved.unresolved.items():
        if kind == "quantization" and measured_bits is not None:
            continue  # the file measures it (below)
        path = f"setup.{kind}"
        missing.append(MissingField(path, reason, blocks[kind], SUPPLY_HINTS[path]))
    hardware = resolved.hardware
    model = resolved.model
    quant = _with_measured_bits(resolved.quantization, measured_bits, setup.runtime, notes, model)

    if setup.runtime is None:
        missing.append(
            MissingField(
                "setup.runtime",
                "no runtime given",
                "runtime-specific fixes and the runtime's expected efficiency",
                SUPPLY_HINTS["setup.runtime"],
            )
        )

    measured = measure(run)
    engine = engine_config(run, hardware)
    metrics = run.metrics
    if measured.prompt_tokens is None and not metrics.ttft_ms.is_empty():
        missing.append(
            MissingField(
                "workload.prompt_tokens_mean",
                "TTFT is reported but not the prompt length",
                "the TTFT floor and every prefill finding",
                SUPPLY_HINTS["workload.prompt_tokens_mean"],
            )
        )
    if measured.concurrency is None and measured.decode_tok_s is not None and (measured.n_requests or 0) > 1:
        have_rate = _rate(run) is not None
        missing.append(
            MissingField(
                "workload.concurrency",
                (
                    "the run has a request rate but no end-to-end latency or TTFT with TPOT to apply Little's law to"
                    if have_rate
                    else "the run has many requests but no concurrency, request rate or running count"
                ),
                "the per-stream decode ceiling (batching lowers it), so how far decode is from it",
                SUPPLY_HINTS["workload.concurrency"],
            )
        )
    if measured.decode_tok_s is None and (metrics.ttft_ms.p50 is not None or metrics.e2e_ms.p50 is not None):
        missing.append(
            MissingField(
                "metrics.decode_tok_s",
                "no decode speed, TPOT or ITL is reported",
                "every decode finding",
                SUPPLY_HINTS["metrics.decode_tok_s"],
            )
        )

    roofline, expectations = _physics(
        catalog, expectations_fn, setup, hardware, model, quant, engine, measured, run.workload, missing, notes
    )

    baseline = build_baseline(baseline_runs, current=run)
    if measured.concurrency_source and measured.concurrency_source.startswith("Little's law"):
        notes.append(
            f"workload.concurrency derived: {measured.concurrency:.3g} streams by {measured.concurrency_source}"
        )
    ctx = RunContext(
        run=run,
        hardware=hardware,
        model=model,
        quant=quant,
        runtime=setup.runtime,
        slo=slo if slo is not None else run.slo,
        baseline=baseline,
        roofline=roofline,
        expectations=expectations,
        missing=tuple(missing),
        engine=engine,
        measured=measured,
        catalog=catalog,
        expectations_fn=expectations_fn,
        notes=tuple(notes),
        sweep=sweep,
    )
    # ttft_breakdown reads the context it completes; set it in place rather than copying the whole
    # frozen context with dataclasses.replace (the context is not yet shared with anyone).
    holders = (roofline, hardware, model, quant, engine, catalog, expectations_fn, expectations)
    object.__setattr__(ctx, "setup_id", ((*map(id, holders), setup.runtime, setup.runtime_version), holders))
    object.__setattr__(ctx, "ttft", ttft_breakdown(ctx))
    return ctx


#: :func:`_physics`'s answers by the identity of its objects and the workload values it reads.
_PHYSICS: dict[tuple[Any, ...], tuple[tuple[object, ...], tuple[Any, ...]]] = {}


def _physics(
    catalog: Catalog,
    expectations_fn: ExpectationsFn | None,
    setup: Setup,
    hardware: HardwareSpec | None,
    model: ModelSpec | None,
    quant: QuantSpec | None,
    engine: EngineConfig,
    measured: Measured,
    workload: Workload,
    missing: list[MissingField],
    notes: list[str],
) -> tuple[Roofline | None, Expectations | None]:
    """The run's roofline and expectations, with what the physics adds to ``missing`` and
    ``notes`` (an inferred TP, a setup it cannot use), remembered per setup and workload shape.

    Keyed by the identity of the specs, the engine config (itself one object per setup, see
    :func:`advisor.rules.knobs.engine_config`), the catalog and the expectation function, and by
    the values the physics is derived from: runtime, TP and GPU count as stated, the prompt,
    output and KV-depth tokens and the concurrency as measured (the physics rounds them, and caps
    the concurrency at the engine's ``max_num_seqs``). Each entry holds the objects whose ids it
    uses. The roofline and expectations are frozen, so runs share them; the notes and missing
    fields are appended afresh to each run's lists.
    """
    holders = (catalog, expectations_fn, hardware, model, quant, engine)
    key = (
        *map(id, holders), setup.runtime, setup.tensor_parallel, setup.gpu_count, measured.prompt_tokens,
        measured.output_tokens, workload.kv_depth_tokens, measured.concurrency,
    )  # fmt: skip
    found = _PHYSICS.get(key)
    if found is None:
        prompt = round(measured.prompt_tokens) if measured.prompt_tokens else None
        output = round(measured.output_tokens) if measured.output_tokens else None
        depth = round(workload.kv_depth_tokens or 0)
        concurrency = _concurrency_for_physics(measured, engine)
        new_missing: list[MissingField] = []
        new_notes: list[str] = []
        roofline, expectations = _physics_afresh(
            catalog, expectations_fn, setup, hardware, model, quant, engine, prompt, output, depth, concurrency,
            new_missing, new_notes,
        )  # fmt: skip
        found = remember(
            _PHYSICS,
            key,
            (holders, (roofline, expectations, tuple(new_missing), tuple(new_notes))),
            PER_SETUP_CACHE_SIZE,
        )
    roofline, expectations, add_missing, add_notes = found[1]
    missing.extend(add_missing)
    notes.extend(add_notes)
    return roofline, expectations


def _physics_afresh(
    catalog: Catalog,
    expectations_fn: ExpectationsFn | None,
    setup: Setup,
    hardware: HardwareSpec | None,
    model: ModelSpec | None,
    quant: QuantSpec | None,
    engine: EngineConfig,
    prompt: int | None,
    output: int | None,
    depth: int,
    concurrency: int,
    missing: list[MissingField],
    notes: list[str],
) -> tuple[Roofline | None, Expectations | None]:
    """:func:`_physics` computed."""
    tensor_parallel = setup.tensor_parallel or 1
    if setup.tensor_parallel is None and (setup.gpu_count or 1) > 1 and hardware and model and quant:
        tensor_parallel = _inferred_tp(setup, hardware, model, quant, engine, missing, notes)
    roofline: Roofline | None = None
    if hardware is not None and model is not None and quant is not None:
        try:
            roofline = analyse(
                hardware,
                model,
                quant,
                prompt_tokens=prompt,
                output_tokens=output,
                kv_depth_tokens=depth,
                concurrency=concurrency,
                tensor_parallel=tensor_parallel,
                kv_cache_dtype=_kv_dtype(catalog, engine.kv_cache_dtype.value),
                gpu_memory_utilization=_memory_fraction(engine, kv_pool_runtime(setup.runtime, engine)),
                runtime=kv_pool_runtime(setup.runtime, engine),
            )
        except ValueError as exc:
            missing.append(
                MissingField(
                    "setup",
                    f"the physics cannot use this setup: {exc}",
                    "every ceiling",
                    "check the inline specs",
                )
            )

    expectations: Expectations | None = None
    if roofline is not None and hardware is not None:
        expectations = _expect(expectations_fn, roofline, setup.runtime, hardware, model, quant)
    return roofline, expectations


def _inferred_tp(
    setup: Setup,
    hardware: HardwareSpec,
    model: ModelSpec,
    quant: QuantSpec,
    engine: EngineConfig,
    missing: list[MissingField],
    notes: list[str],
) -> int:
    """A run that states ``gpu_count`` but no ``tensor_parallel``: the smallest TP whose group holds
    the weights (:func:`advisor.physics.parallel.smallest_fitting_tp`), so a model too large for
    one GPU is not judged against a one-GPU ceiling; said in a note, and asked for (MEAS004), since
    it is a guess. 1 when one GPU holds the model or the memory is unknown."""
    from advisor.physics import RUNTIME_RESERVE_BYTES_PER_DEVICE
    from advisor.physics.parallel import smallest_fitting_tp

    runtime = kv_pool_runtime(setup.runtime, engine)
    needed = smallest_fitting_tp(
        hardware,
        model,
        quant,
        gpu_count=setup.gpu_count or 1,
        gpu_memory_utilization=_memory_fraction(engine, runtime),
        reserve_bytes_per_device=RUNTIME_RESERVE_BYTES_PER_DEVICE.get(runtime or "vllm", 2.0 * 1024**3),
    )
    if needed is None or needed <= 1:
        return 1
    text = f"tensor parallelism inferred: the model needs {needed} GPUs"
    notes.append(f"{text} of the {setup.gpu_count} stated (no tensor_parallel given); the ceilings assume TP {needed}")
    missing.append(
        MissingField(
            "setup.tensor_parallel",
            text,
            f"the exact per-stream ceilings (computed at the inferred TP {needed})",
            "set setup.tensor_parallel: ?tensor_parallel=<n>, or `advisor submit --tensor-parallel <n>`",
        )
    )
    return needed


#: Measured bits per weight more than this fraction away from the declared format's are what ran
#: (a GGUF named F16 whose experts are MXFP4 measures about 5.3 bits).
_BITS_TOLERANCE = 0.2


def _measured_bits(run: CanonicalRun) -> float | None:
    """Bits per weight the file measures (llama-bench: model_size × 8 / model_n_params)."""
    text = run.labels.get("bits_per_weight")
    try:
        bits = float(text) if text is not None else None
    except ValueError:
        return None
    return bits if bits is not None and 1.0 <= bits <= 32.0 else None


def _with_measured_bits(
    quant: QuantSpec | None,
    measured: float | None,
    runtime: str | None,
    notes: list[str],
    model: ModelSpec | None = None,
) -> QuantSpec | None:
    """The declared format, or the file's measured density where the two disagree (or none is
    declared): the physics must judge what ran, not the name of the file.

    A mixture-of-experts file that measures fewer bits than its declared type holds its routed
    experts narrower (gpt-oss's GGUF "F16": MXFP4 experts, F16 elsewhere): the other tensors,
    which every token reads, keep the declared width and the experts take what the file's size
    leaves, ``(measured × params − others × declared) / experts``."""
    if measured is None:
        return quant
    if quant is not None and abs(measured - quant.bits_per_weight) <= _BITS_TOLERANCE * quant.bits_per_weight:
        return quant
    # llama.cpp mixes tensor types in one GGUF and computes in fp16 whatever the storage.
    family = "gguf" if runtime == "llamacpp" or quant is None else quant.family
    split = (
        model.expert_split() if model is not None and quant is not None and measured < quant.bits_per_weight else None
    )
    if split is not None and quant is not None and model is not None:
        others = model.params_b - split[0]
        experts = (measured * model.params_b - others * quant.bits_per_weight) / split[0]
        if 1.0 <= experts < measured:
            notes.append(
                f"bits per weight derived: {measured:.3g} from the file's model_size × 8 / model_n_params, not the "
                f"{quant.bits_per_weight:g} its name {quant.name} implies: the routed experts are stored at "
                f"{experts:.3g} bits and the other tensors, read by every token, at {quant.bits_per_weight:g}"
            )
            return QuantSpec(
                quant.id,
                f"{quant.name} (experts measured at {experts:.2f} bits)",
                experts,
                family,
                dense_bits_per_weight=quant.bits_per_weight,
            )
    if quant is None:
        notes.append(f"bits per weight derived: {measured:.3g}, from the file's model_size × 8 / model_n_params")
        return QuantSpec("measured", f"measured {measured:.2f} bits per weight", measured, family)
    notes.append(
        f"bits per weight derived: {measured:.3g} from the file's model_size × 8 / model_n_params, not the "
        f"{quant.bits_per_weight:g} its name {quant.name} implies (mixed tensor types); the physics uses {measured:.3g}"
    )
    return QuantSpec(quant.id, f"{quant.name} (measured {measured:.2f} bits)", measured, family)


def _kv_dtype(catalog: Catalog, value: str | None) -> str:
    """The catalog's KV-dtype aliases first (they know ``fp8_e4m3fn``, ``q8_0``, …); an unknown
    spelling counts as the model's 16-bit dtype rather than blocking the physics."""
    resolve = getattr(catalog, "resolve_kv_cache_dtype", None)
    if resolve is not None:
        try:
            resolved = resolve(value)
        except (AdvisorError, ValueError, KeyError, LookupError, TypeError):
            return normalise_kv_dtype(value)
        if isinstance(resolved, str):
            return resolved
    return normalise_kv_dtype(value)


#: TensorRT-LLM's spellings of its memory fraction, a share of what is left after the weights.
_TRTLLM_FRACTION_ARGS = frozenset({"kv_cache_free_gpu_memory_fraction", "free_gpu_memory_fraction"})


def kv_pool_runtime(runtime: str | None, engine: EngineConfig) -> str | None:
    """Whose semantics size the KV pool (:func:`advisor.physics.kv_pool_bytes`): the run's runtime,
    or TensorRT-LLM's when the memory fraction is spelled its way (its meaning travels with it)."""
    if _trtllm_fraction_spelling(engine.memory_fraction.arg or ""):
        return "trtllm"
    return runtime


@functools.lru_cache(maxsize=64)
def _trtllm_fraction_spelling(arg: str) -> bool:
    """The memory-fraction flag as given is TensorRT-LLM's (a few spellings; asked several times a run)."""
    return normalise_key(arg) in _TRTLLM_FRACTION_ARGS


#: TGI sizes its KV cache from ``--cuda-memory-fraction × TGI_WIGGLE_ROOM`` of the device
#: (server/text_generation_server/models/globals.py: TGI_WIGGLE_ROOM defaults to 0.90).
TGI_WIGGLE_ROOM = 0.9


def _memory_fraction(engine: EngineConfig, runtime: str | None = None) -> float:
    """The memory fraction as the pool's runtime means it (vLLM/SGLang: of the device; TGI: of the
    device times its 0.9 wiggle room; TensorRT-LLM: of what is left after the weights, see
    :func:`kv_pool_runtime`); 0.9 when unknown."""
    value = engine.memory_fraction.value
    if runtime == "tgi":
        return min(max((value if value is not None else 1.0) * TGI_WIGGLE_ROOM, 0.05), 1.0)
    if value is None:
        return 0.9
    return min(max(value, 0.05), 1.0)


#: Expectations remembered per (function, roofline, runtime, specs). A fleet's runs repeat a few
#: setups and workload shapes, and every run asks for its own expectations and those of its what-ifs
#: (the prior costs ≈ 50 µs a call, a fitted model far more). Bounded: a stream of one-off setups
#: cannot grow the process.
EXPECTATIONS_CACHE_SIZE = 4096
_EXPECTATIONS: dict[tuple[Any, ...], tuple[tuple[object, ...], Expectations]] = {}


def expectations_of(
    fn: ExpectationsFn,
    roofline: Roofline,
    *,
    runtime: str,
    hardware: HardwareSpec,
    model: ModelSpec | None,
    quant: QuantSpec | None,
) -> Expectations:
    """``fn(roofline, runtime=..., hardware_kind=hardware.kind, hardware=..., model=..., quant=...)``,
    memoised by the identity of its inputs (:data:`EXPECTATIONS_CACHE_SIZE`).

    Identity, not equality: the inputs are frozen, the rooflines come from the physics' own cache
    and the specs from the catalog's, so the same setup brings the same objects, and an identity
    key costs a fraction of hashing a 33-field roofline. Each entry holds its inputs, so no other
    object can take their ids while it lives. The answer is frozen (:class:`Expectations`), so
    runs may share it; an expectation function is a pure function of its inputs (the prior; a
    fitted model is one object per version). A call that raises is not remembered.
    """
    key = (id(fn), id(roofline), runtime, id(hardware), id(model), id(quant))
    found = _EXPECTATIONS.get(key)
    if found is not None:
        return found[1]
    exp = fn(roofline, runtime=runtime, hardware_kind=hardware.kind, hardware=hardware, model=model, quant=quant)
    remember(_EXPECTATIONS, key, ((fn, roofline, hardware, model, quant), exp), EXPECTATIONS_CACHE_SIZE)
    return exp


#: What rules remember per setup (:func:`per_setup`): their answers by (rule, what, setup).
PER_SETUP_CACHE_SIZE = 8192
_PER_SETUP: dict[tuple[Any, ...], tuple[tuple[object, ...], Any]] = {}
_T = TypeVar("_T")


def per_setup(ctx: RunContext, owner: object, what: Hashable, compute: Callable[[RunContext], _T]) -> _T:
    """``compute(ctx)``, remembered per setup: the one place the analysis caches what a rule
    derives from the setup alone (issue #19: "cache per setup what is per setup").

    The key is ``owner`` (the rule, so its own configuration), ``what``, and the context's
    :attr:`RunContext.setup_id`: the identity of its roofline, hardware, model, quantization,
    engine config, catalog, expectation function and expectations, plus the runtime and its
    version. Identity, not equality, as in :func:`expectations_of`: the rooflines, engine configs
    and expectations come from their own per-setup caches and the specs from the catalog's, so the
    runs of one setup and workload shape bring the same objects; an entry holds them, so no other
    object takes their ids while it lives. The roofline carries the workload as the physics sees
    it (prompt and output tokens, KV depth, concurrency, TP, KV dtype, memory fraction).

    ``compute`` may read only those: never the run's metrics, its baseline, SLO, labels or source
    (tests/unit/rules/test_per_setup.py compares every rule's findings with and without the memo on
    random runs). A context without ``setup_id`` (built by hand, or copied) computes afresh.
    Bounded (:data:`PER_SETUP_CACHE_SIZE`), oldest first out.
    """
    setup = ctx.setup_id
    if setup is None:
        return compute(ctx)
    key = (id(owner), what, setup[0])
    try:
        return _PER_SETUP[key][1]  # type: ignore[no-any-return]  # a hit, nearly always
    except KeyError:
        pass
    value = compute(ctx)
    remember(_PER_SETUP, key, ((owner, *setup[1]), value), PER_SETUP_CACHE_SIZE)
    return value


_MISSING = object()


def per_run(ctx: RunContext, what: Hashable, compute: Callable[[RunContext], _T]) -> _T:
    """``compute(ctx)`` once per context: for what several rules ask of the same run (whether
    prefill advice applies, the budget plan). The context is frozen, so the answer cannot change;
    the memo lives and dies with the context."""
    memo = ctx.run_memo
    found = memo.get(what, _MISSING)
    if found is _MISSING:
        found = memo[what] = compute(ctx)
    return found  # type: ignore[no-any-return]


def clear_caches() -> None:
    """Forget what the analysis remembers per setup (engine configs, expectations, rooflines,
    the rules' per-setup answers): tests compare cold and warm analyses."""
    from advisor.physics.roofline import clear_cache as clear_rooflines
    from advisor.rules.whatif import clear_cache as clear_what_ifs  # whatif imports this module

    _EXPECTATIONS.clear()
    _PER_SETUP.clear()
    _PHYSICS.clear()
    clear_engine_configs()
    clear_rooflines()
    clear_what_ifs()


def _expect(
    fn: ExpectationsFn | None,
    roofline: Roofline,
    runtime: str | None,
    hardware: HardwareSpec,
    model: ModelSpec | None = None,
    quant: QuantSpec | None = None,
) -> Expectations | None:
    if fn is None:
        return None
    try:
        # The specs feed the fitted model's features (vendor, bits, quantization family,
        # attention, MoE); the prior ignores them.
        return expectations_of(fn, roofline, runtime=runtime or "other", hardware=hardware, model=model, quant=quant)
    except (ValueError, KeyError, LookupError, TypeError, ArithmeticError):
        # Expectations refine findings; a model that cannot answer for an odd setup must not
        # take the physics-based findings down with it.
        return None


#: Tools whose runs are engine tests (fixed synthetic batches timed inside the engine), not user
#: traffic: prompt, prefix and queueing advice does not apply to them.
_MICROBENCHMARK_TOOLS = (
    "llama-bench", "llama-batched-bench", "llama-sweep-bench", "llama-benchy", "bench latency", "bench throughput",
)  # fmt: skip
_MICROBENCHMARK_FORMATS = ("llama_bench", "llama_sweep_bench", "llama_benchy")


def is_microbenchmark(run: CanonicalRun) -> bool:
    """llama-bench, llama-batched-bench, ik_llama.cpp llama-sweep-bench, llama-benchy (fixed-shape
    pp/tg tests), vLLM ``bench latency`` / ``bench throughput`` (and the legacy
    ``benchmark_latency.py`` / ``benchmark_throughput.py``)."""
    source = run.source
    return _microbenchmark_source(source.format, source.tool)


@functools.lru_cache(maxsize=256)
def _microbenchmark_source(source_format: str | None, tool: str | None) -> bool:
    """:func:`is_microbenchmark` of a source's format and tool (a handful of distinct pairs; rules
    ask this several times per run)."""
    if source_format in _MICROBENCHMARK_FORMATS:
        return True
    text = (tool or "").lower().replace("_", " ").replace("benchmark ", "bench ")
    return any(name in text for name in _MICROBENCHMARK_TOOLS)


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class TtftPart:
    """One part of the time to first token: milliseconds, where the number comes from, and how
    sure it is (0..1). ``ms`` is None when nothing in the run or the physics gives it."""

    ms: float | None
    source: str
    confidence: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "ms": None if self.ms is None else round(self.ms, 1),
            "source": self.source,
            "confidence": round(self.confidence, 2),
        }


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class TtftBreakdown:
    """Where a run's typical TTFT goes: ``queueing + prefill + cache + remainder = total_ms``.

    ``prefill`` is the compute for the whole prompt, ``cache`` the (negative) time the prefix cache
    saved of it, ``remainder`` what neither explains: network, host, tokenisation, hidden reasoning
    tokens before the first visible one.
    """

    total_ms: float
    basis: str
    queueing: TtftPart
    prefill: TtftPart
    cache: TtftPart
    remainder: TtftPart

    @property
    def dominant(self) -> str:
        """The largest of ``queueing``, ``prefill`` (net of the cache) and ``remainder``."""
        # max() over the three by (ms, is prefill), spelled out: the first one stays unless a later
        # one's key is greater, so a tie goes to prefill (rules ask this per run).
        net_prefill = (self.prefill.ms or 0.0) + (self.cache.ms or 0.0)
        best, key = "queueing", (self.queueing.ms or 0.0, False)
        if (net_prefill, True) > key:
            best, key = "prefill", (net_prefill, True)
        if (self.remainder.ms or 0.0, False) > key:
            best = "remainder"
        return best

    def share(self, part: str) -> float:
        """A part's share of the total (prefill net of the cache)."""
        if self.total_ms <= 0:
            return 0.0
        if part == "prefill":
            value = (self.prefill.ms or 0.0) + (self.cache.ms or 0.0)
        else:
            value = getattr(self, part).ms or 0.0
        return max(0.0, min(1.0, value / self.total_ms))

    def to_dict(self) -> dict[str, Any]:
        return {
            "queueing": self.queueing.to_dict(),
            "prefill": self.prefill.to_dict(),
            "cache": self.cache.to_dict(),
            "remainder": self.remainder.to_dict(),
            "total_ms": round(self.total_ms, 1),
            "basis": self.basis,
            "dominant": self.dominant,
        }


def _prefill_rate(ctx: RunContext) -> tuple[float, str, float] | None:
    """Prompt tokens/s this setup prefills at, its source and confidence: measured, the fitted
    expectation, or the physics ceiling at :data:`ASSUMED_PREFILL_MFU`."""
    if ctx.measured.prefill_tok_s:
        return ctx.measured.prefill_tok_s, "metrics.prefill_tok_s", 0.8
    return per_setup(ctx, _prefill_rate, "prefill_rate", _setup_prefill_rate)


def _setup_prefill_rate(ctx: RunContext) -> tuple[float, str, float] | None:
    """:func:`_prefill_rate` without a measured rate: the setup's alone (:func:`per_setup`)."""
    band = getattr(ctx.expectations, "prefill_tok_s", None) if ctx.expectations is not None else None
    expected = getattr(band, "expected", None) if band is not None else None
    if isinstance(expected, _NUMBER) and expected > 0:
        return float(expected), "expected prefill_tok_s", 0.6
    if ctx.roofline is not None and ctx.roofline.prefill_ceiling_tok_s:
        rate = ctx.roofline.prefill_ceiling_tok_s * ASSUMED_PREFILL_MFU
        return rate, f"physics prefill ceiling × {ASSUMED_PREFILL_MFU:g} MFU", 0.5
    return None


def _queueing(ctx: RunContext, total: float, prefill_net: float | None) -> TtftPart:
    m, w = ctx.run.metrics, ctx.run.workload
    hit = _first(m.queue_ms, "p50", "mean")
    if hit is not None:
        return TtftPart(min(hit[0], total), f"metrics.queue_ms.{hit[1]} (scheduler delay)", 0.9)
    if m.queue_waiting_mean and m.request_throughput_rps:
        # Little's law on the queue: time waiting = requests waiting ÷ requests served per second.
        wait = m.queue_waiting_mean / m.request_throughput_rps * 1000.0
        return TtftPart(min(wait, total), "Little's law: queue_waiting_mean ÷ request_throughput_rps", 0.7)
    offered, achieved = w.request_rate, m.request_throughput_rps
    if offered and achieved and achieved < OVERLOAD_SERVED_SHARE * offered:
        # Offered far above served: the queue grows through the run, and TTFT is mostly waiting.
        rest = max(total - (prefill_net or 0.0), 0.0)
        return TtftPart(rest, f"offered {offered:g} req/s, served {achieved:g} req/s: the rest is queueing", 0.6)
    concurrency = ctx.measured.concurrency
    if concurrency is not None and concurrency <= 1.0:
        return TtftPart(0.0, "one request at a time: nothing to queue behind", 0.8)
    return TtftPart(None, "no queue time, waiting count or offered rate reported", 0.0)


#: Served ÷ offered below which a run is overloaded (its queue grows through the run).
OVERLOAD_SERVED_SHARE = 0.9


def ttft_breakdown(ctx: RunContext) -> TtftBreakdown | None:
    """Split the typical TTFT (p50, else mean) into queueing, prefill, cache and the remainder.

    Queueing: the scheduler delay the tool reports (inference-perf, guidellm, vLLM queue time),
    else the waiting count by Little's law, else offered against served rate. Prefill: the prompt
    over the expected prefill rate. Cache: the prefix hits (hit rate or cached prompt tokens),
    negative. Remainder: the rest (never below 0).
    """
    ttft = _first(ctx.run.metrics.ttft_ms, "p50", "mean")
    if ttft is None:
        return None
    total, basis = ttft[0], f"ttft_ms.{ttft[1]}"
    m = ctx.measured
    rate = _prefill_rate(ctx)
    prefill = TtftPart(None, "no prompt length or prefill rate", 0.0)
    cache = TtftPart(0.0, "no prefix-cache hits reported", 0.3)
    if m.prompt_tokens is not None and rate is not None:
        prefill = TtftPart(m.prompt_tokens / rate[0] * 1000.0, f"prompt_tokens_mean ÷ {rate[1]}", rate[2])
        if m.uncached_prompt_tokens is not None and m.uncached_prompt_tokens < m.prompt_tokens:
            saved = (m.prompt_tokens - m.uncached_prompt_tokens) / rate[0] * 1000.0
            hits = (
                "metrics.cached_prompt_tokens_mean"
                if ctx.run.metrics.cached_prompt_tokens_mean is not None
                else "metrics.prefix_cache_hit_rate"
            )
            cache = TtftPart(-saved, f"{hits} × the prefill rate", rate[2])
    if prefill.ms is not None and prefill.ms + (cache.ms or 0.0) > total:
        # Prefill cannot take longer than the whole TTFT: the estimate was too slow; scale it down.
        scale = total / (prefill.ms + (cache.ms or 0.0))
        prefill = TtftPart(prefill.ms * scale, prefill.source + " (capped at the TTFT)", prefill.confidence * 0.7)
        cache = TtftPart((cache.ms or 0.0) * scale, cache.source, cache.confidence)
    prefill_net = None if prefill.ms is None else prefill.ms + (cache.ms or 0.0)
    queueing = _queueing(ctx, total, prefill_net)
    explained = (queueing.ms or 0.0) + (prefill_net or 0.0)
    known = prefill.ms is not None and queueing.ms is not None
    remainder = TtftPart(
        max(total - explained, 0.0),
        "the rest: network, host, tokenisation, hidden reasoning tokens",
        0.6 if known else 0.2,
    )
    return TtftBreakdown(total, basis, queueing, prefill, cache, remainder)


@dataclass(frozen=True, slots=True)
class SweepCapacity:
    """What a sweep file (several offered rates or concurrencies of one setup) says about the
    setup's capacity: the knee, the highest load it keeps up with, and the rate it serves there.

    ``load`` is ``request_rate`` (the knee is the highest offered rate served within
    :data:`OVERLOAD_SERVED_SHARE`) or ``concurrency`` (the knee is the lowest concurrency that
    reaches 90 % of the sweep's best throughput: beyond it, more streams only queue).
    """

    load: str
    knee: float
    capacity_rps: float
    points: int
    overloaded_from: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "load": self.load,
            "knee": round(self.knee, 3),
            "capacity_rps": round(self.capacity_rps, 3),
            "points": self.points,
            "overloaded_from": None if self.overloaded_from is None else round(self.overloaded_from, 3),
        }


#: Share of a concurrency sweep's best throughput at which more streams stop paying.
_KNEE_THROUGHPUT_SHARE = 0.9


def sweep_capacity(runs: Sequence[CanonicalRun]) -> SweepCapacity | None:
    """The knee of a sweep file's runs, or None when they are not a sweep (fewer than two distinct
    loads with a served rate) or are engine microbenchmarks."""
    points = [r for r in runs if r.metrics.request_throughput_rps and not is_microbenchmark(r)]
    rated = sorted(
        (
            (float(r.workload.request_rate), float(r.metrics.request_throughput_rps or 0.0))
            for r in points
            if r.workload.request_rate
        ),
    )
    if len({rate for rate, _ in rated}) >= 2:
        kept = [(rate, served) for rate, served in rated if served >= OVERLOAD_SERVED_SHARE * rate]
        over = [rate for rate, served in rated if served < OVERLOAD_SERVED_SHARE * rate]
        if kept:
            knee, served = kept[-1]
            return SweepCapacity("request_rate", knee, served, len(rated), min(over) if over else None)
        lowest, served = rated[0]
        return SweepCapacity("request_rate", lowest, served, len(rated), lowest)
    loads = sorted(
        (float(r.workload.concurrency), float(r.metrics.request_throughput_rps or 0.0))
        for r in points
        if r.workload.concurrency
    )
    if len({c for c, _ in loads}) < 2:
        return None
    best = max(served for _, served in loads)
    knee, served = next((c, s) for c, s in loads if s >= _KNEE_THROUGHPUT_SHARE * best)
    return SweepCapacity("concurrency", knee, served, len(loads))
