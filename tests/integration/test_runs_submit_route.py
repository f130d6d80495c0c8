"""``POST /api/v1/runs`` answered from its route's ``before_request`` hook (issue #19, session 7):
what Litestar's parameter machinery gave the handler (the raw body under the route's size limit,
``?format=``) is read from the raw request, with the same answers, on both databases."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from litestar.testing import TestClient

from advisor.domain.runs import controllers
from advisor.server import create_app
from advisor.settings import DatabaseSettings, ServerSettings, Settings
from tests.integration.test_runs_api import CANONICAL, _bad, _counts


@pytest.fixture
def small_client(clean_db: str) -> Iterator[Any]:
    settings = Settings(
        db=DatabaseSettings(url=clean_db), server=ServerSettings(log_level="warning", max_body_bytes=2_000)
    )
    with TestClient(app=create_app(settings)) as client:
        yield client


def test_the_route_is_answered_by_its_hook_not_the_handler(client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from litestar._kwargs.kwargs_model import KwargsModel

    real = KwargsModel.to_kwargs
    used: list[str] = []

    async def spy(self: Any, connection: Any) -> Any:
        used.append(connection.url.path)
        return await real(self, connection)

    monkeypatch.setattr(KwargsModel, "to_kwargs", spy)
    response = client.post("/api/v1/runs", content=json.dumps(CANONICAL))
    assert response.status_code == 201, response.text
    assert used == []  # neither the kwargs model nor the signature model ran for it
    client.get("/api/v1/runs")
    assert used == ["/api/v1/runs"]  # (as they do for the other routes)


def test_an_announced_body_over_the_limit_is_413_before_reading(small_client: Any, clean_db: str) -> None:
    response = small_client.post("/api/v1/runs", content=b"{" + b" " * 5_000 + b"}")
    _bad("body", 413, response)
    assert _counts(clean_db)["run"] == 0


def test_a_streamed_body_over_the_limit_is_413(small_client: Any, clean_db: str) -> None:
    def chunks() -> Iterator[bytes]:  # no content-length: chunked transfer
        for _ in range(10):
            yield b" " * 400

    response = small_client.post("/api/v1/runs", content=chunks())
    _bad("body", 413, response)
    assert _counts(clean_db)["run"] == 0


def test_a_body_in_several_chunks_under_the_limit_is_read_whole(client: Any, clean_db: str) -> None:
    body = json.dumps(CANONICAL).encode()

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(body), 100):
            yield body[start : start + 100]

    response = client.post("/api/v1/runs", content=chunks())
    assert response.status_code == 201, response.text
    assert _counts(clean_db)["run"] == 1


def test_the_last_format_value_is_the_one_used(client: Any) -> None:
    body = json.dumps(CANONICAL)
    assert client.post("/api/v1/runs?format=vllm_bench&format=canonical", content=body).status_code == 201
    _bad("format", 422, client.post("/api/v1/runs?format=canonical&format=vllm_bench", content=body))
    _bad("format", 422, client.post("/api/v1/runs?format=nope", content=body))


def test_a_bad_content_length_is_a_400_problem(client: Any) -> None:
    scope: dict[str, Any] = {"headers": [(b"content-length", b"12x")]}
    with pytest.raises(Exception) as caught:
        controllers._content_length(scope)  # type: ignore[arg-type]
    assert getattr(caught.value, "status_code", None) == 400


async def test_a_client_gone_mid_body_is_an_error_not_a_partial_body() -> None:
    messages = [{"type": "http.request", "body": b"{", "more_body": True}, {"type": "http.disconnect"}]

    class FakeRequest:
        is_connected = True

        class route_handler:
            @staticmethod
            def resolve_request_max_body_size() -> int:
                return 1_000

        @staticmethod
        async def receive() -> dict[str, Any]:
            return messages.pop(0)

    with pytest.raises(Exception, match="disconnected"):
        await controllers.read_body(FakeRequest(), None)  # type: ignore[arg-type]


def test_the_operation_still_documents_the_body_and_format(client: Any) -> None:
    operation = client.get("/schema/openapi.json").json()["paths"]["/api/v1/runs"]["post"]
    assert [(p["name"], p["in"]) for p in operation["parameters"]] == [("format", "query")]
    assert "application/json" in operation["requestBody"]["content"]
    assert {"200", "201"} <= set(operation["responses"])
