"""The per-row evaluator must reproduce Pipeline.predict exactly."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.ml.dataset import Observation
from advisor.ml.features import CATEGORICAL, FEATURES
from advisor.ml.forest import CompiledPipeline
from advisor.ml.pipeline import gradient_boosting, linear
from advisor.ml.train import FitResult, TrainingSet, build_training_sets


@pytest.fixture(scope="module")
def prefill_set(public_observations: list[Observation]) -> TrainingSet:
    return build_training_sets(public_observations)["prefill_tok_s"]


def test_equals_pipeline_on_training_rows(public_fit: FitResult, public_observations: list[Observation]) -> None:
    from threadpoolctl import threadpool_limits

    sets = build_training_sets(public_observations)
    for target, head in public_fit.model.heads.items():
        compiled = CompiledPipeline.from_pipeline(head.pipeline)
        rows = sets[target].rows()
        with threadpool_limits(1):
            expected = head.pipeline.predict(sets[target].frame)
        np.testing.assert_allclose(compiled.predict(rows), expected, atol=1e-12)


_CATEGORY = st.one_of(
    st.none(),
    st.sampled_from(
        ["llamacpp", "vllm", "gpu", "cpu", "apple_soc", "nvidia", "gguf", "float", "mha", "gqa", "server", "never-seen"]
    ),
)
_NUMBER = st.one_of(st.just(math.nan), st.floats(min_value=-5, max_value=20, allow_nan=False))


@settings(max_examples=25, deadline=None)
@given(
    rows=st.lists(
        st.tuples(*([_CATEGORY] * len(CATEGORICAL)), *([_NUMBER] * (len(FEATURES) - len(CATEGORICAL)))),
        min_size=1,
        max_size=20,
    )
)
def test_equals_pipeline_on_arbitrary_rows(public_fit: FitResult, rows: list[tuple[object, ...]]) -> None:
    # Missing values, unseen categories and out-of-range numbers take the same branches.
    from threadpoolctl import threadpool_limits

    from advisor.ml.features import feature_frame

    for head in public_fit.model.heads.values():
        compiled = CompiledPipeline.from_pipeline(head.pipeline)
        with threadpool_limits(1):  # tiny batches: OpenMP start-up would dominate the test
            expected = head.pipeline.predict(feature_frame(rows))
        encoded = compiled.encode(rows)
        # all three evaluators: the array walk, the plain-Python walk, the estimator's own predict
        np.testing.assert_allclose(compiled.predict_encoded(encoded), expected, atol=1e-12)
        np.testing.assert_allclose([compiled.predict_row(r) for r in encoded.tolist()], expected, atol=1e-12)
        np.testing.assert_allclose(compiled.predict_large(rows), expected, atol=1e-12)
        np.testing.assert_allclose(compiled.predict(rows), expected, atol=1e-12)


def test_refuses_other_estimators(prefill_set: TrainingSet) -> None:
    ridge = linear().fit(prefill_set.frame, prefill_set.y)
    with pytest.raises(TypeError):
        CompiledPipeline.from_pipeline(ridge)
    quantile = gradient_boosting()
    quantile.set_params(model__loss="gamma")
    with pytest.raises(TypeError):
        CompiledPipeline.from_pipeline(quantile.fit(prefill_set.frame, np.exp(prefill_set.y)))


def test_large_batches_equal_the_estimator_bit_for_bit(public_fit: FitResult, prefill_set: TrainingSet) -> None:
    # predict_large walks the estimator's own trees with the same additions in the same order as
    # its predict, without the validation, the threadpoolctl scan and the DataFrame round trip.
    from threadpoolctl import threadpool_limits

    from advisor.ml.features import feature_frame, tree_rows

    rows = prefill_set.rows()
    assert len(rows) >= 200
    for head in public_fit.model.heads.values():
        compiled = CompiledPipeline.from_pipeline(head.pipeline)
        seen = tree_rows(head.target, rows)
        with threadpool_limits(1):
            expected = head.pipeline.predict(feature_frame(seen))
        np.testing.assert_array_equal(compiled.predict_large(seen), expected)
