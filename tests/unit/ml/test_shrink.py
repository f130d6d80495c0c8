"""Shrinking the trees toward the physics-shaped base: λ chosen on out-of-fold predictions,
nested per fold for the reported scores, served by the head, stored in the artifact."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from advisor.ml import store
from advisor.ml.dataset import Observation
from advisor.ml.features import FeatureInput
from advisor.ml.shrink import LAMBDA_GRID, Selection, apply_nested, choose, nested, shrunk
from advisor.ml.train import FitResult, build_training_sets

RNG = np.random.default_rng(7)


def _selection(y: np.ndarray, trees: np.ndarray, seen: np.ndarray | None = None) -> Selection:
    base = np.zeros(len(y))
    return Selection(base, base + trees, np.ones(len(y), dtype=bool) if seen is None else seen)


def test_trees_that_explain_the_residual_are_kept_and_noise_is_dropped() -> None:
    y = RNG.normal(0.0, 0.3, 400)
    assert choose(y, [_selection(y, y)]) == 1.0  # the trees are exactly right
    assert choose(y, [_selection(y, RNG.normal(0.0, 0.3, 400))]) == 0.0  # unrelated to the residual
    # Trees twice too strong: half of them is right.
    assert choose(y, [_selection(y, 2.0 * y)]) == pytest.approx(0.5)


def test_rows_of_unseen_kinds_do_not_choose() -> None:
    y = RNG.normal(0.0, 0.3, 200)
    trees = y.copy()
    unseen = np.arange(200) >= 100
    trees[unseen] = -5.0 * y[unseen]  # would pull λ to 0 if they counted
    assert choose(y, [_selection(y, trees, ~unseen)]) == 1.0


def test_ties_go_to_fewer_trees_and_no_rows_keep_them() -> None:
    y = RNG.normal(0.0, 0.3, 50)
    assert choose(y, [_selection(y, np.zeros(50))]) == 0.0  # every λ scores alike
    assert choose(y, [_selection(y, y, np.zeros(50, dtype=bool))]) == 1.0
    assert choose(y, [_selection(y, y)], np.zeros(50, dtype=bool)) == 1.0


def test_a_folds_lambda_is_chosen_without_its_rows() -> None:
    y = RNG.normal(0.0, 0.3, 300)
    folds = np.repeat(np.arange(3), 100)
    trees = y.copy()
    pool = [_selection(y, trees)]
    before = nested(y, pool, folds)
    # Fold 0's trees become useless: only the other folds' λ may change.
    changed = trees.copy()
    changed[folds == 0] = RNG.normal(0.0, 1.0, 100)
    after = nested(y, [_selection(y, changed)], folds)
    assert after[0] == before[0] == 1.0
    assert after[1] < 1.0 and after[2] < 1.0
    shrunk_rows = apply_nested(_selection(y, changed), folds, after)
    np.testing.assert_allclose(shrunk_rows[folds == 1], after[1] * changed[folds == 1])
    np.testing.assert_allclose(shrunk_rows[folds == 0], changed[folds == 0])


def test_shrunk_interpolates_base_and_raw() -> None:
    base, raw = np.array([0.1, -0.2]), np.array([0.5, 0.2])
    np.testing.assert_allclose(shrunk(base, raw, 0.0), base)
    np.testing.assert_allclose(shrunk(base, raw, 1.0), raw)
    np.testing.assert_allclose(shrunk(base, raw, 0.25), [0.2, -0.1])
    assert LAMBDA_GRID[0] == 0.0 and LAMBDA_GRID[-1] == 1.0


def test_the_fit_chooses_a_lambda_per_head_and_the_head_serves_it(public_fit: FitResult) -> None:
    for target, head in public_fit.model.heads.items():
        report = public_fit.cv_metrics["targets"][target]["shrink"]
        assert head.shrink == report["lambda"]
        assert 0.0 <= head.shrink <= 1.0
        assert report["chosen_on"] == ["hardware", "source"]
        for scheme, values in report["schemes"].items():
            assert len(values["fold_lambdas"]) == public_fit.cv_metrics["targets"][target]["schemes"][scheme]["folds"]
    # On the published runs the trees hurt prefill on held-out sources (issue #17): λ < 1, and
    # the nested-λ score is below the unshrunk one by a margin.
    prefill = public_fit.cv_metrics["targets"]["prefill_tok_s"]
    assert public_fit.model.heads["prefill_tok_s"].shrink < 1.0
    by_source = prefill["schemes"]["source"]["mdape"]["model"]
    assert by_source < 0.9 * prefill["shrink"]["schemes"]["source"]["mdape_unshrunk"]


def test_head_predicts_base_plus_lambda_trees(public_fit: FitResult, public_observations: list[Observation]) -> None:
    obs = public_observations[:40]
    rows = build_training_sets(obs)["prefill_tok_s"].rows()
    head = public_fit.model.heads["prefill_tok_s"]
    assert head.base is not None
    base = head.base.predict_rows(rows)
    full = dataclasses.replace(head, shrink=1.0).predict(rows)
    for lam in (0.0, 0.3, head.shrink):
        np.testing.assert_allclose(dataclasses.replace(head, shrink=lam).predict(rows), base + lam * (full - base))
    with pytest.raises(ValueError, match="shrink"):
        dataclasses.replace(head, shrink=1.5)


def test_the_artifact_keeps_lambda(public_fit: FitResult, public_observations: list[Observation]) -> None:
    data = store.dumps(public_fit.model, version="v-shrink", meta={})
    loaded = store.loads(data)
    for target, head in public_fit.model.heads.items():
        assert loaded.heads[target].shrink == head.shrink
    items = [
        FeatureInput(o.roofline, o.runtime, o.hardware.kind, o.hardware, o.model, o.quant)
        for o in public_observations[:20]
    ]
    for target, values in public_fit.model.predict_arrays(items).items():
        np.testing.assert_allclose(loaded.predict_arrays(items)[target], values, equal_nan=True)
