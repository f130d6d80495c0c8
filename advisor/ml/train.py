"""Fitting: training sets, grouped cross-validation against two baselines, conformal intervals.

For every target with at least :data:`MIN_ROWS` observations:

1. **Training set.** Features (:mod:`advisor.ml.features`) and ``y = log(measured / reference)``.
   Published rows weigh 1; a fleet cell weighs ``sqrt(runs)`` (repeats of one setup are not
   independent evidence), and the fleet as a whole gets the share ``F / (F + 200)`` of the total
   weight, F being its number of runs: 200 fleet runs count as much as the published set, and the
   fleet dominates as it grows.
2. **Cross-validation**, twice: grouped by hardware (``GroupKFold``, 5 folds: does it carry to a
   device it never saw?) and by source (leave one publication or deployment out). Each fold fits
   the gradient-boosting model and the ridge baseline on the other folds, and scores them next to
   the pure roofline (``measured = reference``) and the roofline × one constant efficiency (the
   weighted median of the training folds). The score is the median absolute percentage error
   (MdAPE) of the predicted value, per target and per hardware kind.
3. **Intervals** are split-conformal on the out-of-fold residuals of the hardware-grouped CV:
   percentiles of the residuals, per hardware kind when a kind has :data:`MIN_STRATUM` residuals
   from :data:`MIN_STRATUM_GROUPS` devices, else pooled. Errors on an unseen device cluster by
   device, so the 10th-90th percentile covers fewer than 80 % of a new device's runs; the central
   level is widened (0.80-0.99) until fold-by-fold coverage reaches 80 %. Coverage is reported one
   level out: each fold's band comes from a level chosen, and offsets computed, on the other
   folds only (``coverage``), next to the plain 10th-90th construction (``coverage_untuned``).
   A row of a hardware family its fold never saw is answered by the fallback with the fallback's
   band, so it is judged by that band and left out of the conformal one; how far the fallback's
   band reaches beyond its training residuals is itself chosen on the leave-one-family-out rows
   (:class:`_Widening`).
4. **Final fit** on every row.

Large fleets are cross-validated on a random :data:`CV_MAX_ROWS` sample per target (the final
fit uses every row), which keeps a fit on 100,000 runs within its time budget.
"""

from __future__ import annotations

import hashlib
import math
import os
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from sklearn.model_selection import GroupKFold, LeaveOneGroupOut
from threadpoolctl import threadpool_limits

from advisor.ml.base import PhysicalBase, fit_base
from advisor.ml.dataset import TARGETS, Observation
from advisor.ml.features import (
    CATEGORICAL,
    FEATURES,
    NUMERIC,
    TREE_NEUTRAL,
    FeatureInput,
    feature_row,
    hardware_family,
    tree_frame,
)
from advisor.ml.model import FALLBACK_SHIFT, Fallback, Head, PerformanceModel, runtime_cell
from advisor.ml.pipeline import (
    GBM_PARAMS,
    FoldBins,
    RidgeDesign,
    fit_weighted,
    fold_boosting,
    gradient_boosting,
    linear,
)
from advisor.ml.shrink import Losses, Selection, apply_nested

__all__ = [
    "CV_MAX_ROWS",
    "FLEET_HALF_WEIGHT_RUNS",
    "MIN_ROWS",
    "MIN_STRATUM",
    "MIN_STRATUM_GROUPS",
    "NOMINAL_COVERAGE",
    "FitResult",
    "Progress",
    "TrainingSet",
    "build_training_sets",
    "data_hash",
    "fit",
    "hardware_families",
    "losing_groupings",
    "weighted_median",
]

#: Fleet runs that weigh as much as the whole published set.
FLEET_HALF_WEIGHT_RUNS = 200
#: A target needs this many observations for a head of its own.
MIN_ROWS = 30
#: Interval offsets are per hardware kind once a kind has this many residuals from this many
#: devices.
MIN_STRATUM = 30
MIN_STRATUM_GROUPS = 3
#: The band is the 10th-90th percentile: 80 % of runs should fall inside.
NOMINAL_COVERAGE = 0.8
#: Cross-validation samples at most this many observations per target.
CV_MAX_ROWS = 4_000
#: At most this many folds when grouping by hardware.
HARDWARE_FOLDS = 5
#: Per-source metrics are kept for at most this many sources (the largest).
BY_SOURCE_LIMIT = 20
#: From this many rows on, a final fit uses every core.
PARALLEL_FIT_ROWS = 20_000
#: Above this many rows, the boosted trees of a final fit learn from this many rows drawn with
#: replacement in proportion to their weights, unweighted (see :func:`_fit_hybrid`).
RESAMPLE_ROWS = 40_000

#: Leave-one-family-out runs for these targets only (the tail heads are judged by device and
#: source; their extra folds cost fit time, not information the gate uses).
FAMILY_TARGETS = ("decode_tok_s", "prefill_tok_s")
#: The CV groupings whose out-of-fold residuals calibrate the band (see :func:`_fit`).
CALIBRATION_SCHEMES = ("hardware", "source")
#: Shifts (log offsets added on each side) the fallback's band may take (see :class:`_Widening`).
SHIFT_GRID = np.round(np.arange(0.0, 2.001, 0.01), 2)
#: Central levels the interval may widen to (see :func:`_choose_level`).
LEVEL_GRID = np.round(np.arange(NOMINAL_COVERAGE, 0.995, 0.01), 2)
_METHODS = ("model", "linear", "roofline", "constant")
#: Also scored, but kept apart from the four above (the API summary lists exactly those): the
#: model's physics-shaped base alone (:mod:`advisor.ml.base`).
_BASE = "base"
#: Also kept apart: the hybrid's own answer before the unseen-kind fallback, and a 0/1 flag per
#: row of "its hardware kind was absent from the fold's training rows".
_RAW = "model_raw"
_UNSEEN = "unseen_kind"
#: Also kept apart: the band the fold's fallback would give an unseen kind
#: (:func:`_fallback_offsets`), low and high log offsets around each answer, per answer
#: (``_FALLBACK_BAND[mode]``).
_FALLBACK_BAND = {
    "base": ("fallback_base_low", "fallback_base_high"),
    "constant": ("fallback_constant_low", "fallback_constant_high"),
}
_APART = (_BASE, _RAW, _UNSEEN, *(name for pair in _FALLBACK_BAND.values() for name in pair))

#: ``progress(description, done, total)`` after every fitted estimator.
Progress = Callable[[str, int, int], None]

FloatArray = npt.NDArray[np.float64]
#: Labels (devices, sources, kinds) as object arrays of str.
StrArray = npt.NDArray[np.object_]


@dataclass
class TrainingSet:
    """One target's observations: rows of a feature frame (shared by every target), ``y =
    log(measured / reference)``, weights and groups (arrays aligned with ``index``)."""

    target: str
    features: pd.DataFrame = field(repr=False)
    index: npt.NDArray[np.intp]
    y: FloatArray
    weight: FloatArray
    hardware_group: StrArray
    source: StrArray
    kind: StrArray
    origin: StrArray
    #: :func:`hardware_families` once computed (the CV asks for them per grouping and per fold
    #: count; each is a Python pass over the rows).
    families: StrArray | None = field(default=None, init=False, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.y)

    @property
    def frame(self) -> pd.DataFrame:
        """This target's feature rows (a fresh copy: only one target's is alive at a time)."""
        return self.features.iloc[self.index].reset_index(drop=True)

    def rows(self) -> list[tuple[object, ...]]:
        """The feature rows as tuples (what :func:`advisor.ml.features.feature_row` builds)."""
        return list(self.frame.itertuples(index=False, name=None))

    def subset(self, index: npt.NDArray[np.intp]) -> TrainingSet:
        return TrainingSet(
            self.target,
            self.features,
            self.index[index],
            self.y[index],
            self.weight[index],
            self.hardware_group[index],
            self.source[index],
            self.kind[index],
            self.origin[index],
        )


