"""A batch's reads (:func:`advisor.domain.runs.store.read_batch`): which content hashes are stored
and the named deployments' ids and SLOs. On Postgres both come from one statement when the batch
names deployments; the answer is the one the two separate reads give."""

from __future__ import annotations

import functools
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from advisor.domain.runs import store
from tests.unit.db.test_driver_rows import _on, _rows


async def test_read_batch_finds_stored_hashes_and_named_deployments(engine: AsyncEngine) -> None:
    runs, _ = _rows(3, "batch-reads")
    hashes = [row["content_hash"] for row in runs]
    for row in runs:
        row.pop("deployment_id")
        row.pop("raw_payload_id")
    plan = store.WritePlan(
        deployment_ids={},
        new_deployments=[
            store.NewDeployment("reads-a", "vllm", {"ttft_p99_ms": 500.0}),
            store.NewDeployment("reads-b", None, {}),
        ],
        raws=[(b'{"a": 1}', "application/json", None, "canonical")],
        runs=runs[:2],  # the third stays unstored
        run_deployments=["reads-a", None],
        run_raws=[0, 0],
        recommendations=[[], []],
    )
    written = await _on(engine, functools.partial(store.write_plan, plan=plan))
    names = ["reads-a", "reads-b", "reads-missing"]

    statements: list[str] = []

    def count(*args: Any) -> None:
        statements.append(args[2])

    event.listen(engine.sync_engine, "before_cursor_execute", count)
    try:
        both = await _on(engine, functools.partial(store.read_batch, hashes=hashes, names=names))
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", count)
    if engine.dialect.name == "postgresql":  # (SQLite's reads run on the writer thread's own engine)
        assert len([s for s in statements if "FROM" in s.upper()]) == 1  # _on also sends SELECT 1
    only_hashes = await _on(engine, functools.partial(store.read_batch, hashes=hashes, names=[]))
    only_names = await _on(engine, functools.partial(store.read_batch, hashes=[], names=names))

    assert both.known_hashes == set(hashes[:2]) == only_hashes.known_hashes
    assert only_names.known_hashes == set()
    assert both.deployments == {
        "reads-a": (written.deployment_ids["reads-a"], {"ttft_p99_ms": 500.0}),
        "reads-b": (written.deployment_ids["reads-b"], {}),
    }
    assert both.deployments == only_names.deployments
    assert only_hashes.deployments == {}
    assert all(isinstance(ident, int) for ident, _ in both.deployments.values())


async def test_read_batch_of_nothing_stored(engine: AsyncEngine) -> None:
    reads = await _on(engine, functools.partial(store.read_batch, hashes=["0" * 64], names=["nobody"]))
    assert reads.known_hashes == set()
    assert reads.deployments == {}


async def test_read_batch_of_a_deployment_without_slo(engine: AsyncEngine) -> None:
    """A deployment whose SLO document is JSON null or SQL NULL reads as no SLO ({}), as before."""
    plan = store.WritePlan(
        deployment_ids={},
        new_deployments=[store.NewDeployment("reads-null", None, None)],  # type: ignore[arg-type]
    )
    written = await _on(engine, functools.partial(store.write_plan, plan=plan))
    reads = await _on(engine, functools.partial(store.read_batch, hashes=[], names=["reads-null"]))
    assert reads.deployments == {"reads-null": (written.deployment_ids["reads-null"], {})}

    def null_slo(connection: Any) -> None:
        connection.execute(store.DEPLOYMENT_TABLE.update().values(slo=None))

    await _on(engine, null_slo)
    reads = await _on(engine, functools.partial(store.read_batch, hashes=[], names=["reads-null"]))
    assert reads.deployments == {"reads-null": (written.deployment_ids["reads-null"], {})}
