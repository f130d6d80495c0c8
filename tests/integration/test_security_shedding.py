"""Issue #18 item 4: when the write queue is deeper than its bound a submission is answered 503
with Retry-After at once, never queued for tens of seconds; nothing shed is stored."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from advisor.db import batching
from advisor.errors import Overloaded
from tests.integration.test_runs_api import CANONICAL, _counts


def test_the_queue_bound_sheds_at_once() -> None:
    async def scenario() -> tuple[list[Any], float]:
        release = asyncio.Event()

        async def write(items: list[int]) -> list[int | Exception]:
            await release.wait()  # a slow database holds the writer
            return list(items)

        committer: batching.GroupCommitter[int, int] = batching.GroupCommitter(write)
        first = asyncio.create_task(committer.submit(0))
        await asyncio.sleep(0)  # the writer takes item 0 and blocks
        await asyncio.sleep(0)
        waiting = [asyncio.create_task(committer.submit(i)) for i in range(1, batching.MAX_PENDING + 1)]
        await asyncio.sleep(0)
        started = time.monotonic()
        with pytest.raises(Overloaded, match=f"{batching.MAX_PENDING} submissions waiting"):
            await committer.submit(-1)
        elapsed = time.monotonic() - started
        release.set()
        return [await first, *await asyncio.gather(*waiting)], elapsed

    results, elapsed = asyncio.run(scenario())
    assert results == list(range(batching.MAX_PENDING + 1))  # everything queued within the bound is written
    assert elapsed < 0.1


def test_a_shed_submission_is_503_with_retry_after(client: Any, clean_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(batching, "MAX_PENDING", 0)  # every submission finds the queue full
    shed = client.post("/api/v1/runs", json=CANONICAL)
    assert shed.status_code == 503, shed.text
    assert shed.headers["retry-after"] == "5"
    assert shed.json()["type"].endswith("/overloaded")
    assert _counts(clean_db)["run"] == 0
    monkeypatch.setattr(batching, "MAX_PENDING", 512)
    assert client.post("/api/v1/runs", json=CANONICAL).status_code == 201


def test_bulk_requests_beyond_the_concurrency_bound_are_503(
    client: Any, clean_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from advisor.server import limits

    body = json.dumps(CANONICAL) + "\n"
    monkeypatch.setattr(limits, "MAX_CONCURRENT_BULK", 0)  # as if the bound were taken by others
    shed = client.post("/api/v1/runs/bulk", content=body, headers={"content-type": "application/x-ndjson"})
    assert shed.status_code == 503, shed.text
    assert shed.headers["retry-after"] == "5"
    assert client.post("/api/v1/runs", json=CANONICAL).status_code == 201  # single submissions go on
    monkeypatch.setattr(limits, "MAX_CONCURRENT_BULK", 2)
    stored = client.post("/api/v1/runs/bulk", content=body, headers={"content-type": "application/x-ndjson"})
    assert stored.status_code == 200, stored.text
    assert _counts(clean_db)["run"] == 1  # the bulk's run is the one already stored