def build_training_sets(
    observations: Iterable[Observation], *, fleet_half_weight_runs: int = FLEET_HALF_WEIGHT_RUNS
) -> dict[str, TrainingSet]:
    """Group observations by target, dropping those without a usable log ratio.

    Observations are consumed one at a time and only their scalars kept, so a generator of
    them (:func:`advisor.ml.dataset.iter_fleet_observations`) never holds every roofline at
    once. The targets of one fleet cell share their features: consecutive observations of the
    same setup and workload get one row of one frame that every target indexes into.
    """
    rows = _FrameBuilder()
    previous: Observation | None = None
    # Per target, column by column; numbers in typed arrays rather than boxed in tuples (a large
    # fleet has half a million observations).
    by_target: dict[str, _Columns] = {}
    for obs in observations:
        value = obs.log_ratio
        if value is None:
            continue
        # A cell yields its targets one after the other with the same objects: compare with the
        # previous observation by identity (holding only that one alive).
        if previous is None or not _same_setup(obs, previous):
            item = FeatureInput(obs.roofline, obs.runtime, obs.hardware.kind, obs.hardware, obs.model, obs.quant)
            rows.append(feature_row(item))
        previous = obs
        columns = by_target.get(obs.target)
        if columns is None:
            columns = by_target[obs.target] = _Columns()
        columns.add(len(rows) - 1, value, obs)
    shared = rows.frame()
    del rows
    sets: dict[str, TrainingSet] = {}
    for target in TARGETS:
        found = by_target.pop(target, None)
        if found is None:
            continue
        origin = _labels(found.origin)
        sets[target] = TrainingSet(
            target,
            shared,
            np.frombuffer(found.row, dtype=np.int64).astype(np.intp),
            np.frombuffer(found.value, dtype=np.float64).copy(),
            _weights(origin, np.frombuffer(found.runs, dtype=np.float64).copy(), fleet_half_weight_runs),
            _labels(found.device),
            _labels(found.source),
            _labels(found.kind),
            origin,
        )
    return sets


class _FrameBuilder:
    """The shared feature frame, built column by column: numbers straight into typed arrays,
    labels as references to their (few) strings. A list of 100,000 row tuples of boxed floats,
    then pandas' 2-D object array of them, was the largest transient of a worst-case fit."""

    def __init__(self) -> None:
        self.labels: list[list[object]] = [[] for _ in CATEGORICAL]
        self.numbers = [array("d") for _ in NUMERIC]

    def __len__(self) -> int:
        return len(self.numbers[0])

    def append(self, row: tuple[object, ...]) -> None:
        k = len(CATEGORICAL)
        for j, column in enumerate(self.labels):
            column.append(row[j])
        for j, numbers in enumerate(self.numbers):
            numbers.append(row[k + j])  # type: ignore[arg-type]

    def frame(self) -> pd.DataFrame:
        data: dict[str, Any] = {}
        for name, labels in zip(CATEGORICAL, self.labels, strict=True):
            data[name] = pd.Series(labels, dtype=object)  # not pandas' inferred string dtype
        for name, numbers in zip(NUMERIC, self.numbers, strict=True):
            data[name] = np.frombuffer(numbers, dtype=np.float64).copy() if len(numbers) else np.empty(0)
        return pd.DataFrame(data, columns=list(FEATURES))


class _Columns:
    """One target's observations while they are collected."""

    def __init__(self) -> None:
        self.row = array("q")
        self.value = array("d")
        self.runs = array("d")
        self.origin: list[str] = []
        self.device: list[str] = []
        self.source: list[str] = []
        self.kind: list[str] = []

    def add(self, row: int, value: float, obs: Observation) -> None:
        self.row.append(row)
        self.value.append(value)
        self.runs.append(max(obs.runs, 1))
        self.origin.append(obs.origin)
        self.device.append(obs.hardware_group)
        self.source.append(obs.source)
        self.kind.append(obs.hardware.kind)


def _same_setup(a: Observation, b: Observation) -> bool:
    return (
        a.roofline is b.roofline
        and a.runtime == b.runtime
        and a.hardware is b.hardware
        and a.model is b.model
        and a.quant is b.quant
    )


def _labels(values: Iterable[str]) -> StrArray:
    out: StrArray = np.array(list(values), dtype=object)
    return out


def _weights(origin: StrArray, runs: FloatArray, half: int) -> FloatArray:
    fleet = origin == "fleet"
    weight: FloatArray = np.where(fleet, np.sqrt(runs), 1.0)
    if not fleet.any() or fleet.all():
        return np.asarray(weight / weight.mean(), dtype=np.float64)
    share = runs[fleet].sum() / (runs[fleet].sum() + half)
    total = float(len(weight))
    weight[fleet] *= share * total / weight[fleet].sum()
    weight[~fleet] *= (1.0 - share) * total / weight[~fleet].sum()
    return weight


def data_hash(sets: Mapping[str, TrainingSet]) -> str:
    """SHA-256 over every training set's features, targets, weights and groups (order matters:
    the fit query orders its rows)."""
    digest = hashlib.sha256()
    for target in sorted(sets):
        ts = sets[target]
        digest.update(target.encode())
        digest.update(pd.util.hash_pandas_object(ts.frame, index=False).to_numpy().tobytes())
        for values in (ts.y, ts.weight):
            digest.update(np.ascontiguousarray(values).tobytes())
        for labels in (ts.hardware_group, ts.source):
            digest.update("\x1f".join(labels.tolist()).encode())
    return digest.hexdigest()


def weighted_median(values: FloatArray, weights: FloatArray) -> float:
    """The value where the cumulative weight reaches half (lower median on ties)."""
    order = np.argsort(values, kind="stable")
    cumulative = np.cumsum(weights[order])
    return float(values[order][np.searchsorted(cumulative, cumulative[-1] / 2.0)])


def _ape(predicted_log: FloatArray, y: FloatArray) -> FloatArray:
    """|predicted − measured| ÷ measured, from log ratios against the same reference."""
    return np.abs(np.exp(predicted_log - y) - 1.0)


@dataclass(frozen=True)
class _Strata:
    """Hardware kind and device of each residual, as integer codes (the coverage search calls
    these functions thousands of times; string comparisons would dominate)."""

    kind: npt.NDArray[np.intp]
    device: npt.NDArray[np.intp]
    names: tuple[str, ...]

    @classmethod
    def of(cls, kinds: StrArray, devices: StrArray) -> _Strata:
        names, kind = np.unique(kinds, return_inverse=True)
        _, device = np.unique(devices, return_inverse=True)
        return cls(kind.astype(np.intp), device.astype(np.intp), tuple(str(n) for n in names.tolist()))

    def __getitem__(self, mask: npt.NDArray[np.bool_]) -> _Strata:
        return _Strata(self.kind[mask], self.device[mask], self.names)


