from __future__ import annotations

import pytest

from tests.unit.client.fakes import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
