"""The fit's training data: the fleet's runs aggregated in SQL, on SQLite and Postgres."""

from __future__ import annotations

import asyncio
import hashlib
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import insert
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

from advisor.db.models import Deployment, Run
from advisor.domain.models.services import fleet_cells
from advisor.ml.dataset import FleetCell

_counter = iter(range(1_000_000))


def _run(**columns: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "content_hash": hashlib.sha256(f"cell-{next(_counter)}".encode()).hexdigest(),
        "measured_at": datetime(2026, 11, 1, tzinfo=UTC),
        "runtime": "vllm",
        "hardware_id": "nvidia-a10g",
        "model_id": "llama-3.1-8b",
        "quantization_id": "f16-bf16",
        "tensor_parallel": 1,
        "gpu_count": 1,
        "prompt_tokens_mean": 2048.0,
        "output_tokens_mean": 256.0,
        "concurrency": 4.0,
        "deployment_id": 1,
        "setup": {}, "workload": {}, "metrics": {}, "labels": {}, "source": {}, "analysis": {},
    }  # fmt: skip
    base.update(columns)
    return base


def _cells(url: str, rows: list[dict[str, Any]]) -> list[FleetCell]:
    keys = set().union(*rows)  # one executemany: every row names every column
    rows = [{key: row.get(key) for key in keys} for row in rows]

    async def run() -> list[FleetCell]:
        engine = create_async_engine(url)
        try:
            async with engine.begin() as conn:
                await conn.execute(insert(Deployment), [{"name": "chat-prod", "slo": {}}])
                await conn.execute(insert(Run), rows)
            async with async_sessionmaker(engine)() as session:
                return await fleet_cells(session)
        finally:
            await engine.dispose()

    return asyncio.run(run())


def test_runs_of_one_setup_and_workload_average_into_one_cell(clean_db: str) -> None:
    cells = _cells(
        clean_db,
        [
            _run(prompt_tokens_mean=2047.6, decode_tok_s=30.0, ttft_p50_ms=200.0, itl_p99_ms=40.0),
            _run(prompt_tokens_mean=2051.2, decode_tok_s=32.0, ttft_p50_ms=220.0, itl_p99_ms=44.0),
            _run(prompt_tokens_mean=2049.0, tpot_mean_ms=1000.0 / 34.0),  # decode from TPOT
        ],
    )
    assert len(cells) == 1
    cell = cells[0]
    assert cell.runs == 3 and cell.source == "deployment:1"
    assert cell.prompt_tokens == pytest.approx((2047.6 + 2051.2 + 2049.0) / 3)
    assert cell.decode_tok_s == pytest.approx(32.0)
    assert cell.ttft_p50_ms == pytest.approx(210.0) and cell.itl_p99_ms == pytest.approx(42.0)
    assert cell.prefill_tok_s is None and cell.ttft_p99_ms is None
    assert (cell.hardware_id, cell.model_id, cell.quantization_id, cell.runtime) == (
        "nvidia-a10g", "llama-3.1-8b", "f16-bf16", "vllm",
    )  # fmt: skip


def test_what_separates_cells_and_what_is_left_out(clean_db: str) -> None:
    cells = _cells(
        clean_db,
        [
            _run(decode_tok_s=30.0),
            _run(prompt_tokens_mean=1024.0, decode_tok_s=31.0),  # another workload bucket
            _run(concurrency=16.0, decode_tok_s=20.0),  # another concurrency
            _run(runtime="sglang", decode_tok_s=33.0),  # another runtime
            _run(hardware_id=None, decode_tok_s=50.0),  # an inline device: no catalog id
            _run(gpu_count=2, tensor_parallel=1, decode_tok_s=29.0),  # split over GPUs without TP
            _run(concurrency=None, num_requests=200, decode_tok_s=25.0, prompt_tokens_mean=700.0),
            _run(prompt_tokens_mean=300.0, ttft_p50_ms=90.0, prefix_cache_hit_rate=0.6),  # cached TTFT
        ],
    )
    by_key = {(c.runtime, round(c.prompt_tokens or 0), round(c.concurrency or 0)): c for c in cells}
    assert set(by_key) == {
        ("vllm", 2048, 4), ("vllm", 1024, 4), ("vllm", 2048, 16), ("sglang", 2048, 4), ("vllm", 700, 0),
        ("vllm", 300, 4),
    }  # fmt: skip
    assert by_key["vllm", 2048, 4].runs == 1  # the GPU-split run is not in it
    # decode needs the concurrency (the ceiling depends on the batch): unknown here
    assert by_key["vllm", 700, 0].decode_tok_s is None
    # a TTFT measured through the prefix cache says nothing about prefill
    assert by_key["vllm", 300, 4].ttft_p50_ms is None


def test_running_mean_wins_over_offered_concurrency(clean_db: str) -> None:
    cells = _cells(
        clean_db,
        [_run(concurrency=64.0, running_mean=22.0, decode_tok_s=18.0), _run(concurrency=64.0, running_mean=26.0)],
    )
    assert len(cells) == 1 and cells[0].concurrency == pytest.approx(24.0)


def test_cells_read_over_several_partitions_are_all_there(clean_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The aggregate is read a partition of _FETCH_ROWS rows at a time: with two rows a partition,
    # five cells span three partitions, and every cell comes back once, in the query's order.
    from advisor.domain.models import services

    monkeypatch.setattr(services, "_FETCH_ROWS", 2)
    prompts = [256.0, 512.0, 1024.0, 2048.0, 4096.0]
    cells = _cells(clean_db, [_run(prompt_tokens_mean=p, decode_tok_s=p / 100.0) for p in prompts])
    assert [c.prompt_tokens for c in cells] == pytest.approx(prompts)
    assert [c.decode_tok_s for c in cells] == pytest.approx([p / 100.0 for p in prompts])
    assert all(c.runs == 1 for c in cells)