#: Pooled out-of-fold residuals number their folds ``fold + grouping × SCHEME_STRIDE`` (fewer
#: folds than this per grouping), so :func:`_choose_level` can tell the groupings apart.
SCHEME_STRIDE = 10_000
FLOOR_COVERAGE = 0.75


def _offsets(residuals: FloatArray, strata: _Strata, level: float) -> dict[str, tuple[float, float]]:
    """Conformal offsets (log space) at a central ``level``: pooled (``"*"``), and per hardware
    kind with at least :data:`MIN_STRATUM` residuals from :data:`MIN_STRATUM_GROUPS` devices (a
    kind seen on one or two devices says more about those devices than about the kind)."""
    quantiles = [(1.0 - level) / 2.0, 1.0 - (1.0 - level) / 2.0]
    low, high = np.quantile(residuals, quantiles)
    out = {"*": (float(low), float(high))}
    counts = np.bincount(strata.kind, minlength=len(strata.names))
    for code in np.flatnonzero(counts >= MIN_STRATUM).tolist():
        mask = strata.kind == code
        if np.unique(strata.device[mask]).size >= MIN_STRATUM_GROUPS:
            low, high = np.quantile(residuals[mask], quantiles)
            out[strata.names[code]] = (float(low), float(high))
    return out


def _inside(
    residuals: FloatArray, strata: _Strata, offsets: Mapping[str, tuple[float, float]]
) -> npt.NDArray[np.bool_]:
    low = np.full(len(residuals), min(offsets["*"][0], 0.0))
    high = np.full(len(residuals), max(offsets["*"][1], 0.0))
    for code, name in enumerate(strata.names):
        if name in offsets:
            mask = strata.kind == code
            low[mask], high[mask] = min(offsets[name][0], 0.0), max(offsets[name][1], 0.0)
    return (low <= residuals) & (residuals <= high)


def _fold_coverage(
    residuals: FloatArray, strata: _Strata, folds: npt.NDArray[np.intp], level: float
) -> npt.NDArray[np.bool_]:
    """Whether each residual falls in the band the *other* folds' residuals give at ``level``."""
    covered = np.zeros(len(residuals), dtype=bool)
    for fold in np.unique(folds).tolist():
        test = folds == fold
        offsets = _offsets(residuals[~test], strata[~test], level)
        covered[test] = _inside(residuals[test], strata[test], offsets)
    return covered


#: Both ends of the central interval at each level of :data:`LEVEL_GRID`, as :func:`_offsets`
#: computes them (``(levels, 2)``).
_LEVEL_QUANTILES = np.array([[(1.0 - lv) / 2.0, 1.0 - (1.0 - lv) / 2.0] for lv in LEVEL_GRID.tolist()])


class _LevelOffsets:
    """:func:`_offsets` of one residual set at every level of :data:`LEVEL_GRID`: which strata
    qualify is decided once, and each stratum's quantiles at all levels come from one
    ``np.quantile`` call (each quantile is computed on its own, so the values are those of one
    call per level)."""

    def __init__(self, residuals: FloatArray, strata: _Strata):
        self.names = strata.names
        grid = _LEVEL_QUANTILES.ravel()
        self.table: list[tuple[str, FloatArray]] = [("*", np.quantile(residuals, grid).reshape(-1, 2))]
        counts = np.bincount(strata.kind, minlength=len(strata.names))
        for code in np.flatnonzero(counts >= MIN_STRATUM).tolist():
            mask = strata.kind == code
            if np.unique(strata.device[mask]).size >= MIN_STRATUM_GROUPS:
                self.table.append((strata.names[code], np.quantile(residuals[mask], grid).reshape(-1, 2)))

    def at(self, index: int) -> dict[str, tuple[float, float]]:
        return {name: (float(values[index, 0]), float(values[index, 1])) for name, values in self.table}


