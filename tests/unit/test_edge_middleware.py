"""The one edge middleware keeps the semantics of the four it replaced (issue #19 item 1)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from litestar import Litestar, get
from litestar.exceptions import HTTPException
from litestar.params import FromPath
from litestar.plugins.prometheus import PrometheusConfig
from litestar.testing import TestClient
from prometheus_client import REGISTRY

from advisor.db import batching
from advisor.server import limits
from advisor.server.middleware import EdgeMiddleware, RequestMetrics


@get("/items/{item_id:int}")
async def item(item_id: FromPath[int]) -> dict[str, int]:
    return {"id": item_id}


@get("/boom")
async def boom() -> None:
    raise RuntimeError("boom")


@get("/metrics-like")
async def excluded() -> str:
    return "not metered"


def _samples(prefix: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in REGISTRY.collect():
        if not family.name.startswith(prefix):
            continue
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue
            name = sample.name.removeprefix(prefix)
            if name.endswith(("_sum", "_bucket")):
                continue  # durations differ run to run; their count does not
            labels = tuple(sorted((k, v) for k, v in sample.labels.items() if k != "app_name"))
            out[name, labels] = sample.value
    return out


def _drive(app: Litestar) -> None:
    with TestClient(app=app, raise_server_exceptions=False) as client:
        for path in ("/items/1", "/items/2", "/items/3", "/boom", "/metrics-like", "/missing"):
            client.get(path)


def test_request_metrics_match_litestars_prometheus_middleware() -> None:
    theirs = PrometheusConfig(app_name="t", prefix="edgetest_litestar", group_path=True, exclude=["/metrics"])
    ours = PrometheusConfig(app_name="t", prefix="edgetest_advisor", group_path=True, exclude=["/metrics"])
    _drive(Litestar([item, boom, excluded], middleware=[theirs.middleware]))
    _drive(Litestar([item, boom, excluded], middleware=[EdgeMiddleware(metrics=RequestMetrics(ours))]))
    litestar_side, advisor_side = _samples("edgetest_litestar"), _samples("edgetest_advisor")
    assert litestar_side, "Litestar's middleware recorded nothing"
    assert advisor_side == litestar_side
    counted = {labels for (name, labels), value in advisor_side.items() if name == "_requests_total" and value}
    assert (("method", "GET"), ("path", "/items/{item_id}"), ("status_code", "200")) in counted
    assert (("method", "GET"), ("path", "/boom"), ("status_code", "500")) in counted
    assert not any(dict(labels)["path"] == "/metrics-like" for labels in counted)  # excluded, as before


def test_the_edge_adds_security_headers_and_the_request_id_once() -> None:
    app = Litestar([item], middleware=[EdgeMiddleware()])
    with TestClient(app=app) as client:
        response = client.get("/items/7", headers={"X-Request-ID": "trace-7"})
    assert response.headers.get_list("x-request-id") == ["trace-7"]
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]


def test_a_body_chunk_that_never_arrives_is_408(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "BODY_READ_TIMEOUT_S", 0.05)

    async def never() -> Any:
        await asyncio.sleep(3600)

    async def main() -> None:
        with pytest.raises(HTTPException) as caught:
            await limits.timed_receive(never)()
        assert caught.value.status_code == 408

    asyncio.run(main())


def test_a_cancellation_from_elsewhere_is_not_turned_into_408() -> None:
    async def never() -> Any:
        await asyncio.sleep(3600)

    async def main() -> None:
        receive = limits.timed_receive(never)

        async def waiting() -> Any:
            return await receive()

        task: asyncio.Task[Any] = asyncio.create_task(waiting())
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())


def test_the_sqlite_writer_lock_serves_one_event_loop_after_another() -> None:
    class Bound:
        class dialect:  # stands in for session.bind.dialect
            name = "sqlite"

    class Session:
        bind = Bound()

    async def contend() -> int:
        order: list[int] = []

        async def one(i: int) -> None:
            async with batching.writer_lock(Session()):  # type: ignore[arg-type]
                await asyncio.sleep(0)
                order.append(i)

        await asyncio.gather(*(one(i) for i in range(3)))
        return len(order)

    # Contention binds an asyncio.Lock to its loop; a second loop (a second test) must get its own.
    assert asyncio.run(contend()) == 3
    assert asyncio.run(contend()) == 3


def test_new_request_ids_are_unique_random_32_hex_digits_and_new_after_a_fork() -> None:
    import os
    import re

    from advisor.server import middleware

    app = Litestar(route_handlers=[item], middleware=[EdgeMiddleware()])
    with TestClient(app) as client:
        ids = [client.get("/items/1").headers["x-request-id"] for _ in range(50)]
    assert len(set(ids)) == 50
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: a forked worker draws its own ids
        os.close(read)
        os.write(write, middleware._new_request_id().encode())
        os._exit(0)
    os.close(write)
    child = os.read(read, 64).decode()
    os.close(read)
    os.waitpid(pid, 0)
    parent = middleware._new_request_id()
    assert len(child) == 32 and child != parent  # the child drew its own, not the parent's next one
    drawn = [middleware._new_request_id() for _ in range(3 * middleware._ID_BATCH)]
    assert len(set(drawn)) == len(drawn)  # across refills too
    assert len({i[:8] for i in drawn}) > len(drawn) // 2  # random, no shared prefix or counter
