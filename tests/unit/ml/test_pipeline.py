"""The fit's shortcuts change its cost, never its numbers.

Weighted bin edges in one pass (``weighted_edges``, ``WeightedBinningBoosting``, ``fit_weighted``)
must equal scikit-learn's own edge for edge and prediction for prediction, and a cross-validation
fold fitted on the sample's matrix (encoded once) must predict exactly what the per-fold Pipelines
predict.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pandas as pd
import pytest
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.ensemble._hist_gradient_boosting.binning import _find_binning_thresholds

from advisor.ml import train
from advisor.ml.dataset import Observation
from advisor.ml.features import CATEGORICAL, FEATURES
from advisor.ml.pipeline import (
    GBM_PARAMS,
    WeightedBinningBoosting,
    fit_weighted,
    fold_boosting,
    gradient_boosting,
    weighted_edges,
)


def _column(rng: np.random.Generator, kind: int, n: int) -> npt.NDArray[np.float64]:
    if kind == 0:
        return rng.normal(size=n)
    if kind == 1:  # heavy ties
        return rng.integers(0, 300, n).astype(np.float64)
    if kind == 2:
        return np.round(rng.lognormal(size=n), 1)
    return np.repeat(rng.normal(size=n // 4 + 1), 4)[:n]


def _weights(rng: np.random.Generator, kind: int, n: int) -> npt.NDArray[np.float64]:
    if kind == 0:  # integer-ish weights: the cumulative weight lands exactly on ranks
        return rng.choice([0.5, 1.0, 2.0, 3.0], n)
    if kind == 1:
        return rng.random(n) + 0.05
    return np.ones(n)


@pytest.mark.parametrize("seed", range(6))
def test_weighted_edges_are_scikit_learns(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for trial in range(40):
        n = int(rng.integers(200, 4_000))
        values, weights = _column(rng, trial % 4, n), _weights(rng, trial % 3, n)
        if np.unique(values).size <= 127:
            continue
        expected = _find_binning_thresholds(values, 127, sample_weight=weights)
        np.testing.assert_array_equal(weighted_edges(values, weights, 127), expected)


def _data(
    seed: int, n: int = 3_000
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    rng = np.random.default_rng(seed)
    x = np.column_stack(
        [
            rng.integers(0, 4, n).astype(np.float64),  # categorical, with missing values
            rng.normal(size=n),  # many distinct values, with missing values
            rng.integers(0, 5, n).astype(np.float64),  # few distinct values
            np.round(rng.lognormal(size=n), 2),  # many, with ties
        ]
    )
    x[rng.random(n) < 0.1, 0] = np.nan
    x[rng.random(n) < 0.1, 1] = np.nan
    y = np.nan_to_num(x[:, 1]) + 0.3 * x[:, 2] - np.log(x[:, 3] + 0.1) + rng.normal(scale=0.2, size=n)
    weight = np.where(rng.random(n) < 0.2, 1.0, rng.random(n) + 0.1)
    return x, y, weight


@pytest.mark.parametrize("seed", [0, 1])
def test_weighted_binning_boosting_fits_scikit_learns_trees(seed: int) -> None:
    x, y, weight = _data(seed)
    params = {**GBM_PARAMS, "categorical_features": [0], "monotonic_cst": [0, 1, 0, -1], "random_state": 0}
    plain = HistGradientBoostingRegressor(**params).fit(x, y, sample_weight=weight)
    fast = WeightedBinningBoosting(**params).fit(x, y, sample_weight=weight)
    for expected, got in zip(plain._bin_mapper.bin_thresholds_, fast._bin_mapper.bin_thresholds_, strict=True):
        np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(fast._bin_mapper.n_bins_non_missing_, plain._bin_mapper.n_bins_non_missing_)
    assert len(fast._bin_mapper.bin_thresholds_[1]) == 126  # the weighted path was taken
    probe, _, _ = _data(seed + 10, 1_000)
    probe[:50, 0] = 7.0  # a category never seen in training
    np.testing.assert_array_equal(fast.predict(probe), plain.predict(probe))
    # Without weights (or with a zero weight) it is scikit-learn's binning untouched.
    unweighted = WeightedBinningBoosting(**params).fit(x, y)
    np.testing.assert_array_equal(
        unweighted.predict(probe), HistGradientBoostingRegressor(**params).fit(x, y).predict(probe)
    )


def test_fit_weighted_stores_a_plain_estimator_with_the_same_trees(
    public_observations: list[Observation],
) -> None:
    ts = train.build_training_sets(public_observations)["prefill_tok_s"]
    frame = ts.frame
    plain = gradient_boosting(target=ts.target).fit(frame, ts.y, model__sample_weight=ts.weight)
    fast = fit_weighted(gradient_boosting(target=ts.target), frame, ts.y, ts.weight)
    assert type(fast.named_steps["model"]) is HistGradientBoostingRegressor
    # Nothing of the subclass's own state goes into an artifact (the same attributes as scikit-learn's).
    assert set(vars(fast.named_steps["model"])) == set(vars(plain.named_steps["model"]))
    np.testing.assert_array_equal(fast.predict(frame), plain.predict(frame))


@pytest.mark.parametrize("target", ["decode_tok_s", "prefill_tok_s"])
@pytest.mark.parametrize("scheme", ["hardware", "source", "family"])
def test_a_fold_on_the_encoded_sample_predicts_what_the_pipelines_predict(
    public_observations: list[Observation], target: str, scheme: str
) -> None:
    ts = train.build_training_sets(public_observations)[target]
    sample = train._Sample.of(ts)
    assert sample.trees is not None and sample.matrix is not None
    per_fold = train._Sample(sample.frame, None, None, sample.families)  # every fold its own Pipelines
    groups = train._groups(ts, scheme)
    splitter = train._splitter(scheme, groups)
    assert splitter is not None
    for fold_train, fold_test in splitter.split(sample.frame, ts.y, groups):
        fast, slow = train._fold(ts, sample, fold_train, fold_test), train._fold(ts, per_fold, fold_train, fold_test)
        assert fast.keys() == slow.keys()
        for method, values in slow.items():
            # The trees are the same trees. The ridge is advisor.ml.pipeline.RidgeDesign's
            # arithmetic on the same numbers: equal to rounding, which the near-collinear one-hot
            # columns amplify to ~5e-9 in log space on these rows (reported MdAPEs have 4 digits).
            atol = 1e-7 if method == "linear" else 1e-12
            np.testing.assert_allclose(fast[method], values, rtol=0, atol=atol, err_msg=method)


def test_a_categorical_with_more_labels_than_bins_is_encoded_per_fold() -> None:
    n = int(GBM_PARAMS["max_bins"]) + 5  # type: ignore[call-overload]
    frame = pd.DataFrame({name: [None] * n for name in FEATURES})
    frame[CATEGORICAL[0]] = [f"runtime-{i}" for i in range(n)]
    for name in FEATURES[len(CATEGORICAL) :]:
        frame[name] = 0.0
    assert train._encode(frame) is None
    frame[CATEGORICAL[0]] = ["a", "b", None] * (n // 3) + ["a"] * (n % 3)
    encoded = train._encode(frame)
    assert encoded is not None
    assert encoded[:3, 0].tolist()[:2] == [0.0, 1.0] and np.isnan(encoded[2, 0])


def test_fold_boosting_is_the_fitted_models_estimator() -> None:
    for target in ("decode_tok_s", "prefill_tok_s"):
        expected = gradient_boosting(target=target).named_steps["model"].get_params()
        assert fold_boosting(target=target).get_params() == expected
