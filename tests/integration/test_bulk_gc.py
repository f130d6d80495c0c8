"""A bulk load holds the cyclic garbage collector off while it runs (its million short-lived
objects would otherwise trigger dozens of full walks), and always turns it back on: after a
success, after a refusal, and only when the last of two concurrent loads ends."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from advisor.domain.runs import pipeline
from advisor.domain.runs.pipeline import RunPipeline
from advisor.domain.runs.submission import SubmissionRequest
from advisor.errors import InvalidInput

REQUEST = SubmissionRequest(b"[]", "application/json", "auto", ())


async def test_the_collector_is_off_during_a_bulk_load_and_on_after(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []

    async def fake(self: RunPipeline, request: SubmissionRequest, *, max_runs: int) -> Any:
        seen.append(gc.isenabled())
        await asyncio.sleep(0)
        return "done"

    monkeypatch.setattr(RunPipeline, "_bulk", fake)
    assert gc.isenabled()
    result: Any = await RunPipeline().bulk(REQUEST, max_runs=10)
    assert result == "done"
    assert seen == [False]
    assert gc.isenabled()


async def test_a_refused_bulk_load_turns_it_back_on(monkeypatch: pytest.MonkeyPatch) -> None:
    async def refuse(self: RunPipeline, request: SubmissionRequest, *, max_runs: int) -> Any:
        raise InvalidInput("no", field="body")

    monkeypatch.setattr(RunPipeline, "_bulk", refuse)
    with pytest.raises(InvalidInput):
        await RunPipeline().bulk(REQUEST, max_runs=10)
    assert gc.isenabled()


async def test_two_concurrent_loads_share_the_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    first_done = asyncio.Event()
    states: list[bool] = []

    async def slow(self: RunPipeline, request: SubmissionRequest, *, max_runs: int) -> Any:
        if max_runs == 1:
            first_done.set()
            return 1
        await first_done.wait()
        states.append(gc.isenabled())  # the first load has ended; this one still holds the pause
        return 2

    monkeypatch.setattr(RunPipeline, "_bulk", slow)
    results: Any = await asyncio.gather(
        RunPipeline().bulk(REQUEST, max_runs=2), RunPipeline().bulk(REQUEST, max_runs=1)
    )
    assert list(results) == [2, 1]
    assert states == [False]
    assert gc.isenabled()
    assert pipeline._GC_PAUSE["holders"] == 0


def test_a_collector_turned_off_before_stays_off() -> None:
    gc.disable()
    try:
        with pipeline._collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
