"""Issue #18 item 4: per-token rate limits and a stricter limit on unknown or invalid tokens per
client address, each a 429 with Retry-After."""

from __future__ import annotations

import secrets
from typing import Any

import pytest
from litestar.middleware import rate_limit
from litestar.testing import TestClient

from advisor.domain.auth import FailedAuthLimiter
from advisor.server import create_app
from advisor.settings import AuthSettings, DatabaseSettings, ServerSettings, Settings
from tests.integration.test_auth import _create


def _app(url: str, **auth: Any) -> Any:
    return create_app(
        Settings(
            db=DatabaseSettings(url=url),
            server=ServerSettings(log_level="warning"),  # type: ignore[arg-type]
            auth=AuthSettings(**auth),
        )
    )


def _assert_429(response: Any) -> int:
    assert response.status_code == 429, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    wait = int(response.headers["retry-after"])
    assert wait >= 1
    return wait


def test_random_tokens_are_throttled_per_address(clean_db: str) -> None:
    good = _create(clean_db, "ci", "read")
    with TestClient(app=_app(clean_db, mode="token", failed_per_minute=5)) as client:
        for _ in range(5):
            bad = {"Authorization": f"Bearer {secrets.token_urlsafe(16)}"}
            assert client.get("/api/v1/runs", headers=bad).status_code == 401
        wait = _assert_429(client.get("/api/v1/runs", headers={"Authorization": "Bearer another-guess"}))
        assert wait <= 60
        _assert_429(client.get("/api/v1/runs"))  # no token at all: the same address, the same limit
        # probes stay answered while the address is throttled
        assert client.get("/health/live").status_code == 200
    with TestClient(app=_app(clean_db, mode="token", failed_per_minute=5)) as client:
        assert client.get("/api/v1/runs", headers={"Authorization": f"Bearer {good}"}).status_code == 200


def test_per_token_rate_limit(clean_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # One window for the whole test: Litestar's limiter counts per wall-clock second.
    monkeypatch.setattr(rate_limit, "time", lambda: 1_800_000_000.0)
    first, second = _create(clean_db, "ci-a", "read"), _create(clean_db, "ci-b", "read")
    with TestClient(app=_app(clean_db, mode="token", rate_limit_per_second=3)) as client:
        codes = [client.get("/api/v1/runs", headers={"Authorization": f"Bearer {first}"}).status_code for _ in range(3)]
        assert codes == [200, 200, 200]
        limited = client.get("/api/v1/runs", headers={"Authorization": f"Bearer {first}"})
        assert _assert_429(limited) <= 1
        # another token has its own budget, and the health probes are never throttled
        assert client.get("/api/v1/runs", headers={"Authorization": f"Bearer {second}"}).status_code == 200
        assert [client.get("/health/live").status_code for _ in range(5)] == [200] * 5


def test_failed_auth_limiter_forgets_after_a_minute() -> None:
    now = [1000.0]
    limiter = FailedAuthLimiter(2, clock=lambda: now[0])
    assert limiter.blocked("10.0.0.1") is None
    limiter.record("10.0.0.1")
    now[0] += 10
    limiter.record("10.0.0.1")
    assert limiter.blocked("10.0.0.1") == 50.0  # the first failure ages out 60 s after it happened
    assert limiter.blocked("10.0.0.2") is None  # per address
    now[0] += 50
    assert limiter.blocked("10.0.0.1") is None
