"""Issue #18 item 5: the request log never holds a query string or a token, and a client that goes
away mid-request is not counted as a server error."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from litestar.testing import TestClient

from advisor.server import create_app
from advisor.settings import DatabaseSettings, ServerSettings, Settings


def _app(url: str, log_level: str = "info") -> Any:
    return create_app(Settings(db=DatabaseSettings(url=url), server=ServerSettings(log_level=log_level)))  # type: ignore[arg-type]


def test_request_log_has_no_query_string_or_token(clean_db: str, capsys: pytest.CaptureFixture[str]) -> None:
    with TestClient(app=_app(clean_db)) as client:
        capsys.readouterr()
        response = client.get(
            "/api/v1/runs", params={"token": "s3cr3t-query-token"}, headers={"Authorization": "Bearer s3cr3t-header"}
        )
        assert response.status_code == 200
    logged = capsys.readouterr()
    text = logged.out + logged.err
    assert "/api/v1/runs" in text  # the request was logged ...
    assert "s3cr3t-query-token" not in text  # ... without its query string
    assert "s3cr3t-header" not in text


def test_client_disconnect_is_not_a_server_error(clean_db: str) -> None:
    app = _app(clean_db, "warning")
    sent: list[dict[str, Any]] = []

    async def scenario() -> None:
        async def receive() -> dict[str, Any]:
            return {"type": "http.disconnect"}

        async def send(message: Any) -> None:
            sent.append(message)

        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/api/v1/runs/bulk",
            "raw_path": b"/api/v1/runs/bulk",
            "query_string": b"",
            "root_path": "",
            "headers": [(b"content-type", b"application/x-ndjson"), (b"content-length", b"100")],
            "client": ("127.0.0.1", 5000),
            "server": ("127.0.0.1", 8000),
            "state": {},
        }
        await app(scope, receive, send)  # type: ignore[arg-type]

    with TestClient(app=app) as client:  # runs the app's start-up
        asyncio.run(scenario())
        starts = [m for m in sent if m["type"] == "http.response.start"]
        assert [m["status"] for m in starts] == [499]
        metrics = client.get("/metrics").text
        assert 'status_code="500"' not in metrics
        assert 'status_code="499"' in metrics


def test_a_body_that_never_arrives_is_408(clean_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Headers and one byte, then nothing: the connection is answered and released, not held."""
    from advisor.server import limits

    monkeypatch.setattr(limits, "BODY_READ_TIMEOUT_S", 0.3)
    app = _app(clean_db, "warning")
    sent: list[dict[str, Any]] = []
    chunks = [{"type": "http.request", "body": b"{", "more_body": True}]

    async def scenario() -> float:
        async def receive() -> dict[str, Any]:
            if chunks:
                return chunks.pop()
            await asyncio.sleep(3600)  # the client never sends the rest
            raise AssertionError("unreachable")

        async def send(message: Any) -> None:
            sent.append(message)

        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": "/api/v1/runs",
            "raw_path": b"/api/v1/runs",
            "query_string": b"",
            "root_path": "",
            "headers": [(b"content-type", b"application/json"), (b"content-length", b"1000")],
            "client": ("127.0.0.1", 5001),
            "server": ("127.0.0.1", 8000),
            "state": {},
        }
        started = asyncio.get_running_loop().time()
        await asyncio.wait_for(app(scope, receive, send), timeout=10)  # type: ignore[arg-type]
        return asyncio.get_running_loop().time() - started

    with TestClient(app=app):
        elapsed = asyncio.run(scenario())
    assert [m["status"] for m in sent if m["type"] == "http.response.start"] == [408]
    assert elapsed < 3
