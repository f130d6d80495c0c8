"""Expectations: what a setup should measure (DESIGN §6).

``prior_expectations`` is the physics-only prior (roofline × calibrated efficiency); the fitted
model, when trained, returns the same :class:`Expectations` shape. Nothing here loads a model at
import time.
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
