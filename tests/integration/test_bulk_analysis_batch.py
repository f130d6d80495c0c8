"""The background analysis of bulk-loaded runs reads its baselines per batch (two queries per cell)
and writes its updates with one statement each (issue #19's bulk rate). What each run gets must be
what the per-run path gives it: the same baseline runs, the same verdict and recommendations. And
the one-pass decode of a canonical bulk body stores what the item-by-item path stores."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker

from advisor.db.models import Recommendation, Run
from advisor.domain.runs.pipeline import RunPipeline, _cell_values
from advisor.domain.runs.submission import SubmissionRequest
from advisor.rules.context import baseline_point
from bench._common import canonical_run

EPOCH = datetime(2026, 3, 1, tzinfo=UTC)


def _runs(n: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    minutes = rng.sample(range(100_000), n)  # distinct times in random order: no ties to order
    runs = []
    for i, minute in enumerate(minutes):
        run = canonical_run(i, rng)
        run["deployment"] = f"batch-{i % 3}"  # three deployments, each on one hardware: three cells
        run["measured_at"] = (EPOCH + timedelta(minutes=minute)).isoformat()
        runs.append(run)
    return runs


async def _bulk(engine: AsyncEngine, body: bytes) -> list[int]:
    async with async_sessionmaker(engine, expire_on_commit=False)() as session:
        pipeline = RunPipeline(session)
        pipeline.schedule_pending_analysis = lambda: None  # type: ignore[method-assign]  # analysed below
        result = await pipeline.bulk(SubmissionRequest(body, "application/json", "auto", ()), max_runs=10_000)
        return list(result.run_ids)


async def test_batch_baselines_are_the_per_run_baselines(engine: AsyncEngine) -> None:
    await _bulk(engine, json.dumps(_runs(150, seed=3)).encode())
    async with async_sessionmaker(engine, expire_on_commit=False)() as session:
        pipeline = RunPipeline(session)
        rows = list((await session.execute(select(Run).order_by(Run.measured_at))).scalars())
        batch = rows[40:120]  # a batch from the middle: runs before it and after it exist
        prepared = [(row, await pipeline._resolved_row(row)) for row in batch]
        baselines = await pipeline.batch_baselines(prepared)
        assert set(baselines) == {row.id for row in batch}
        for row, resolved in prepared:
            single = await pipeline.runs.baseline(
                row.id, deployment_id=row.deployment_id, values=_cell_values(resolved)
            )
            want = [baseline_point(run) for run in single]
            got = baselines[row.id]
            assert [(p.measured_at, dict(p.values)) for p in got] == [(p.measured_at, dict(p.values)) for p in want]
        assert any(len(b) == 20 for b in baselines.values())  # the full baseline, not only the batch's runs


async def test_batched_analysis_stores_what_the_per_run_analysis_gives(engine: AsyncEngine) -> None:
    runs = _runs(120, seed=5)
    for run in runs[::7]:
        run["metrics"]["decode_tok_s"] = run["metrics"]["decode_tok_s"] * 0.5  # regressions to find
    await _bulk(engine, json.dumps(runs).encode())
    sessions = async_sessionmaker(engine, expire_on_commit=False)
    async with sessions() as session:
        assert await RunPipeline(session).analyse_pending(batch=50) == 120
    async with sessions() as session:
        pipeline = RunPipeline(session)
        rows = list((await session.execute(select(Run).order_by(Run.id))).scalars())
        assert all(row.verdict is not None for row in rows)
        stored = {
            run_id: rule_ids
            for run_id, rule_ids in _group(
                (
                    await session.execute(select(Recommendation.run_id, Recommendation.rule_id, Recommendation.rank))
                ).all()
            ).items()
        }
        verdicts = set()
        for row in rows:
            fresh = await pipeline.analyse(await pipeline._resolved_row(row), row.deployment, None, exclude=row.id)
            assert row.verdict == fresh.verdict, row.id
            assert stored.get(row.id, []) == [r.rule_id for r in fresh.recommendations], row.id
            verdicts.add(row.verdict)
        assert len(verdicts) > 1  # the comparison saw more than one kind of answer


def _group(rows: Any) -> dict[int, list[str]]:
    out: dict[int, list[tuple[int, str]]] = {}
    for run_id, rule_id, rank in rows:
        out.setdefault(run_id, []).append((rank, rule_id))
    return {k: [rule for _, rule in sorted(v)] for k, v in out.items()}


async def test_a_canonical_bulk_stores_what_the_item_by_item_path_stores(engine: AsyncEngine) -> None:
    runs = _runs(30, seed=11)
    fast = await _bulk(engine, json.dumps(runs[:15]).encode())
    # A wrapper item among them sends the whole body down the item-by-item path.
    wrapper = {"context": {"deployment": "batch-0"}, "run": runs[15]}
    slow = await _bulk(engine, json.dumps([wrapper, *runs[16:], *runs[:15]]).encode())
    assert len(fast) == 15 and len(slow) == 15  # the first 15 were stored already
    async with async_sessionmaker(engine, expire_on_commit=False)() as session:
        rows = {r.source_index: r for r in (await session.execute(select(Run).where(Run.id.in_(fast)))).scalars()}
        again = {r.source_index: r for r in (await session.execute(select(Run).where(Run.id.in_(slow)))).scalars()}
    assert sorted(rows) == list(range(15))
    # The same documents and typed columns, whichever path decoded them (the slow body's runs
    # 16..29 are compared with what the fast path gives the same runs in a body of their own).
    fast_again = await _bulk(engine, json.dumps(runs[16:]).encode())
    assert fast_again == []  # stored by the slow body: the same content hashes
    for row in again.values():
        assert row.context["format"] == "canonical" and row.source["format"] == "canonical"
    for row in rows.values():
        assert row.context["format"] == "canonical" and row.source["format"] == "canonical"
        assert row.labels == runs[row.source_index]["labels"]
