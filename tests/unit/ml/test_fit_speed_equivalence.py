"""The fit's session-5 shortcuts (issue #17 item 7) change its cost, never its numbers.

* :class:`advisor.ml.pipeline.RidgeDesign` predicts what ``linear(encoded=True)`` predicts and picks
  the same penalty, for one target or several on the same rows;
* a fold estimator's own categorical encoding (``WeightedBinningBoosting._preprocess_X``) and its
  one-pass bin mapper (``_fit_mapper``) grow scikit-learn's trees, and reused bins
  (:class:`advisor.ml.pipeline.FoldBins`) grow the trees a fresh fit grows;
* the coverage search with every level's offsets computed at once picks the level the plain search
  picks;
* a target whose CV sample another target already cross-validated gets the same fold predictions.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest
from sklearn.ensemble import HistGradientBoostingRegressor

from advisor.ml import train
from advisor.ml.dataset import Observation
from advisor.ml.features import CATEGORICAL, NUMERIC
from advisor.ml.pipeline import (
    GBM_PARAMS,
    FoldBins,
    RidgeDesign,
    WeightedBinningBoosting,
    fold_boosting,
    linear,
)

FloatArray = npt.NDArray[np.float64]
K = len(CATEGORICAL)


def _matrix(rng: np.random.Generator, n: int, *, all_missing: bool = False) -> FloatArray:
    """An encoded CV matrix: category codes (NaN missing), then numerics with missing values, ties,
    constant columns and (``all_missing``, which the ridge imputes with 0 and scikit-learn's
    boosting cannot bin) one column that is always missing."""
    x = np.empty((n, K + len(NUMERIC)))
    for j in range(K):
        x[:, j] = rng.integers(0, 3 + j, n)
        x[rng.random(n) < 0.1 * (j % 3), j] = np.nan
    for j in range(K, x.shape[1]):
        kind = j % 4
        if kind == 0:
            x[:, j] = rng.normal(size=n)
        elif kind == 1:
            x[:, j] = rng.integers(0, 6, n)
        elif kind == 2:
            x[:, j] = np.round(rng.lognormal(size=n), 1)
        else:
            x[:, j] = 2.0
        x[rng.random(n) < 0.15, j] = np.nan if kind != 3 else 2.0
    if all_missing:
        x[:, -1] = np.nan
    return x


def _targets(rng: np.random.Generator, x: FloatArray) -> list[FloatArray]:
    signal = np.nan_to_num(x[:, K]) + 0.2 * np.nan_to_num(x[:, 0]) - 0.1 * np.nan_to_num(x[:, K + 1])
    return [signal + rng.normal(scale=s, size=len(x)) for s in (0.05, 0.3, 2.0)]


@pytest.mark.parametrize("seed", range(4))
def test_ridge_design_predicts_what_the_pipeline_predicts(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = _matrix(rng, 1_500, all_missing=True)
    weight = np.where(rng.random(len(x)) < 0.3, 1.0, rng.random(len(x)) + 0.2)
    probe = _matrix(rng, 400)
    probe[:40, 0] = 17.0  # a category the training rows lack
    probe[40:80, K] = np.nan  # missing where training had none for that row pattern
    design = RidgeDesign(x, weight)
    assert design.usable
    for y in _targets(rng, x):  # several targets on one decomposition
        pipeline = linear(encoded=True).fit(x, y, model__sample_weight=weight)
        fitted = design.fit(y)
        assert fitted.alpha == pipeline.named_steps["model"].alpha_
        np.testing.assert_allclose(fitted.predict(probe), pipeline.predict(probe), rtol=0, atol=1e-9)
        np.testing.assert_allclose(
            design.encoding.transform(probe), pipeline.named_steps["features"].transform(probe), rtol=0, atol=1e-12
        )


def test_ridge_design_says_when_ridgecv_would_solve_another_way() -> None:
    rng = np.random.default_rng(9)
    x = _matrix(rng, 20)  # fewer rows than design columns: RidgeCV's Gram mode
    assert not RidgeDesign(x, np.ones(len(x))).usable


def _params(monotonic: bool) -> dict[str, object]:
    n = K + len(NUMERIC)
    cst = [0] * K + [1 if j % 5 == 0 else 0 for j in range(n - K)] if monotonic else None
    return {**GBM_PARAMS, "categorical_features": list(range(K)), "monotonic_cst": cst, "random_state": 0}


@pytest.mark.parametrize("seed", range(3))
def test_fold_estimator_grows_scikit_learns_trees(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = _matrix(rng, 2_500)
    x[:, K + 4] = rng.normal(size=len(x))  # >127 distinct values: the weighted edges
    y = _targets(rng, x)[1]
    weight = rng.choice([0.5, 1.0, 2.0, 3.0], len(x))
    params = _params(monotonic=seed % 2 == 0)
    plain = HistGradientBoostingRegressor(**params).fit(x, y, sample_weight=weight)
    fast = WeightedBinningBoosting(**params)
    fast._fast_encoding = True
    fast.fit(x, y, sample_weight=weight)
    assert fast._preprocessor is None and fast._codes is not None  # the fast path was taken
    np.testing.assert_array_equal(fast.is_categorical_, plain.is_categorical_)
    for expected, got in zip(plain._bin_mapper.bin_thresholds_, fast._bin_mapper.bin_thresholds_, strict=True):
        np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(fast._bin_mapper.n_bins_non_missing_, plain._bin_mapper.n_bins_non_missing_)
    assert len(fast._bin_mapper.bin_thresholds_[K + 4]) == 126
    probe = _matrix(rng, 600)
    probe[:60, 1] = 40.0  # unseen category: where missing values go
    np.testing.assert_array_equal(fast.predict(probe), plain.predict(probe))
    with pytest.raises(ValueError, match="features"):
        fast.predict(probe[:, :-1])


def test_fold_estimator_leaves_other_inputs_to_scikit_learn() -> None:
    rng = np.random.default_rng(3)
    x = _matrix(rng, 800)
    y = _targets(rng, x)[0]
    params = {**_params(monotonic=False), "categorical_features": [1, 0]}  # not the leading order
    fast = WeightedBinningBoosting(**params)
    fast._fast_encoding = True
    fast.fit(x, y)
    assert fast._preprocessor is not None
    np.testing.assert_array_equal(fast.predict(x), HistGradientBoostingRegressor(**params).fit(x, y).predict(x))


def test_reused_bins_grow_the_trees_of_a_fresh_fit() -> None:
    rng = np.random.default_rng(5)
    x = _matrix(rng, 2_000)
    weight = rng.random(len(x)) + 0.1
    first, second, _ = _targets(rng, x)
    bins = FoldBins()
    fold_boosting(target="ttft_p50_ms").reusing(bins).fit(x, first, sample_weight=weight)
    assert bins.binned is not None
    reused = fold_boosting(target="ttft_p99_ms").reusing(bins).fit(x, second, sample_weight=weight)
    assert reused._bin_mapper is bins.mapper
    fresh = fold_boosting(target="ttft_p99_ms").fit(x, second, sample_weight=weight)
    np.testing.assert_array_equal(reused.predict(x), fresh.predict(x))


def _plain_choose_level(residuals: FloatArray, strata: train._Strata, folds: npt.NDArray[np.intp]) -> float:
    """The search before session 5: :func:`advisor.ml.train._fold_coverage` at each level tried."""
    if len(np.unique(folds)) < 2:
        return train.NOMINAL_COVERAGE
    lo, hi = 0, len(train.LEVEL_GRID) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if train._fold_coverage(residuals, strata, folds, float(train.LEVEL_GRID[mid])).mean() >= 0.8:
            hi = mid
        else:
            lo = mid + 1
    return float(train.LEVEL_GRID[lo])


@pytest.mark.parametrize("seed", range(8))
def test_the_coverage_search_picks_the_plain_searchs_level(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(200, 3_000))
    devices = rng.integers(0, 25, n)
    kinds = np.array(["gpu", "apple_soc", "cpu"], dtype=object)[devices % 3]
    # Residuals that cluster by device, so the level has to widen.
    residuals = rng.normal(scale=0.1, size=n) + rng.normal(scale=0.2, size=25)[devices]
    strata = train._Strata.of(kinds, np.array([f"d{d}" for d in devices], dtype=object))
    folds = (devices % int(rng.integers(2, 6))).astype(np.intp)
    assert train._choose_level(residuals, strata, folds) == _plain_choose_level(residuals, strata, folds)
    np.testing.assert_array_equal(
        train._honest_coverage(residuals, strata, folds),
        _honest_plain(residuals, strata, folds),
    )


def _honest_plain(residuals: FloatArray, strata: train._Strata, folds: npt.NDArray[np.intp]) -> npt.NDArray[np.bool_]:
    covered = np.zeros(len(residuals), dtype=bool)
    for fold in np.unique(folds).tolist():
        test = folds == fold
        level = _plain_choose_level(residuals[~test], strata[~test], folds[~test])
        offsets = train._offsets(residuals[~test], strata[~test], level)
        covered[test] = train._inside(residuals[test], strata[test], offsets)
    return covered


def test_a_target_on_a_sample_already_cross_validated_gets_the_same_folds(
    public_observations: list[Observation],
) -> None:
    ts = train.build_training_sets(public_observations)["decode_tok_s"]
    other = train.TrainingSet(
        "ttft_p50_ms",
        ts.features,
        ts.index,
        -0.5 * ts.y + 0.1,
        ts.weight,
        ts.hardware_group,
        ts.source,
        ts.kind,
        ts.origin,
    )
    shared = train._SharedFolds()
    shared.use(ts, keep=True)
    train._cross_validate(ts, "hardware", lambda _: None, train._Sample.of(ts, shared))
    assert shared.designs and shared.bins  # kept for the next target
    shared.use(other, keep=False)
    reused = train._cross_validate(other, "hardware", lambda _: None, train._Sample.of(other, shared))
    fresh = train._cross_validate(other, "hardware", lambda _: None)
    assert reused is not None and fresh is not None
    for method, values in fresh.predictions.items():
        np.testing.assert_array_equal(reused.predictions[method], values, err_msg=method)
    shared.release()
    assert not shared.designs and not shared.bins


def test_leave_one_family_out_fits_no_trees_and_answers_every_row_by_the_fallback(
    public_observations: list[Observation],
) -> None:
    # The trees of a fold whose held-out rows are all of a family the fold never saw would only
    # feed predictions the fallback overwrites, so the fold does not fit them.
    ts = train.build_training_sets(public_observations)["decode_tok_s"]
    sample = train._Sample.of(ts)
    run = train._cross_validate(ts, "family", lambda _: None, sample)
    assert run is not None and sample.fits
    assert all(fitted[1] is None for fitted in sample.fits.values())
    assert (run.predictions[train._UNSEEN] == 1.0).all()
    np.testing.assert_array_equal(run.predictions[train._RAW], run.predictions[train._BASE])
    assert train._fallback_mode(ts, [run]) in ("constant", "base")  # never the trees
    # A grouping that holds out seen families still fits them.
    hardware = train._cross_validate(ts, "hardware", lambda _: None, sample)
    assert hardware is not None and any(fitted[1] is not None for fitted in sample.fits.values())
