"""A bulk load is answered before the background analysis of earlier ones: the analysis waits
between its batches while this process serves a bulk request, then analyses everything."""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker

from advisor.db.models import Run
from advisor.domain.runs import pipeline
from advisor.domain.runs.pipeline import RunPipeline, _Foreground
from advisor.domain.runs.submission import SubmissionRequest
from advisor.errors import AdvisorError
from tests.integration.test_runs_api import CANONICAL


def _array(start: int, n: int) -> bytes:
    runs: list[dict[str, Any]] = []
    for i in range(start, start + n):
        run = copy.deepcopy(CANONICAL)
        run["labels"] = {"i": str(i)}
        run["measured_at"] = f"2026-11-29T08:{i % 60:02d}:00Z"
        runs.append(run)
    return json.dumps(runs).encode()


async def _unanalysed(engine: AsyncEngine) -> int:
    async with engine.connect() as conn:
        return int((await conn.execute(select(func.count(Run.id)).where(Run.verdict.is_(None)))).scalar_one())


async def test_background_analysis_waits_while_a_bulk_load_is_served(engine: AsyncEngine) -> None:
    sessions = async_sessionmaker(engine, expire_on_commit=False)
    foreground = _Foreground.here()
    foreground.enter()  # another bulk request in flight in this process
    try:
        async with sessions() as session:
            # The load itself (without the wrapper that would count it too) schedules its analysis.
            result = await RunPipeline(session)._bulk(
                SubmissionRequest(_array(0, 5), "application/json", "auto", ()), max_runs=100
            )
        assert result.created == 5
        assert pipeline._BACKGROUND, "the analysis is scheduled"
        await asyncio.sleep(0.3)
        assert await _unanalysed(engine) == 5  # and waits while the other load is served
    finally:
        foreground.leave()
    await asyncio.wait_for(asyncio.gather(*pipeline._BACKGROUND), timeout=60)
    assert await _unanalysed(engine) == 0
    assert foreground.bulks == 0
    assert foreground.idle.is_set()


async def test_bulk_marks_the_process_busy_only_while_it_runs(engine: AsyncEngine) -> None:
    sessions = async_sessionmaker(engine, expire_on_commit=False)
    seen: list[int] = []
    original = RunPipeline._bulk

    async def spy(self: RunPipeline, request: SubmissionRequest, *, max_runs: int) -> Any:
        seen.append(_Foreground.here().bulks)
        return await original(self, request, max_runs=max_runs)

    RunPipeline._bulk = spy  # type: ignore[method-assign]
    try:
        async with sessions() as session:
            await RunPipeline(session).bulk(
                SubmissionRequest(_array(100, 2), "application/json", "auto", ()), max_runs=10
            )
            bad = SubmissionRequest(b"[{", "application/json", "auto", ())
            with pytest.raises(AdvisorError):
                await RunPipeline(session).bulk(bad, max_runs=10)
    finally:
        RunPipeline._bulk = original  # type: ignore[method-assign]
    assert seen == [1, 1]
    assert _Foreground.here().bulks == 0
    assert _Foreground.here().idle.is_set()
