"""Collect every rules/cases/<ID>.yaml case as a parameter with a readable id (PRE002-fires_on_…)."""

from __future__ import annotations

import pytest

from tests.unit.rules.harness import all_cases


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "rule_case" in metafunc.fixturenames:
        cases = all_cases()
        metafunc.parametrize("rule_case", cases, ids=[c.test_id for c in cases])