def _choose_level(residuals: FloatArray, strata: _Strata, folds: npt.NDArray[np.intp]) -> float:
    """The smallest level of :data:`LEVEL_GRID` whose fold-by-fold coverage reaches
    :data:`NOMINAL_COVERAGE`. Errors on unseen devices cluster by device, so the 10th-90th
    percentile of pooled residuals covers fewer than 80 % of a new device's runs; the level is
    widened until it does (binary search: coverage grows with the level). The same search as
    :func:`_fold_coverage` at each level tried, with each fold's offsets at every level
    computed once (:class:`_LevelOffsets`).

    Folds of several groupings pooled (numbered ``fold + grouping × SCHEME_STRIDE``) are
    conformalized per grouping: the level is the smallest at which *each* grouping's fold-by-fold
    coverage reaches :data:`NOMINAL_COVERAGE`, so a grouping whose residuals are wider (held-out
    sources, against held-out devices of sources the fold knows) is not under-covered because the
    other's are narrow."""
    names = np.unique(folds).tolist()
    if len(names) < 2:
        return NOMINAL_COVERAGE
    schemes = [folds // SCHEME_STRIDE == code for code in np.unique(folds // SCHEME_STRIDE).tolist()]
    parts = []
    for fold in names:
        test = folds == fold
        parts.append((test, residuals[test], strata[test], _LevelOffsets(residuals[~test], strata[~test])))
    lo, hi = 0, len(LEVEL_GRID) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        covered = np.zeros(len(residuals), dtype=bool)
        for test, held_out, held_strata, offsets in parts:
            covered[test] = _inside(held_out, held_strata, offsets.at(mid))
        if covered.mean() >= NOMINAL_COVERAGE and all(covered[scheme].mean() >= FLOOR_COVERAGE for scheme in schemes):
            hi = mid
        else:
            lo = mid + 1
    return float(LEVEL_GRID[lo])


def _honest_coverage(residuals: FloatArray, strata: _Strata, folds: npt.NDArray[np.intp]) -> npt.NDArray[np.bool_]:
    """Coverage of the whole construction, one level out: each fold's band uses a level chosen
    and offsets computed on the other folds only."""
    covered = np.zeros(len(residuals), dtype=bool)
    for fold in np.unique(folds).tolist():
        test = folds == fold
        level = _choose_level(residuals[~test], strata[~test], folds[~test])
        offsets = _offsets(residuals[~test], strata[~test], level)
        covered[test] = _inside(residuals[test], strata[test], offsets)
    return covered


@dataclass
class _SchemeRun:
    folds: npt.NDArray[np.intp]
    predictions: dict[str, FloatArray]


def _splitter(scheme: str, groups: StrArray) -> GroupKFold | LeaveOneGroupOut | None:
    n_groups = len(np.unique(groups))
    if n_groups < 2:
        return None
    if scheme == "hardware" or n_groups > 10:
        return GroupKFold(n_splits=min(HARDWARE_FOLDS, n_groups))
    return LeaveOneGroupOut()


def _groups(ts: TrainingSet, scheme: str) -> StrArray:
    if scheme == "hardware":
        return ts.hardware_group
    if scheme == "family":
        return hardware_families(ts)
    return ts.source


def hardware_families(ts: TrainingSet) -> StrArray:
    """Each row's hardware family, ``kind/vendor`` (``apple_soc/apple``, ``gpu/amd``, ...): what
    leave-one-family-out CV holds out, so a whole kind of device is unseen in its fold."""
    if ts.families is None:
        kinds = ts.features["hardware_kind"].to_numpy(dtype=object)[ts.index].tolist()
        vendors = ts.features["vendor"].to_numpy(dtype=object)[ts.index].tolist()
        ts.families = _labels(hardware_family(k, v) for k, v in zip(kinds, vendors, strict=True))
    return ts.families


def _n_folds(ts: TrainingSet, scheme: str) -> int:
    splitter = _splitter(scheme, _groups(ts, scheme))
    if splitter is None:
        return 0
    return int(splitter.get_n_splits(groups=_groups(ts, scheme)))


@dataclass
class _SharedFolds:
    """What a fold computes from its training rows and weights alone, kept for the next target
    whose CV sample is the same rows with the same weights (the tail heads of a fleet: one cell
    gives TTFT p50, TTFT p99 and ITL p99, so their samples and folds coincide): the ridge's
    encoding and leave-one-out decomposition (:class:`advisor.ml.pipeline.RidgeDesign`) and the
    trees' bins (:class:`advisor.ml.pipeline.FoldBins`). Only one sample's are kept at a time."""

    sample: bytes = b""
    designs: dict[bytes, RidgeDesign] = field(default_factory=dict)
    bins: dict[tuple[bytes, tuple[str, ...]], FoldBins] = field(default_factory=dict)
    #: Whether a later target has the same sample (else nothing is kept: a fold's ridge
    #: decomposition is a few MB).
    keep: bool = False

    def use(self, ts: TrainingSet, *, keep: bool) -> None:
        """Reuse what was computed for ``ts``'s rows and weights, drop anything else; ``keep``:
        a later target has the same sample, so keep what this one computes."""
        digest = _sample_digest(ts)
        if digest != self.sample:
            self.sample = digest
            self.designs.clear()
            self.bins.clear()
        self.keep = keep

    def release(self) -> None:
        """Drop what is kept unless a later target reuses it."""
        if not self.keep:
            self.sample = b""
            self.designs.clear()
            self.bins.clear()


def _sample_digest(ts: TrainingSet) -> bytes:
    """Which rows of the shared feature frame a training set holds, and their weights."""
    return _digest(ts.index, ts.weight)


def _digest(*arrays: npt.NDArray[Any]) -> bytes:
    hasher = hashlib.blake2b(digest_size=16)
    for values in arrays:
        hasher.update(np.ascontiguousarray(values).tobytes())
    return hasher.digest()


@dataclass(frozen=True)
class _Sample:
    """What every fold of every CV grouping of one target's sample reads, computed once: the
    feature frame, the same rows encoded (:func:`_encode`, for the ridge) and as the trees see
    them (after :func:`tree_frame`), both None when they cannot be encoded once, and each row's
    hardware family."""

    frame: pd.DataFrame
    matrix: FloatArray | None
    trees: FloatArray | None
    families: StrArray
    # The models fitted per fold, keyed by the fold's training rows: groupings whose folds
    # coincide (the same rows held out, e.g. one source is one hardware family) fit them once.
    fits: dict[bytes, tuple[Any, Any, Any, float]] = field(default_factory=dict, compare=False, repr=False)
    shared: _SharedFolds = field(default_factory=_SharedFolds, compare=False, repr=False)

    @classmethod
    def of(cls, ts: TrainingSet, shared: _SharedFolds | None = None) -> _Sample:
        frame = ts.frame
        matrix = _encode(frame)
        neutral = tree_frame(ts.target, frame)
        trees = matrix if neutral is frame else _encode(neutral)
        if shared is None:
            shared = _SharedFolds()
            shared.use(ts, keep=False)
        return cls(frame, matrix, trees, hardware_families(ts), shared=shared)


def _encode(frame: pd.DataFrame) -> FloatArray | None:
    """``frame`` as the matrix :func:`advisor.ml.pipeline.gradient_boosting`'s ColumnTransformer
    hands its trees: the categoricals as ordinal codes (NaN when missing), then the numerics.
    Encoded once for a whole CV sample instead of once per fold: a fold's encoder numbers only
    the categories its training rows have, but both number them in sorted order, and the
    boosting bins a category by its rank among the training codes, so the trees are the same; a
    category the training rows lack is unknown to the trees either way and goes where missing
    values go. None when a categorical has more labels than the boosting has bins (then every
    fold encodes its own rows, as the Pipeline does)."""
    out = np.empty((len(frame), len(FEATURES)))
    for j, name in enumerate(CATEGORICAL):
        labels = frame[name].to_numpy(dtype=object)
        present = np.array([isinstance(v, str) for v in labels.tolist()], dtype=bool)
        names, codes = np.unique(labels[present].astype(str), return_inverse=True)
        if len(names) > int(GBM_PARAMS["max_bins"]):  # type: ignore[call-overload]
            return None
        out[:, j] = np.nan
        out[present, j] = codes
    for j, name in enumerate(NUMERIC, start=len(CATEGORICAL)):
        out[:, j] = frame[name].to_numpy(dtype=np.float64)
    return out


def _fold(
    ts: TrainingSet, sample: _Sample, train: npt.NDArray[np.intp], test: npt.NDArray[np.intp]
) -> dict[str, FloatArray]:
    """Every method's predictions for one held-out fold."""
    frame = sample.frame
    x_test = frame.iloc[test]
    families = sample.families
    unseen = ~np.isin(families[test], np.unique(families[train]))
    # Rows of a hardware family the training rows lack are answered by the fallback, never by the
    # trees (:func:`_fallback_mode` chooses the constant or the base): a fold holding out only
    # such rows (every fold of leave-one-family-out) does not fit trees. Their raw prediction is
    # the base alone; nothing reads the raw prediction of an unseen row.
    need_trees = not bool(unseen.all())
    key = _digest(train)
    fitted = sample.fits.get(key)
    if fitted is None or (need_trees and fitted[1] is None):
        fitted = _fit_fold(ts, sample, train, key, trees=need_trees)
        sample.fits[key] = fitted
    base, trees, ridge, constant = fitted
    base_test = base.predict_frame(x_test)
    if not need_trees:
        trees_test = np.zeros(len(test))
    elif sample.trees is None or len(train) > RESAMPLE_ROWS:
        trees_test = np.asarray(trees.predict(tree_frame(ts.target, x_test)), dtype=np.float64)
    else:
        trees_test = np.asarray(trees.predict(sample.trees[test]), dtype=np.float64)
    if sample.matrix is None:
        linear_test = np.asarray(ridge.predict(x_test), dtype=np.float64)
    else:
        linear_test = np.asarray(ridge.predict(sample.matrix[test]), dtype=np.float64)
    model = base_test + trees_test
    # What the deployed head does (:class:`advisor.ml.model.Fallback`): a kind of device absent
    # from training is answered by the roofline × the constant.
    raw = model.copy()
    model[unseen] = constant
    out = {
        "model": model,
        _RAW: raw,
        _UNSEEN: unseen.astype(np.float64),
        _BASE: base_test,
        "linear": linear_test,
        "roofline": np.zeros(len(test)),
        "constant": np.full(len(test), constant),
    }
    if unseen.any():
        # The band the deployed fallback would give those rows, from this fold's training rows.
        y_train = ts.y[train]
        answers = {"base": base.predict_frame(frame.iloc[train]), "constant": np.full(len(train), constant)}
        for mode, (low_name, high_name) in _FALLBACK_BAND.items():
            low, high = _fallback_offsets(y_train - answers[mode])
            out[low_name], out[high_name] = np.full(len(test), low), np.full(len(test), high)
    return out


def _fit_fold(
    ts: TrainingSet, sample: _Sample, train: npt.NDArray[np.intp], key: bytes, *, trees: bool = True
) -> tuple[Any, Any, Any, float]:
    """What one fold fits on its training rows (``key``: their digest): the base, the trees (None
    unless ``trees``), the ridge and the constant. The ridge's decomposition and the trees' bins
    come from ``sample.shared`` when another target already computed them for these rows."""
    frame = sample.frame
    x_train, y_train, w_train = frame.iloc[train], ts.y[train], ts.weight[train]
    fitted_trees: Any = None
    if not trees:
        base = fit_base(ts.target, x_train, y_train, w_train)
    elif sample.trees is None or len(train) > RESAMPLE_ROWS:
        base, fitted_trees = _fit_hybrid(ts.target, x_train, y_train, w_train)
    else:
        # What _fit_hybrid fits, on the sample's tree matrix (the same trees, without the
        # ColumnTransformer's per-fold encoding and with the faster weighted binning).
        base = fit_base(ts.target, x_train, y_train, w_train)
        residual = y_train - base.predict_frame(x_train)
        shared, neutral = sample.shared, TREE_NEUTRAL.get(ts.target, ())
        bins = shared.bins.get((key, neutral)) or FoldBins()
        if shared.keep:
            shared.bins[(key, neutral)] = bins
        estimator = fold_boosting(target=ts.target).reusing(bins)
        fitted_trees = estimator.fit(sample.trees[train], residual, sample_weight=w_train)
    ridge: Any
    if sample.matrix is None:
        ridge = linear().fit(x_train, y_train, model__sample_weight=w_train)
    else:
        design = sample.shared.designs.get(key)
        if design is None:
            design = RidgeDesign(sample.matrix[train], w_train)
            if sample.shared.keep:
                sample.shared.designs[key] = design
        if design.usable:
            ridge = design.fit(y_train)
        else:
            ridge = linear(encoded=True).fit(sample.matrix[train], y_train, model__sample_weight=w_train)
    return base, fitted_trees, ridge, weighted_median(y_train, w_train)


def _fit_hybrid(
    target: str, x: pd.DataFrame, y: FloatArray, weight: FloatArray, *, random_state: int = 0
) -> tuple[PhysicalBase, Any]:
    """The model: the physics-shaped base, then gradient boosting on what it leaves.

    Past :data:`RESAMPLE_ROWS` rows the trees learn from a weighted draw with replacement, without
    weights (the frequency meaning of a weight). Given weights, scikit-learn's histogram binning
    computes every bin edge of every feature as its own weighted percentile, which costs more than
    the boosting itself on 100,000 rows; it does the same draw itself past 200,000 rows. Below
    :data:`RESAMPLE_ROWS` the weighted edges are computed in one pass
    (:func:`advisor.ml.pipeline.fit_weighted`: the same edges and trees, a plain estimator stored).
    """
    base = fit_base(target, x, y, weight)
    residual = y - base.predict_frame(x)
    x = tree_frame(target, x)
    if len(x) > RESAMPLE_ROWS:
        rng = np.random.default_rng(random_state)
        drawn = np.sort(rng.choice(len(x), size=RESAMPLE_ROWS, replace=True, p=weight / weight.sum()))
        gbm = gradient_boosting(random_state=random_state, target=target).fit(x.iloc[drawn], residual[drawn])
    else:
        gbm = fit_weighted(gradient_boosting(random_state=random_state, target=target), x, residual, weight)
    return base, gbm


def _cross_validate(
    ts: TrainingSet, scheme: str, tick: Callable[[str], None], sample: _Sample | None = None
) -> _SchemeRun | None:
    groups = _groups(ts, scheme)
    splitter = _splitter(scheme, groups)
    if splitter is None:
        return None
    n = len(ts)
    folds = np.full(n, -1, dtype=np.intp)
    predictions = {method: np.zeros(n) for method in (*_METHODS, *_APART)}
    # Folds run one after the other: fitting them in threads was slower (the boosting loop holds
    # the GIL between its compiled steps), and worker processes would multiply the memory.
    sample = sample or _Sample.of(ts)
    for fold, (train, test) in enumerate(splitter.split(sample.frame, ts.y, groups)):
        folds[test] = fold
        for method, values in _fold(ts, sample, train, test).items():
            predictions[method][test] = values
        tick(f"{ts.target}: CV by {scheme}, fold {fold + 1}")
    return _SchemeRun(folds, predictions)


def _scheme_metrics(
    ts: TrainingSet, scheme: str, run: _SchemeRun, mode: str | None = "constant", widening: _Widening | None = None
) -> dict[str, Any]:
    apes = {method: _ape(pred, ts.y) for method, pred in run.predictions.items() if method not in _APART}
    base_ape = _ape(run.predictions[_BASE], ts.y)
    residuals = ts.y - run.predictions["model"]
    groups = _groups(ts, scheme)
    strata = _Strata.of(ts.kind, ts.hardware_group)
    # A row of a kind its fold never saw gets the fallback's band, as the deployed head gives it
    # (:class:`advisor.ml.model.Fallback`); the conformal band is built and judged on the others.
    unseen = run.predictions[_UNSEEN] > 0.5
    covered = plain = _fallback_covered(run, residuals, mode, widening)
    if (~unseen).any():
        seen = ~unseen
        covered, plain = covered.copy(), plain.copy()
        covered[seen] = _honest_coverage(residuals[seen], strata[seen], run.folds[seen])
        plain[seen] = _fold_coverage(residuals[seen], strata[seen], run.folds[seen], NOMINAL_COVERAGE)

    def summary(mask: npt.NDArray[np.bool_]) -> dict[str, Any]:
        return {
            "n": int(mask.sum()),
            "groups": len(np.unique(groups[mask])),
            "mdape": {m: _round(float(np.median(a[mask]))) for m, a in apes.items()},
            "mdape_base": _round(float(np.median(base_ape[mask]))),
            "coverage": _round(float(covered[mask].mean())),
            "coverage_untuned": _round(float(plain[mask].mean())),
        }

    everything = np.ones(len(ts), dtype=bool)
    out = summary(everything)
    mdape = out["mdape"]
    out["folds"] = int(run.folds.max()) + 1
    out["beats_baselines"] = bool(mdape["model"] < mdape["roofline"] and mdape["model"] < mdape["constant"])
    out["by_kind"] = {str(kind): summary(ts.kind == kind) for kind in np.unique(ts.kind).tolist()}
    if scheme == "family":
        # Each held-out family is one new kind of device, the unit the fallback's shift is
        # conformalized over (every family weighing the same, :meth:`_Widening.choose`); the
        # row-pooled coverage above is mostly the largest family's (NVIDIA: 258 of 436 decode
        # rows on the published runs). Both are reported (docs/model.md, "Intervals").
        names = np.unique(groups).tolist()
        out["coverage_family_mean"] = _round(float(np.mean([covered[groups == name].mean() for name in names])))
    if scheme in ("source", "family"):
        # Every publication, but a fleet has thousands of deployments: the largest few are enough
        # to read, and the metrics travel in every artifact and API listing.
        labels = ts.source if scheme == "source" else groups
        sources, counts = np.unique(labels, return_counts=True)
        largest = sources[np.argsort(-counts, kind="stable")[:BY_SOURCE_LIMIT]]
        out[f"by_{scheme}"] = {str(src): summary(labels == src) for src in largest.tolist()}
    return out


def losing_groupings(cv_metrics: Mapping[str, Any]) -> list[str]:
    """Why a version should not be activated: every (target, CV grouping) where the model's
    MdAPE is above the better baseline's (pure roofline, roofline × best constant), as
    ``"prefill_tok_s by source: model 52.0% vs roofline × constant 40.0%"``. Empty: it beats both
    everywhere it was cross-validated."""
    out: list[str] = []
    for target, values in sorted((cv_metrics.get("targets") or {}).items()):
        for scheme, metrics in sorted((values.get("schemes") or {}).items()):
            mdape = metrics.get("mdape") or {}
            model, roofline, constant = mdape.get("model"), mdape.get("roofline"), mdape.get("constant")
            if not isinstance(model, float) or not isinstance(roofline, float) or not isinstance(constant, float):
                continue
            best, name = (roofline, "roofline") if roofline <= constant else (constant, "roofline × constant")
            # A tie is not a loss: on a grouping whose held-out rows are all of unseen families
            # the model *is* roofline × constant (its fallback), equal to that baseline exactly.
            if model > best:
                out.append(f"{target} by {scheme}: model {model:.1%} vs {name} {best:.1%}")
    return out


def _widest(offsets: Sequence[Mapping[str, tuple[float, float]]]) -> dict[str, tuple[float, float]]:
    """Per stratum, the lowest low and highest high of several offset sets. A stratum only some
    sets have is widened by the others' pooled (``"*"``) offsets, so no band is narrower than the
    pooled band of any grouping."""
    keys = {key for item in offsets for key in item}
    out: dict[str, tuple[float, float]] = {}
    for key in keys:
        pairs = [item.get(key) or item["*"] for item in offsets]
        out[key] = (min(lo for lo, _ in pairs), max(hi for _, hi in pairs))
    return out


def _fallback_mode(ts: TrainingSet, runs: Iterable[_SchemeRun]) -> str | None:
    """How a head answers a hardware kind it never saw: ``"constant"`` (roofline × constant) or
    ``"base"`` (the physics-shaped base without the trees), whichever scored the lower MdAPE on
    the cross-validated rows whose kind the fold never saw (``"constant"`` when no row was
    unseen). Never the trees: they answer an unseen kind from the nearest leaf of another, which
    can be far off however they scored on the few kinds the CV could leave out (issue #17: an
    APU answered like a datacenter GPU), and only a fallback carries the wider band and says so.
    Decided on the same CV it is reported by, so the scores are slightly optimistic
    (docs/model.md)."""
    pools: dict[str | None, list[FloatArray]] = {"constant": [], "base": []}
    for run in runs:
        unseen = run.predictions[_UNSEEN] > 0.5
        if unseen.any():
            for mode, method in (("constant", "constant"), ("base", _BASE)):
                pools[mode].append(_ape(run.predictions[method][unseen], ts.y[unseen]))
    if not pools["constant"]:
        return "constant"
    scores = {mode: float(np.median(np.concatenate(values))) for mode, values in pools.items()}
    return min(scores, key=lambda mode: (scores[mode], mode is None))


def _shrink_trees(ts: TrainingSet, runs: Mapping[str, _SchemeRun], mode: str | None) -> dict[str, Any]:
    """The head's λ (:mod:`advisor.ml.shrink`: ``base + λ · trees``), chosen on the out-of-fold
    predictions of the calibration groupings, and each grouping's raw predictions replaced by
    ``base + λ_fold · trees`` with λ_fold chosen without that fold's rows (so every score and the
    band below are the shrunk model's, its λ chosen on other folds)."""

    def selection(run: _SchemeRun) -> Selection:
        return Selection(run.predictions[_BASE], run.predictions[_RAW], run.predictions[_UNSEEN] < 0.5)

    chosen = [s for s in runs if s in CALIBRATION_SCHEMES] or list(runs)
    pool = [selection(runs[s]) for s in chosen]
    losses = Losses(ts.y, pool)
    out: dict[str, Any] = {"lambda": losses.choose(), "chosen_on": chosen, "schemes": {}}
    answer = {"constant": "constant", "base": _BASE}.get(mode or "", _RAW)
    for scheme, run in runs.items():
        item = selection(run)
        lambdas = losses.nested(run.folds)
        unshrunk = np.where(item.seen, item.raw, run.predictions[answer])
        run.predictions[_RAW] = apply_nested(item, run.folds, lambdas)
        out["schemes"][scheme] = {
            "fold_lambdas": [lambdas[f] for f in sorted(lambdas)],
            "mdape_unshrunk": _round(float(np.median(_ape(unshrunk, ts.y)))),
        }
    return out


def _answer_unseen(run: _SchemeRun, mode: str | None) -> None:
    """Put the chosen unseen-kind answer into the run's ``model`` predictions."""
    unseen = run.predictions[_UNSEEN] > 0.5
    source = {"constant": "constant", "base": _BASE, None: _RAW}[mode]
    run.predictions["model"] = np.where(unseen, run.predictions[source], run.predictions[_RAW])


def _fallback(ts: TrainingSet, mode: str, base: FloatArray, shift: float = FALLBACK_SHIFT) -> Fallback:
    """The head's answer for unseen kinds of device (``mode`` from :func:`_fallback_mode`):
    roofline × the weighted median ratio, or the base alone, with the 10th-90th percentile of
    its residuals moved out by ``shift`` on each side (:class:`_Widening`;
    :data:`advisor.ml.model.FALLBACK_SHIFT` without a family grouping)."""
    constant = weighted_median(ts.y, ts.weight)
    answer = np.full(len(ts), constant) if mode == "constant" else base
    interval = _fallback_offsets(ts.y - answer, shift)
    families = frozenset(str(f) for f in np.unique(hardware_families(ts)).tolist())
    return Fallback(constant, interval, families, mode, runtime_cells(ts))


def runtime_cells(ts: TrainingSet) -> dict[str, int]:
    """How many sources measured each :func:`advisor.ml.model.runtime_cell` of the rows."""
    families = ts.features["runtime_family"].to_numpy(dtype=object)[ts.index].tolist()
    kinds = ts.features["hardware_kind"].to_numpy(dtype=object)[ts.index].tolist()
    seen: dict[str, set[str]] = {}
    for kind, family, source in zip(kinds, families, ts.source.tolist(), strict=True):
        cell = runtime_cell(kind, family)
        if cell is not None:
            seen.setdefault(cell, set()).add(str(source))
    return {cell: len(sources) for cell, sources in sorted(seen.items())}


def _fallback_offsets(residuals: FloatArray, shift: float = 0.0) -> tuple[float, float]:
    """A fallback's band (log offsets around its answer): the 10th-90th percentile of its
    training residuals (never excluding the answer itself), each end moved out by ``shift``."""
    low, high = np.quantile(residuals, [0.1, 0.9])
    return min(float(low), 0.0) - shift, max(float(high), 0.0) + shift


def _widened_inside(
    residuals: FloatArray, low: FloatArray, high: FloatArray, shift: FloatArray | float
) -> npt.NDArray[np.bool_]:
    """Whether each residual falls in its fallback band (``low``/``high``: the unshifted
    offsets) moved out by ``shift`` on each side."""
    lo, hi = np.minimum(low, 0.0) - shift, np.maximum(high, 0.0) + shift
    return np.asarray((lo <= residuals) & (residuals <= hi), dtype=bool)


@dataclass(frozen=True)
class _Widening:
    """How far the fallback's band reaches beyond its training residuals, conformalized on the
    rows a fold's training lacked the kind of (issue #17: "conformalize per grouping"). The
    leave-one-family-out folds hold out whole kinds of device, which is what the fallback
    answers: each of their rows has the band its fold's fallback gives it (the 10th-90th
    percentile of the fold's training residuals around the fallback's answer) moved out by a
    shift on each side, and the shift is the smallest of :data:`SHIFT_GRID` under which
    :data:`NOMINAL_COVERAGE` of them fall inside. Without those rows (no family grouping),
    :data:`advisor.ml.model.FALLBACK_SHIFT`.

    A shift, not a factor: what an unseen family adds to the known families' spread is its own
    efficiency factor (a different engine build, memory system or kernel quality), an offset in
    log space, not a wider spread of the same errors. Scaling the spread (session 6, ×1.7 on the
    published runs) widened the bands of compact families as much as those of scattered ones:
    held out as a family, NVIDIA's decode was 93 % covered and its prefill 47 % (docs/model.md,
    session 7)."""

    residuals: FloatArray
    low: FloatArray
    high: FloatArray
    #: Each pooled residual's row in the CV sample (to leave a fold's own rows out).
    rows: npt.NDArray[np.intp]
    #: Each pooled residual's family (held-out families weigh the same, :meth:`choose`).
    families: StrArray

    @classmethod
    def of(cls, ts: TrainingSet, runs: Mapping[str, _SchemeRun], mode: str | None) -> _Widening | None:
        names = _FALLBACK_BAND.get(mode or "")
        run = runs.get("family")
        if names is None or run is None:
            return None
        unseen = run.predictions[_UNSEEN] > 0.5
        if not unseen.any():
            return None
        residuals = ts.y - run.predictions["model"]
        low, high = run.predictions[names[0]], run.predictions[names[1]]
        families = hardware_families(ts)
        return cls(residuals[unseen], low[unseen], high[unseen], np.flatnonzero(unseen), families[unseen])

    def choose(self, exclude: npt.NDArray[np.bool_] | None = None) -> float:
        """The shift, chosen without the sample rows ``exclude`` marks."""
        keep = np.ones(len(self.rows), dtype=bool) if exclude is None else ~exclude[self.rows]
        if not keep.any():
            return FALLBACK_SHIFT
        # Every held-out family weighs the same: the CDF pooling of Dunn, Wasserman & Ramdas,
        # "Distribution-Free Prediction Sets for Two-Layer Hierarchical Models" (JASA 2023,
        # arXiv:1809.07441), for rows that share their group's effect — the published families
        # hold 258, 136, 21 and 21 decode rows, and row-pooled coverage let NVIDIA GPUs alone
        # set the band that CPUs, a kind unlike them, then fell outside of.
        _, codes, counts = np.unique(self.families[keep], return_inverse=True, return_counts=True)
        weight = 1.0 / counts[codes]
        for shift in SHIFT_GRID.tolist():
            inside = _widened_inside(self.residuals[keep], self.low[keep], self.high[keep], shift)
            if float(np.sum(weight[inside]) / np.sum(weight)) >= NOMINAL_COVERAGE:
                return float(shift)
        return float(SHIFT_GRID[-1])


def _fallback_covered(
    run: _SchemeRun, residuals: FloatArray, mode: str | None, widening: _Widening | None
) -> npt.NDArray[np.bool_]:
    """Whether each unseen-kind row's residual falls in the band its fold's fallback gives it,
    the shift chosen without that fold's rows (all False where no fallback band was computed)."""
    names = _FALLBACK_BAND.get(mode or "")
    covered = np.zeros(len(residuals), dtype=bool)
    if names is None:
        return covered
    unseen = run.predictions[_UNSEEN] > 0.5
    for fold in np.unique(run.folds[unseen]).tolist():
        test = run.folds == fold
        shift = FALLBACK_SHIFT if widening is None else widening.choose(test)
        rows = test & unseen
        low, high = run.predictions[names[0]][rows], run.predictions[names[1]][rows]
        covered[rows] = _widened_inside(residuals[rows], low, high, shift)
    return covered


def _threads_for(rows: int) -> int:
    return (os.cpu_count() or 1) if rows >= PARALLEL_FIT_ROWS else 1


def _round(value: float) -> float:
    return round(value, 4) if math.isfinite(value) else value


@dataclass
class FitResult:
    """A trained (not yet versioned) model with what it was trained on and how it scored."""

    model: PerformanceModel
    cv_metrics: dict[str, Any]
    data_hash: str
    n_train: int
    counts: dict[str, dict[str, int]]


def _sample(ts: TrainingSet, max_rows: int, seed: int) -> TrainingSet:
    if len(ts) <= max_rows:
        return ts
    rng = np.random.default_rng(seed)
    return ts.subset(np.sort(rng.choice(len(ts), size=max_rows, replace=False)))


def fit(
    observations: Iterable[Observation] | Mapping[str, TrainingSet],
    *,
    cv: bool = True,
    cv_max_rows: int = CV_MAX_ROWS,
    progress: Progress | None = None,
    seed: int = 0,
    schemes: Sequence[str] = ("hardware", "source", "family"),
) -> FitResult:
    """Train every head that has enough data, cross-validate it, calibrate its intervals.

    Raises ``ValueError`` when decode or prefill has fewer than :data:`MIN_ROWS` observations
    (the published set alone has over 400 of each).
    """
    sets = dict(observations) if isinstance(observations, Mapping) else build_training_sets(observations)
    # One thread, OpenMP and BLAS alike: for the sizes here a thread pool's fork-join per tree or
    # per small matrix product costs more than it saves, badly so on a busy host where the
    # threads spin waiting for each other (measured: a fit on 12,000 cells took longer with two
    # OpenMP threads than with one; the ridge baseline's leave-one-out, 4,000 rows × 42 columns,
    # took 2.4x the CPU time with two OpenBLAS threads: docs/benchmarks.md).
    with threadpool_limits(limits=1):
        return _fit(sets, cv=cv, cv_max_rows=cv_max_rows, progress=progress, seed=seed, schemes=schemes)


def _fit(
    sets: dict[str, TrainingSet],
    *,
    cv: bool,
    cv_max_rows: int,
    progress: Progress | None,
    seed: int,
    schemes: Sequence[str],
) -> FitResult:
    usable = {t: ts for t, ts in sets.items() if len(ts) >= MIN_ROWS}
    for required in ("decode_tok_s", "prefill_tok_s"):
        if required not in usable:
            raise ValueError(f"not enough {required} observations to fit ({len(sets.get(required, ()))})")
    cv_sets = {t: _sample(ts, cv_max_rows, seed) for t, ts in usable.items()}

    def schemes_of(target: str) -> list[str]:
        return [s for s in schemes if s != "family" or target in FAMILY_TARGETS]

    total = len(usable) + (sum(_n_folds(cv_sets[t], s) for t in usable for s in schemes_of(t)) if cv else 0)
    done = 0

    def tick(description: str) -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(description, done, total)

    heads: dict[str, Head] = {}
    # Targets whose CV samples coincide share their folds' ridge decompositions and bins.
    folds_shared = _SharedFolds()
    sample_digests = [_sample_digest(cv_sets[t]) for t in usable]
    metrics: dict[str, Any] = {"nominal_coverage": NOMINAL_COVERAGE, "targets": {}}
    beats: dict[str, dict[str, bool]] = {}
    counts: dict[str, dict[str, int]] = {}
    for target, ts in usable.items():
        target_metrics: dict[str, Any] = {
            "n": len(ts),
            "n_public": int((ts.origin == "public").sum()),
            "n_fleet": int((ts.origin == "fleet").sum()),
            "hardware_groups": len(np.unique(ts.hardware_group)),
            "sources": len(np.unique(ts.source)),
            "schemes": {},
        }
        counts[target] = {k: target_metrics[k] for k in ("n", "n_public", "n_fleet")}
        sample = cv_sets[target]
        if len(sample) < len(ts):
            target_metrics["cv_sample"] = len(sample)
        calibrations: list[tuple[str, FloatArray, npt.NDArray[np.intp]]] = []
        #: Per calibration, its rows of a kind the fold never saw (the fallback answers them).
        unseen_rows: list[npt.NDArray[np.bool_]] = []
        fallback_mode: str | None = "constant"
        fallback_shift = FALLBACK_SHIFT
        if cv:
            digest = sample_digests.pop(0)
            folds_shared.use(sample, keep=digest in sample_digests)
            shared = _Sample.of(sample, folds_shared)
            runs = {
                scheme: run
                for scheme in schemes_of(target)
                if (run := _cross_validate(sample, scheme, tick, shared)) is not None
            }
            del shared
            folds_shared.release()
            fallback_mode = _fallback_mode(sample, runs.values())
            shrink = _shrink_trees(sample, runs, fallback_mode)
            target_metrics["shrink"] = shrink
            target_metrics["unseen_kind_answer"] = fallback_mode or "model"
            for run in runs.values():
                _answer_unseen(run, fallback_mode)
            widening = _Widening.of(sample, runs, fallback_mode)
            fallback_shift = FALLBACK_SHIFT if widening is None else widening.choose()
            target_metrics["fallback_shift"] = fallback_shift
            for scheme, run in runs.items():
                scheme_metrics = _scheme_metrics(sample, scheme, run, fallback_mode, widening)
                target_metrics["schemes"][scheme] = scheme_metrics
                beats.setdefault(scheme, {})[target] = scheme_metrics["beats_baselines"]
                calibrations.append((scheme, sample.y - run.predictions["model"], run.folds))
                unseen_rows.append(run.predictions[_UNSEEN] > 0.5)
        # The band is conformalized on the device and source groupings (the questions a
        # prediction answers: a device or a benchmark it never saw); leave-one-family-out is a
        # stress test reported beside them (its coverage_deployed says how the band fares there).
        chosen = [i for i, c in enumerate(calibrations) if c[0] in CALIBRATION_SCHEMES]
        chosen = chosen or list(range(len(calibrations)))
        # The conformal band answers the kinds the head knows: rows of a kind their fold never
        # saw are answered, and covered, by the fallback (its own wider band), so their residuals
        # do not widen everyone's band.
        pooled = [
            (calibrations[i][0], calibrations[i][1][~unseen_rows[i]], calibrations[i][2][~unseen_rows[i]])
            for i in chosen
            if (~unseen_rows[i]).any()
        ]
        # Large final fits do use every core: at 100,000 rows the histograms outweigh the fork-join.
        with threadpool_limits(limits=_threads_for(len(ts)), user_api="openmp"):
            frame = ts.frame
            base, pipeline = _fit_hybrid(target, frame, ts.y, ts.weight, random_state=seed)
        tick(f"{target}: final fit on {len(ts)} observations")
        one = _Strata.of(sample.kind, sample.hardware_group)
        if not pooled:
            # No grouped CV possible (or asked for): in-sample residuals understate the error,
            # so take the 5th-95th percentile instead of the 10th-90th and say so.
            residuals = ts.y - base.predict_frame(frame) - pipeline.predict(tree_frame(target, frame))
            low, high = np.quantile(residuals, [0.05, 0.95])
            interval: dict[str, tuple[float, float]] = {"*": (float(low), float(high))}
            target_metrics["interval"] = {"calibration": "in-sample (5th-95th percentile)"}
        else:
            # Conformal over the groupings together: the out-of-fold residuals of every CV
            # grouping (device, source, family) pooled, each fold of each grouping its own fold,
            # the level chosen so the pooled fold-by-fold coverage reaches 80 %.
            seen = [~unseen_rows[i] for i in chosen if (~unseen_rows[i]).any()]
            residuals = np.concatenate([r for _, r, _ in pooled])
            folds = np.concatenate([f + i * SCHEME_STRIDE for i, (_, _, f) in enumerate(pooled)])
            strata = _Strata(
                np.concatenate([one.kind[m] for m in seen]), np.concatenate([one.device[m] for m in seen]), one.names
            )
            level = _choose_level(residuals, strata, folds)
            interval = _offsets(residuals, strata, level)
            target_metrics["interval"] = {
                "calibration": "out-of-fold residuals pooled over groupings "
                + ", ".join(scheme for scheme, _, _ in pooled)
                + " (rows of a kind their fold never saw: the fallback's band)",
                "level": level,
            }
        fallback = None
        if fallback_mode:
            fallback = _fallback(ts, fallback_mode, base.predict_frame(frame), fallback_shift)
        for i, (scheme, scheme_residuals, _) in enumerate(calibrations):
            # The shipped bands on the grouping's out-of-fold residuals: the conformal band where
            # the fold knew the kind, the fallback's where it did not.
            inside = _inside(scheme_residuals, one, interval)
            if fallback is not None:
                low, high = min(fallback.interval[0], 0.0), max(fallback.interval[1], 0.0)
                unseen = unseen_rows[i]
                inside[unseen] = (low <= scheme_residuals[unseen]) & (scheme_residuals[unseen] <= high)
            scheme_metrics = target_metrics["schemes"][scheme]
            scheme_metrics["coverage_deployed"] = _round(float(inside.mean()))
            # And per held-out source or family.
            labels = sample.source if scheme == "source" else _groups(sample, scheme)
            for name, item in scheme_metrics.get(f"by_{scheme}", {}).items():
                item["coverage_deployed"] = _round(float(inside[labels == name].mean()))
        target_metrics["interval"]["offsets"] = {k: [_round(lo), _round(hi)] for k, (lo, hi) in interval.items()}
        target_metrics["base"] = base.to_dict()
        lam = float(target_metrics.get("shrink", {}).get("lambda", 1.0))
        heads[target] = Head(target, pipeline, interval, len(ts), base=base, fallback=fallback, shrink=lam)
        metrics["targets"][target] = target_metrics
    metrics["beats_baselines"] = beats
    model = PerformanceModel(heads, version="unversioned", meta={}).compile()
    return FitResult(
        model=model,
        cv_metrics=metrics,
        data_hash=data_hash(usable),
        n_train=sum(len(ts) for ts in usable.values()),
        counts=counts,
    )
