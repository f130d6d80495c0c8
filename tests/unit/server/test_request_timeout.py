"""RequestTimeoutMiddleware's timer (a plain ``call_later`` instead of ``asyncio.timeout``): a
handler past its bound is answered 503 (408 while its body is still arriving), a handler within
it is untouched, and a cancellation that came from elsewhere still cancels the request."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest

from advisor.server.timeouts import RequestTimeoutMiddleware


def _scope(**extra: Any) -> dict[str, Any]:
    return {"type": "http", "method": "POST", "path": "/api/v1/runs", "headers": [], "state": {}, **extra}


async def _call(app: Any, *, seconds: float, scope: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    middleware = RequestTimeoutMiddleware(seconds=seconds, bulk_seconds=seconds)
    await middleware.handle(scope or _scope(), receive, send, app)  # type: ignore[arg-type]
    return sent


async def test_a_slow_handler_is_answered_503_and_the_task_is_not_left_cancelling() -> None:
    async def slow(scope: Any, receive: Any, send: Any) -> None:
        await asyncio.sleep(5)

    sent = await _call(slow, seconds=0.05)
    assert sent[0]["status"] == 503
    assert msgspec.json.decode(sent[1]["body"])["type"].endswith("request-timeout")
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0
    await asyncio.sleep(0)  # the task can await again: no pending cancellation


async def test_a_fast_handler_is_untouched() -> None:
    async def fast(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "http.response.start", "status": 201, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    sent = await _call(fast, seconds=1)
    assert [m.get("status") for m in sent] == [201, None]
    await asyncio.sleep(0.01)


async def test_a_timeout_after_the_response_started_drops_the_connection() -> None:
    async def half(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await asyncio.sleep(5)

    with pytest.raises(TimeoutError):
        await _call(half, seconds=0.05)


async def test_a_cancellation_from_elsewhere_passes_through() -> None:
    started = asyncio.Event()

    async def waits(scope: Any, receive: Any, send: Any) -> None:
        started.set()
        await asyncio.sleep(5)

    task = asyncio.create_task(_call(waits, seconds=10))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
