"""Expectations: what a setup should measure (DESIGN §6).

``prior_expectations`` is the physics-only prior (roofline × calibrated efficiency); the fitted
model (:class:`advisor.ml.model.PerformanceModel`) returns the same :class:`Expectations` shape.

Modules: ``dataset`` (observations from published and fleet runs), ``features``, ``pipeline``
(the scikit-learn estimators), ``train`` (grouped CV, baselines, conformal intervals), ``model``
(prediction), ``forest`` (the fast per-row evaluator), ``store`` (skops artifacts). They import
scikit-learn, so this package re-exports only the light prior; import them by name. Nothing here
loads a model at import time.
"""

from __future__ import annotations

from advisor.ml.expectations import Band, Expectations
from advisor.ml.prior import (
    DECODE_EFFICIENCY,
    PREFILL_EFFICIENCY,
    PRIOR_MODEL_VERSION,
    RUNTIME_FAMILY,
    EfficiencyPrior,
    prior_expectations,
    runtime_family,
)

__all__ = [
    "DECODE_EFFICIENCY",
    "PREFILL_EFFICIENCY",
    "PRIOR_MODEL_VERSION",
    "RUNTIME_FAMILY",
    "Band",
    "EfficiencyPrior",
    "Expectations",
    "prior_expectations",
    "runtime_family",
]
