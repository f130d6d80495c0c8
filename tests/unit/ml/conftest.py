"""One fit on the shipped published runs, shared by the fitted-model tests (it takes seconds)."""

from __future__ import annotations

import pytest

from advisor.catalog import Catalog
from advisor.ml.dataset import Observation, public_dataset
from advisor.ml.train import FitResult, fit


@pytest.fixture(scope="session")
def public_observations() -> list[Observation]:
    return public_dataset(Catalog.default())


@pytest.fixture(scope="session")
def public_fit(public_observations: list[Observation]) -> FitResult:
    return fit(public_observations)
