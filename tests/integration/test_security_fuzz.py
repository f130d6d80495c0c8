"""Issue #18 item 7: schemathesis against /schema/openapi.json with an admin token, on both
databases: no input the schema allows (or nearly allows) makes a server error. Bounded in time: a
few examples per operation, derandomised so a failure reproduces."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from litestar.testing import TestClient

from advisor.server import create_app
from advisor.settings import AuthSettings, DatabaseSettings, ServerSettings, Settings
from tests.integration.test_auth import _create


@pytest.fixture
def fuzz_app(clean_db: str) -> Iterator[tuple[Any, str]]:
    # The first model activation imports the ML stack (scikit-learn, skops) on demand: seconds on a
    # busy machine, which once ran past the fuzzer's 10 s read timeout. Imported here, so that the
    # timeout judges the handlers, not a one-off import.
    import advisor.ml.store  # noqa: F401

    token = _create(clean_db, "fuzz-admin", "admin")
    app = create_app(
        Settings(
            db=DatabaseSettings(url=clean_db),
            server=ServerSettings(log_level="error"),  # type: ignore[arg-type]
            auth=AuthSettings(mode="token", rate_limit_per_second=0),
        )
    )
    with TestClient(app=app):  # runs the start-up hooks once
        yield app, token


#: Operations that start long jobs (a model fit takes longer than the fuzzer's 10 s read timeout);
#: their input handling is tested in tests/integration/test_models_api.py.
SLOW = frozenset({"/api/v1/models/fit"})
#: Hypothesis examples over all operations (each draws an operation, then a case for it).
TOTAL_EXAMPLES = 300


def test_no_server_error(fuzz_app: tuple[Any, str]) -> None:
    app, token = fuzz_app
    api = schemathesis.openapi.from_asgi("/schema/openapi.json", app)
    operations = [op for op in (r.ok() for r in api.get_all_operations()) if op.path not in SLOW]
    assert len(operations) > 20  # the whole API, not an empty schema
    failures: list[str] = []
    called: set[str] = set()

    @settings(
        max_examples=TOTAL_EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.data())
    def fuzz(data: st.DataObject) -> None:
        operation = data.draw(st.sampled_from(operations), label="operation")
        case = data.draw(operation.as_strategy(), label="case")
        response = case.call(headers={"Authorization": f"Bearer {token}"})
        called.add(f"{case.method} {operation.path}")
        if response.status_code >= 500:
            failures.append(f"{case.method} {case.formatted_path}: {response.status_code} {response.text[:300]}")

    fuzz()
    assert failures == []
    assert len(called) >= len(operations) * 3 // 4  # the examples reached most of the API
