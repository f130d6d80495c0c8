"""The estimators: scikit-learn Pipelines over :data:`advisor.ml.features.FEATURES`.

* :func:`gradient_boosting` is the fitted model: a ColumnTransformer (ordinal codes for the
  categoricals, numerics passed through) and a ``HistGradientBoostingRegressor`` that splits on
  categories natively and routes missing values, trained on ``log(measured / reference)``
  (squared error in log space: a broken row that is 10x off costs like one 2.3 off, not 9).
* :func:`linear` is the interpretable baseline: one-hot categoricals, median-imputed and scaled
  numerics with missing-value indicators, and a ridge regression whose penalty is chosen by
  efficient leave-one-out CV.

Both take a DataFrame with the feature columns and predict ``log(measured / reference)``.
"""

from __future__ import annotations

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

    def _bin_data(self, X: Any, sample_weight: Any, is_training_data: bool) -> Any:
        mapper = self._bin_mapper
        if (
            not is_training_data
            or sample_weight is None
            # scikit-learn draws an unweighted subsample itself past this many rows, and drops
            # zero-weight rows before counting distinct values: leave both cases to it.
            or (mapper.subsample is not None and X.shape[0] > mapper.subsample)
            or not np.all(sample_weight > 0)
        ):
            return super()._bin_data(X, sample_weight, is_training_data)
        mapper.fit(X)
        max_bins = mapper.n_bins - 1
        for j in np.flatnonzero(~np.asarray(mapper.is_categorical_, dtype=bool)).tolist():
            column = X[:, j]
            present = ~np.isnan(column)
            values, weights = column[present], np.asarray(sample_weight, dtype=np.float64)[present]
            if np.unique(values).size <= max_bins:
                continue  # the midpoints of the distinct values, as with weights
            edges = weighted_edges(values, weights, max_bins)
            mapper.bin_thresholds_[j] = edges
            mapper.n_bins_non_missing_[j] = edges.shape[0] + 1
        return mapper.transform(X)


def fold_boosting(*, random_state: int = 0, target: str | None = None) -> WeightedBinningBoosting:
    """The estimator of :func:`gradient_boosting` (same parameters and constraints) without its
    ColumnTransformer, with the faster weighted binning: for a matrix already encoded like that
    ColumnTransformer's output (cross-validation encodes a sample once, not once per fold)."""
    model = gradient_boosting(random_state=random_state, target=target).named_steps["model"]
    return WeightedBinningBoosting(**model.get_params())


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
    plain.__dict__.update(fast.__dict__)
    pipeline.steps[-1] = ("model", plain)
    return pipeline


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
    return Pipeline([("features", features), ("model", RidgeCV(alphas=np.logspace(-3, 3, 13)))])
