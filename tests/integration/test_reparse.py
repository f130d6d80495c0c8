"""`advisor runs reparse`: runs are re-derived from their raw payloads and stored context."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

from advisor.domain.runs.reparse import ReparseService

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ingest"


async def _reparse(url: str, **kwargs: Any) -> Any:
    engine = create_async_engine(url)
    try:
        async with async_sessionmaker(engine, expire_on_commit=False)() as session:
            return await ReparseService(session).reparse(**kwargs)
    finally:
        await engine.dispose()


async def _exec(url: str, sql: str, **params: Any) -> Any:
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            result = await conn.execute(text(sql), params)
            return result.all() if result.returns_rows else None
    finally:
        await engine.dispose()


def test_reparse_restores_a_run_a_buggy_parser_damaged(client: Any, clean_db: str) -> None:
    data = (FIXTURES / "vllm_bench" / "vllm_bench_serve.json").read_bytes()
    created = client.post("/api/v1/runs?hardware=nvidia-h100-sxm&deployment=chat", content=data)
    assert created.status_code == 201, created.text
    run = created.json()["run"]

    unchanged = asyncio.run(_reparse(clean_db))
    assert (unchanged.checked, unchanged.changed, unchanged.unchanged) == (1, [], 1)

    # Simulate what an old parser bug would have stored: a wrong p99 and a stale hash.
    asyncio.run(_exec(clean_db, "UPDATE run SET content_hash = 'stale', ttft_p99_ms = 1 WHERE id = :id", id=run["id"]))
    preview = asyncio.run(_reparse(clean_db, dry_run=True))
    assert preview.changed == [run["id"]], preview
    assert asyncio.run(_exec(clean_db, "SELECT content_hash FROM run"))[0][0] == "stale"

    report = asyncio.run(_reparse(clean_db))
    assert report.changed == [run["id"]]
    rows = asyncio.run(_exec(clean_db, "SELECT content_hash, ttft_p99_ms, hardware_id FROM run"))
    assert rows[0][0] == run["content_hash"]
    assert rows[0][1] == pytest.approx(run["metrics"]["ttft_ms"]["p99"])
    assert rows[0][2] == "nvidia-h100-sxm"  # the submission context is kept and re-applied


def test_reparse_bulk_runs_use_their_own_item(client: Any, clean_db: str) -> None:
    doc = json.loads((FIXTURES / "canonical" / "edge-canonical-run-design-example.json").read_text())
    items = []
    for i in range(3):
        item = json.loads(json.dumps(doc))
        item["measured_at"] = f"2026-11-0{i + 1}T00:00:00Z"
        items.append(json.dumps(item))
    assert client.post("/api/v1/runs/bulk", content="\n".join(items).encode()).json()["created"] == 3
    report = asyncio.run(_reparse(clean_db))
    assert report.checked == 3
    assert report.unchanged == 3, report.failed
