"""The estimators: scikit-learn Pipelines over :data:`advisor.ml.features.FEATURES`.

* :func:`gradient_boosting` is the fitted model: a ColumnTransformer (ordinal codes for the
  categoricals, numerics passed through) and a ``HistGradientBoostingRegressor`` that splits on
  categories natively and routes missing values, trained on ``log(measured / reference)``
  (squared error in log space: a broken row that is 10x off costs like one 2.3 off, not 9).
* :func:`linear` is the interpretable baseline: one-hot categoricals, median-imputed and scaled
  numerics with missing-value indicators, and a ridge regression whose penalty is chosen by
  efficient leave-one-out CV.

Both take a DataFrame with the feature columns and predict ``log(measured / reference)``.

Cross-validation fits many of both on one encoded matrix; for that it uses faster equivalents
that compute the same numbers: :func:`fold_boosting` (the boosting without the ColumnTransformer,
its categorical encoding and weighted binning in one pass, bins reusable across targets) and
:class:`RidgeDesign` (the ridge's encoding and leave-one-out decomposition once per fold for every
target on those rows).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.ensemble._hist_gradient_boosting.common import ALMOST_INF
from sklearn.impute import SimpleImputer
from sklearn.linear_model import RidgeCV
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder, StandardScaler

from advisor.ml.features import CATEGORICAL, NUMERIC

__all__ = [
    "GBM_PARAMS",
    "MONOTONIC",
    "RIDGE_ALPHAS",
    "FoldBins",
    "FoldRidge",
    "RidgeDesign",
    "RidgeEncoding",
    "WeightedBinningBoosting",
    "fit_weighted",
    "fold_boosting",
    "gradient_boosting",
    "linear",
    "weighted_edges",
]

#: Chosen on the shipped public runs with grouped CV (docs/model.md): shallow trees with a leaf
#: minimum and an L2 penalty generalise to unseen devices far better than deep ones (the
#: published set has ~70 devices). 60 rounds at 0.15 scored like 100 at 0.1 and 200 at 0.05
#: (within 0.01 MdAPE) at a third of the fit and prediction cost of the latter.
#: Squared error on the log ratio: absolute error scored alike on unseen hardware (better on
#: prefill, worse on decode and on unseen sources) but its weighted leaf medians made fits 3x
#: slower.
GBM_PARAMS: dict[str, object] = {
    "loss": "squared_error",
    "learning_rate": 0.15,
    "max_iter": 60,
    "max_depth": 3,
    "min_samples_leaf": 20,
    "l2_regularization": 1.0,
    # Early stopping would hold out a random 10 % (not grouped) and make small fits noisy.
    "early_stopping": False,
    # 127 bins scored as well as 255 on unseen hardware; with sample weights each bin edge is a
    # weighted percentile computed in Python, so half the bins is a quarter less fit time.
    "max_bins": 127,
}


#: Monotonic constraints on a head's trees (scikit-learn's ``monotonic_cst``: +1 non-decreasing,
#: -1 non-increasing in the feature), per target. Decode must never fall when bandwidth rises nor
#: rise when bits per weight do: the base (:mod:`advisor.ml.base`) and the ceiling already move
#: the right way, so the trees' residual is held to the same directions in every feature either
#: change moves (bandwidth raises the ceiling and can make a step compute-bound; more bits raise
#: the weight bytes, lower the ceiling and the KV share). A tree step against these would make a
#: small upgrade predict a slowdown.
MONOTONIC: dict[str, dict[str, int]] = {
    "decode_tok_s": {
        "log_bandwidth_gb_s": 1,
        "log_decode_ceiling": 1,
        "decode_compute_bound": 1,
        "kv_read_share": 1,
        "bits_per_weight": -1,
        "log_weight_gb": -1,
    }
}


def gradient_boosting(*, random_state: int = 0, target: str | None = None) -> Pipeline:
    """The fitted model's estimator (see the module docstring); ``target`` applies its
    :data:`MONOTONIC` constraints."""
    features = ColumnTransformer(
        [
            (
                "categorical",
                OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=np.nan, encoded_missing_value=np.nan),
                list(CATEGORICAL),
            ),
            ("numeric", "passthrough", list(NUMERIC)),
        ],
        remainder="drop",
    )
    constraints = MONOTONIC.get(target or "", {})
    model = HistGradientBoostingRegressor(
        categorical_features=list(range(len(CATEGORICAL))),
        random_state=random_state,
        # Columns after the ColumnTransformer: the categoricals (never constrained), then NUMERIC.
        monotonic_cst=[0] * len(CATEGORICAL) + [constraints.get(name, 0) for name in NUMERIC] if constraints else None,
        **GBM_PARAMS,  # type: ignore[arg-type]
    )
    return Pipeline([("features", features), ("model", model)])


def weighted_edges(
    values: npt.NDArray[np.float64], weights: npt.NDArray[np.float64], max_bins: int
) -> npt.NDArray[np.float64]:
    """The ``max_bins - 1`` bin edges scikit-learn's histogram binning gives a weighted feature
    with more than ``max_bins`` distinct values (``values`` without NaN, ``weights`` all > 0):
    the weighted percentiles at ``100 k / max_bins`` by the averaged inverted CDF, duplicates
    dropped, capped at ``ALMOST_INF``. The same arithmetic as scikit-learn's ``_weighted_percentile``
    (sort, cumulative weight, ``searchsorted`` of each rank × total, the mean with the next value
    where the rank falls exactly on a step), for every rank in one pass instead of one call each.
    """
    # The binning sorts the column, then the percentile argsorts the sorted column again; ties
    # may be permuted by that second sort, which moves the cumulative weights within a tie, so
    # both sorts are repeated exactly (numpy's default, unstable kind).
    order = np.argsort(values)
    ordered, weights = values[order], weights[order]
    index = np.argsort(ordered[:, None], axis=0)[:, 0]
    cdf = np.cumsum(weights[index])
    ranks = np.linspace(0, 100, num=max_bins + 1)[1:-1]
    targets = ranks / 100 * cdf[-1]
    last = len(ordered) - 1
    at = np.clip(np.searchsorted(cdf, targets), 0, last)
    above = (cdf[at] - targets) > np.finfo(np.float64).eps
    low = ordered[index[at]]
    high = ordered[index[np.clip(at + 1, 0, last)]]
    edges: npt.NDArray[np.float64] = np.unique(np.where(above, low, (low + high) / 2))
    np.clip(edges, a_min=None, a_max=ALMOST_INF, out=edges)
    return edges


class WeightedBinningBoosting(HistGradientBoostingRegressor):  # type: ignore[misc]  # sklearn is untyped
    """``HistGradientBoostingRegressor`` whose weighted bin edges take one sort per feature.

    Given sample weights, scikit-learn computes each of the ``max_bins - 1`` edges of a feature
    with more distinct values than bins as a separate weighted percentile, each sorting the column
    again: on a 3,200-row cross-validation fold that was half the boosting's fit time. Here the
    unweighted binning runs first (categories, the missing-value bin, and every feature with few
    distinct values come out as they do with weights), then the edges of the other features are
    replaced by the same weighted percentiles scikit-learn takes, all at once
    (:func:`weighted_edges`). The edges, hence the trees, are identical
    (``tests/unit/ml/test_pipeline.py`` compares them with the plain estimator's).

    Used in the cross-validation folds, on the matrix :func:`gradient_boosting`'s
    ColumnTransformer would produce (:func:`fold_boosting`), and in the final fits inside that
    Pipeline (:func:`fit_weighted`, which hands back the plain estimator); it is never stored.
    Relies on scikit-learn's private ``_bin_data`` and ``_BinMapper`` attributes, like
    :mod:`advisor.ml.forest` on the fitted trees' layout.
    """

    #: The training bins to reuse (:meth:`reusing`), or None to bin the training rows.
    _bins: FoldBins | None = None

    def reusing(self, bins: FoldBins) -> WeightedBinningBoosting:
        """Fit on the training rows ``bins`` holds (the same matrix and weights; only the target
        differs) without binning them again: the bins depend on the rows and weights only, so
        the trees are those a fresh fit would grow. ``bins`` is filled by the first fit that
        uses it."""
        self._bins = bins
        return self

    #: Set by :func:`fold_boosting`: encode the leading categorical columns here instead of in
    #: scikit-learn's internal ColumnTransformer (see :meth:`_preprocess_X`). Never for an
    #: estimator that is stored: it would keep no ColumnTransformer to predict with.
    _fast_encoding: bool = False
    #: Per leading categorical column, its distinct training values, sorted; and the number of
    #: columns fitted on (both set by the fast path only).
    _codes: list[npt.NDArray[np.float64]] | None = None
    _n_columns: int = 0

    def _preprocess_X(self, X: Any, *, reset: bool) -> Any:
        """scikit-learn's input preprocessing without its ColumnTransformer, for a float matrix
        whose categorical features are its first columns.

        Given categorical features, ``HistGradientBoostingRegressor`` (scikit-learn 1.9) builds
        a ColumnTransformer with an ``OrdinalEncoder`` on every fit and runs it on every
        predict: half the fixed cost of a cross-validation fold's fit. What it computes is
        simple here: each categorical value becomes its rank among the column's distinct
        training values (NaN when missing or not seen in training), the numerics pass through,
        and the known categories of column ``j`` are ``0 … n_j - 1``. Anything else (a
        DataFrame, categoricals elsewhere, more categories than bins) takes scikit-learn's path.
        """
        k = self._leading_categoricals(X)
        if not reset:
            if self._codes is None:
                return super()._preprocess_X(X, reset=reset)
            x = np.asarray(X, dtype=np.float64)
            if x.ndim != 2 or x.shape[1] != self._n_columns:
                raise ValueError(f"X has {x.shape[-1]} features, the estimator was fitted on {self._n_columns}")
            return self._ordinal(x)
        self.__dict__.pop("_codes", None)  # the class default (None); a stored estimator has none
        if k is None:
            return super()._preprocess_X(X, reset=reset)
        x = np.asarray(X, dtype=np.float64)
        codes = [np.unique(column[~np.isnan(column)]) for column in x[:, :k].T]
        if any(c.size > self.max_bins for c in codes):
            return super()._preprocess_X(X, reset=reset)  # raises scikit-learn's own error
        mask = np.zeros(x.shape[1], dtype=bool)
        mask[:k] = True
        self.is_categorical_ = mask
        self._is_categorical_remapped = mask.copy()
        self._preprocessor = None
        self.n_features_in_ = self._n_columns = x.shape[1]
        self._codes = codes
        known: list[npt.NDArray[np.float64] | None] = [np.arange(len(c), dtype=np.float64) for c in codes]
        known += [None] * (x.shape[1] - k)
        return self._ordinal(x), known

    def _leading_categoricals(self, X: Any) -> int | None:
        """How many leading columns are the categorical features, when the fast path applies."""
        features = self.categorical_features
        if not self._fast_encoding or not isinstance(X, np.ndarray) or X.ndim != 2 or X.dtype != np.float64:
            return None
        if not isinstance(features, list) or not all(isinstance(f, int) for f in features):
            return None
        k = len(features)
        if features != list(range(k)) or k == 0 or k > X.shape[1]:
            return None
        return k

    def _ordinal(self, x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        assert self._codes is not None
        out = x.copy()
        for j, codes in enumerate(self._codes):
            column = x[:, j]
            at = np.clip(np.searchsorted(codes, column), 0, max(codes.size - 1, 0))
            known = codes.size > 0
            found = (codes[at] == column) if known else np.zeros(len(column), dtype=bool)
            out[:, j] = np.where(found, at, np.nan)
        return out

    def _bin_data(self, X: Any, sample_weight: Any, is_training_data: bool) -> Any:
        bins = self._bins
        if is_training_data and bins is not None:
            if bins.binned is not None and bins.binned.shape == X.shape:
                self._bin_mapper = bins.mapper
                return bins.binned
            binned = self._bin_training(X, sample_weight)
            bins.mapper, bins.binned = self._bin_mapper, binned
            return binned
        if is_training_data:
            return self._bin_training(X, sample_weight)
        return super()._bin_data(X, sample_weight, is_training_data)

    def _bin_training(self, X: Any, sample_weight: Any) -> Any:
        mapper = self._bin_mapper
        if (
            sample_weight is None
            # scikit-learn draws an unweighted subsample itself past this many rows, and drops
            # zero-weight rows before counting distinct values: leave both cases to it.
            or (mapper.subsample is not None and X.shape[0] > mapper.subsample)
            or not np.all(sample_weight > 0)
        ):
            return super()._bin_data(X, sample_weight, True)
        if not _fit_mapper(mapper, np.asarray(X, dtype=np.float64), np.asarray(sample_weight, dtype=np.float64)):
            return super()._bin_data(X, sample_weight, True)
        return mapper.transform(X)


def _fit_mapper(mapper: Any, x: npt.NDArray[np.float64], weight: npt.NDArray[np.float64]) -> bool:
    """Fit scikit-learn's ``_BinMapper`` on weighted rows (every weight > 0) as its ``fit`` with
    those weights does, in one pass per feature: categoricals take their known categories; a
    numeric feature with at most ``max_bins`` distinct values the midpoints between them; one
    with more the weighted percentiles of :func:`weighted_edges`. ``_BinMapper.fit`` dispatches
    the features through joblib and computes each weighted edge as its own percentile; this was
    most of a cross-validation fold's binning. False (mapper untouched) for a feature without a
    value, which scikit-learn's own path handles."""
    n_features = x.shape[1]
    max_bins = mapper.n_bins - 1
    categorical = (
        np.zeros(n_features, dtype=np.uint8)
        if mapper.is_categorical is None
        else np.asarray(mapper.is_categorical, dtype=np.uint8)
    )
    known = mapper.known_categories if mapper.known_categories is not None else [None] * n_features
    thresholds: list[npt.NDArray[np.float64]] = []
    counts: list[int] = []
    for j in range(n_features):
        if categorical[j]:
            categories = known[j]
            if categories is None:
                return False
            thresholds.append(categories)
            counts.append(int(categories.shape[0]))
            continue
        column = x[:, j]
        present = ~np.isnan(column)
        values = column[present]
        distinct = np.unique(values)
        if distinct.size == 0:
            return False
        if distinct.size == 1:
            edges = np.asarray([], dtype=np.float64)
        elif distinct.size <= max_bins:
            edges = (distinct[:-1] + distinct[1:]) / 2.0  # sliding_window_view(d, 2).mean(axis=1)
            np.clip(edges, a_min=None, a_max=ALMOST_INF, out=edges)
        else:
            edges = weighted_edges(values, weight[present], max_bins)
        thresholds.append(edges)
        counts.append(edges.shape[0] + 1)
    mapper.is_categorical_ = categorical
    mapper.missing_values_bin_idx_ = mapper.n_bins - 1
    mapper.bin_thresholds_ = thresholds
    mapper.n_bins_non_missing_ = np.array(counts, dtype=np.uint32)
    return True


@dataclass
class FoldBins:
    """One training matrix's fitted bin mapper and binned rows, shared by the fits of several
    targets on the same rows and weights (:meth:`WeightedBinningBoosting.reusing`). The binned
    matrix is only read by the boosting."""

    mapper: Any = None
    binned: npt.NDArray[np.uint8] | None = None


def fold_boosting(*, random_state: int = 0, target: str | None = None) -> WeightedBinningBoosting:
    """The estimator of :func:`gradient_boosting` (same parameters and constraints) without its
    ColumnTransformer, with the faster weighted binning: for a matrix already encoded like that
    ColumnTransformer's output (cross-validation encodes a sample once, not once per fold)."""
    model = gradient_boosting(random_state=random_state, target=target).named_steps["model"]
    estimator = WeightedBinningBoosting(**model.get_params())
    estimator._fast_encoding = True
    return estimator


#: Attributes :class:`WeightedBinningBoosting` may set that scikit-learn's estimator lacks.
_SUBCLASS_STATE = frozenset({"_bins", "_fast_encoding", "_codes", "_n_columns"})


def fit_weighted(pipeline: Pipeline, x: Any, y: Any, weight: Any) -> Pipeline:
    """Fit a :func:`gradient_boosting` Pipeline with sample weights, the boosting binning as
    :class:`WeightedBinningBoosting` does (identical edges, a fraction of the time). The fitted
    Pipeline holds a plain ``HistGradientBoostingRegressor`` with that fitted state (the subclass
    keeps none of its own), so an artifact stores scikit-learn's type only."""
    model = pipeline.named_steps["model"]
    fast = WeightedBinningBoosting(**model.get_params())
    pipeline.steps[-1] = ("model", fast)
    pipeline.fit(x, y, model__sample_weight=weight)
    plain = HistGradientBoostingRegressor(**fast.get_params())
    # scikit-learn's fitted state only: nothing of the subclass's own goes into an artifact.
    plain.__dict__.update({k: v for k, v in fast.__dict__.items() if k not in _SUBCLASS_STATE})
    pipeline.steps[-1] = ("model", plain)
    return pipeline


#: The ridge baseline's candidate penalties (``RidgeCV`` picks one by efficient leave-one-out).
RIDGE_ALPHAS = np.logspace(-3, 3, 13)


def linear(*, encoded: bool = False) -> Pipeline:
    """The regularised linear baseline (see the module docstring).

    ``encoded``: for the matrix cross-validation encodes once (``advisor.ml.train``'s tree
    matrix before the tree-neutral columns: every categorical as the rank of its label, NaN when
    missing, then the numerics, in :data:`advisor.ml.features.FEATURES` order) instead of a
    DataFrame. The one-hot columns come out the same (labels and their ranks sort alike, and the
    missing value is the last category either way), so the ridge is fitted on the same numbers
    without the DataFrame handling (a third of the baseline's CPU time per fold)."""
    categorical: list[str] | list[int] = list(CATEGORICAL)
    numeric_columns: list[str] | list[int] = list(NUMERIC)
    if encoded:
        categorical = list(range(len(CATEGORICAL)))
        numeric_columns = list(range(len(CATEGORICAL), len(CATEGORICAL) + len(NUMERIC)))
    numeric = Pipeline(
        [
            ("impute", SimpleImputer(strategy="median", add_indicator=True, keep_empty_features=True)),
            ("scale", StandardScaler()),
        ]
    )
    features = ColumnTransformer(
        [
            # Dense: a few dozen indicator columns; RidgeCV's leave-one-out on a sparse matrix
            # took 5x longer than the SVD of the dense one (the same fit).
            ("categorical", OneHotEncoder(handle_unknown="ignore", sparse_output=False), categorical),
            ("numeric", numeric, numeric_columns),
        ],
        remainder="drop",
    )
    return Pipeline([("features", features), ("model", RidgeCV(alphas=RIDGE_ALPHAS))])


FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class RidgeEncoding:
    """:func:`linear`'s fitted transformers (``encoded=True``) as arrays: each categorical's
    training codes (one-hot; NaN last when missing values were seen), the numerics' medians, the
    columns that get a missing-value indicator, and the scaler's means and scales."""

    categories: tuple[FloatArray, ...]
    median: FloatArray
    indicators: npt.NDArray[np.intp]
    mean: FloatArray
    scale: FloatArray

    @classmethod
    def fit(cls, x: FloatArray) -> tuple[RidgeEncoding, FloatArray]:
        """The transformers fitted on encoded rows, and those rows' design matrix."""
        k = len(CATEGORICAL)
        numeric = x[:, k:]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN column: imputed with 0
            median = np.nanmedian(numeric, axis=0)
        median = np.where(np.isnan(median), 0.0, median)
        indicators = np.flatnonzero(np.isnan(numeric).any(axis=0))
        block = _impute(numeric, median, indicators)
        n = block.shape[0]
        # StandardScaler's two-pass mean and variance; near-constant columns are not scaled.
        mean = block.sum(axis=0) / n
        centred = block - mean
        correction = centred.sum(axis=0)
        var = ((centred**2).sum(axis=0) - correction**2 / n) / n
        eps = np.finfo(np.float64).eps
        constant = var <= n * eps * var + (n * mean * eps) ** 2
        scale = np.where(constant, 1.0, np.sqrt(var))
        encoding = cls(tuple(_sorted_with_nan(x[:, j]) for j in range(k)), median, indicators, mean, scale)
        return encoding, encoding.transform(x, scaled=(block - mean) / scale)

    def transform(self, x: FloatArray, *, scaled: FloatArray | None = None) -> FloatArray:
        """The design matrix of encoded rows: the one-hot columns (a code training lacked: all
        zero), then the imputed, scaled numerics and missing-value indicators."""
        k = len(CATEGORICAL)
        columns = []
        for j, categories in enumerate(self.categories):
            values = x[:, j]
            hot = values[:, None] == categories[None, :]
            if categories.size and np.isnan(categories[-1]):
                hot[:, -1] = np.isnan(values)
            columns.append(hot.astype(np.float64))
        if scaled is None:
            scaled = (_impute(x[:, k:], self.median, self.indicators) - self.mean) / self.scale
        columns.append(scaled)
        return np.hstack(columns)


@dataclass(frozen=True)
class FoldRidge:
    """The ridge baseline of one target fitted by :meth:`RidgeDesign.fit`: predicts what
    ``linear(encoded=True)`` fitted on the same rows predicts."""

    encoding: RidgeEncoding
    coef: FloatArray
    intercept: float
    alpha: float

    def predict(self, x: FloatArray) -> FloatArray:
        return np.asarray(self.encoding.transform(x) @ self.coef + self.intercept, dtype=np.float64)


class RidgeDesign:
    """:func:`linear` (``encoded=True``) on one training matrix and its weights, up to the target:
    the one-hot, imputation and scaling fitted, and ``RidgeCV``'s leave-one-out decomposition
    done, once for every target fitted on these rows (:meth:`fit`).

    Why hand-written: in a cross-validation fold the Pipeline spent more CPU in its transformers'
    input validation than in the ridge, and ``RidgeCV`` rebuilds ``X (X'X + a)^-1 X'`` for each
    of its 13 penalties; here the covariance's eigenvectors are applied to ``X`` once, and every
    penalty's leave-one-out errors are a few matrix products. The arithmetic is scikit-learn's
    (``OneHotEncoder(handle_unknown="ignore")``, ``SimpleImputer(strategy="median",
    add_indicator=True, keep_empty_features=True)``, ``StandardScaler``, then ``RidgeCV`` with
    ``gcv_mode="cov"``, an intercept and sample weights: ``_RidgeGCV._solve_eigen_covariance``
    in scikit-learn 1.9), so the predictions equal the Pipeline's to rounding
    (``tests/unit/ml/test_fit_speed_equivalence.py``). ``RidgeCV`` takes that mode when there are
    more rows than design columns; :attr:`usable` says so, and the caller fits :func:`linear`
    otherwise.
    """

    def __init__(self, x: FloatArray, weight: FloatArray, *, alphas: FloatArray = RIDGE_ALPHAS):
        self.alphas = np.asarray(alphas, dtype=np.float64)
        self.encoding, design = RidgeEncoding.fit(x)
        self.usable = design.shape[0] > design.shape[1]
        # RidgeCV's preprocessing: centred on the weighted means, rows scaled by sqrt(weight).
        self.weight = np.asarray(weight, dtype=np.float64)
        self.x_offset = np.average(design, axis=0, weights=self.weight)
        self.sqrt_sw = np.sqrt(self.weight)
        xs = (design - self.x_offset) * self.sqrt_sw[:, None]
        del design
        eigvals, self.v = np.linalg.eigh(xs.T @ xs)
        # The rows in the eigenbasis (V'X'y = Z'y: only Z is kept, a few MB per fold).
        self.z = xs @ self.v
        # (eigenvalue + alpha)^-1, one column per alpha.
        self.d = 1.0 / (eigvals[:, None] + self.alphas[None, :])
        sw_sum = float(self.sqrt_sw @ self.sqrt_sw)
        hat = (self.z * self.z) @ self.d
        toward_sw = self.z @ (self.d * (self.z.T @ self.sqrt_sw)[:, None])
        # Each row's leave-one-out denominator at every alpha (the intercept's part included).
        self.denominator = 1.0 - hat - (self.sqrt_sw[:, None] - toward_sw) * self.sqrt_sw[:, None] / sw_sum

    def fit(self, y: FloatArray) -> FoldRidge:
        """``RidgeCV`` on these rows for the target ``y``: the alpha with the lowest mean squared
        leave-one-out error (the first on ties), its coefficients and intercept."""
        y_offset = float(np.average(y, weights=self.weight))
        ys = (y - y_offset) * self.sqrt_sw
        projected = self.z.T @ ys
        fitted = self.z @ (self.d * projected[:, None])
        looe = (ys[:, None] - fitted) / self.denominator
        best = int(np.argmax(np.mean(-(looe**2), axis=0)))
        coef = self.v @ (self.d[:, best] * projected)
        return FoldRidge(self.encoding, coef, y_offset - float(self.x_offset @ coef), float(self.alphas[best]))


def _impute(numeric: FloatArray, median: FloatArray, indicators: npt.NDArray[np.intp]) -> FloatArray:
    missing = np.isnan(numeric)
    return np.hstack([np.where(missing, median, numeric), missing[:, indicators].astype(np.float64)])


def _sorted_with_nan(values: FloatArray) -> FloatArray:
    present = values[~np.isnan(values)]
    out = np.unique(present)
    if present.size < values.size:
        out = np.append(out, np.nan)
    return out
