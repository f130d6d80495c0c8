"""The store's driver-level inserts (one executemany of the driver on SQLite, COPY on Postgres)
store exactly what SQLAlchemy's ``connection.execute(insert(table), rows)`` stores: every column of
every row, the JSON documents and timestamps included, and the ids come back in row order."""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import pytest
from sqlalchemy import Connection, insert, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from advisor.canonical import decode_run
from advisor.catalog import Catalog
from advisor.db.batching import sqlite_writer
from advisor.domain.runs import store
from advisor.domain.runs.analysis import analyse_run
from advisor.domain.runs.resolution import resolve_run
from advisor.ingest.submission import context_layer
from bench._common import canonical_run

T = TypeVar("T")
NOW = datetime(2026, 5, 1, 12, 30, 15, 123456, tzinfo=UTC)


def _rows(n: int, tag: str) -> tuple[list[dict[str, Any]], list[list[dict[str, Any]]]]:
    """Run rows and their recommendation rows, as the pipeline builds them."""
    rng = random.Random(11)
    catalog = Catalog.default()
    runs, recs = [], []
    for i in range(n):
        doc = canonical_run(i, rng)
        doc["labels"]["tag"] = tag
        resolved = resolve_run(decode_run(doc), context_layer({}, "query"), catalog, from_file=False)
        analysis = analyse_run(resolved, slo=None, baseline=[], catalog=catalog)
        values = store.run_values(resolved) | store.analysis_values(analysis)
        values.update(
            idempotency_key=f"{tag}-{i}" if i % 2 else None,
            context={"format": "canonical", "nested": {"a": [1, 2.5, None]}},
            submitted_by=None,
            source_index=i,
            deployment_id=None,
            raw_payload_id=None,
            created_at=NOW,
            updated_at=NOW,
        )
        runs.append(values)
        recs.append(store.recommendation_rows(analysis))
    return runs, recs


async def _on(engine: AsyncEngine, fn: Callable[[Connection], T]) -> T:
    """``fn`` in a transaction the way the store runs it: SQLite's writer thread, Postgres's session."""
    if engine.dialect.name == "sqlite":
        return await sqlite_writer(engine).run(fn)
    async with engine.begin() as conn:
        await conn.execute(text("SELECT 1"))  # the transaction is open, as after a batch's reads
        return await conn.run_sync(fn)


def _stored(connection: Connection, table: Any, ids: list[int]) -> list[dict[str, Any]]:
    """The rows as the database returns them (SQLite: the raw stored text of JSON and timestamps)."""
    if connection.dialect.name == "sqlite":
        marks = ", ".join("?" for _ in ids)
        result = connection.exec_driver_sql(f"SELECT * FROM {table.name} WHERE id IN ({marks}) ORDER BY id", tuple(ids))
    else:
        result = connection.execute(select(table).where(table.c.id.in_(ids)).order_by(table.c.id))
    return [dict(row._mapping) for row in result]


def _without(row: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in keys}


@pytest.mark.parametrize("n", [1, 3, 250])
async def test_driver_inserts_store_what_sqlalchemy_stores(engine: AsyncEngine, n: int) -> None:
    reference, reference_recs = _rows(n, "sqlalchemy")
    driven, driven_recs = _rows(n, "driver")

    def write(connection: Connection) -> tuple[list[dict[str, Any]], ...]:
        # The reference: SQLAlchemy's own INSERT, one row at a time (what it does on SQLite anyway).
        returning = insert(store.RUN_TABLE).returning(store.RUN_TABLE.c.id)
        ref_ids = [int(connection.execute(returning, [row]).scalar_one()) for row in reference]
        new_ids = store._insert_runs(connection, driven)
        ref_recs: list[dict[str, Any]] = []
        new_recs: list[dict[str, Any]] = []
        for run_id, ref_id, ref_group, new_group in zip(new_ids, ref_ids, reference_recs, driven_recs, strict=True):
            ref_recs.extend({**v, "run_id": ref_id, "created_at": NOW, "updated_at": NOW} for v in ref_group)
            new_recs.extend({**v, "run_id": run_id, "created_at": NOW, "updated_at": NOW} for v in new_group)
        ref_rec_ids = [
            connection.execute(insert(store.REC_TABLE).returning(store.REC_TABLE.c.id), [r]).scalar_one()
            for r in ref_recs
        ]
        new_rec_ids = store._insert_recommendations(connection, new_recs)
        return (
            _stored(connection, store.RUN_TABLE, ref_ids),
            _stored(connection, store.RUN_TABLE, new_ids),
            [{"ids": new_ids, "hashes": [r["content_hash"] for r in driven]}],
            _stored(connection, store.REC_TABLE, ref_rec_ids),
            _stored(connection, store.REC_TABLE, new_rec_ids),
            [{"rec_ids": new_rec_ids, "keys": [(r["run_id"], r["rank"]) for r in new_recs]}],
        )

    ref_rows, new_rows, order, ref_rec_rows, new_rec_rows, rec_order = await _on(engine, write)
    by_id = {row["id"]: row for row in new_rows}
    # ids in row order: each id is the row with that content hash
    assert [by_id[i]["content_hash"] for i in order[0]["ids"]] == order[0]["hashes"]
    varying = ("id", "content_hash", "labels", "idempotency_key")
    assert len(ref_rows) == len(new_rows) == n
    for ref, new in zip(ref_rows, new_rows, strict=True):
        assert _without(new, *varying) == _without(ref, *varying)
        assert (new["idempotency_key"] is None) == (ref["idempotency_key"] is None)
    rec_by_id = {row["id"]: row for row in new_rec_rows}
    assert [(rec_by_id[i]["run_id"], rec_by_id[i]["rank"]) for i in rec_order[0]["rec_ids"]] == rec_order[0]["keys"]
    assert len(ref_rec_rows) == len(new_rec_rows) > 0
    for ref, new in zip(ref_rec_rows, new_rec_rows, strict=True):
        assert _without(new, "id", "run_id") == _without(ref, "id", "run_id")
        assert new["status"] == "open"  # a scalar default the rows leave out


@pytest.mark.postgres_only  # COPY is Postgres's
async def test_copy_is_used_for_a_bulk_load_on_postgres(engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    rows, _ = _rows(store.COPY_MIN_ROWS, "copy")
    copied: list[int] = []
    real = store._copy_rows

    def spy(connection: Connection, table: Any, group: list[dict[str, Any]]) -> bool:
        done = real(connection, table, group)
        copied.append(len(group) if done else 0)
        return done

    monkeypatch.setattr(store, "_copy_rows", spy)
    ids = await _on(engine, lambda c: store._insert_runs(c, rows))
    assert copied == [len(rows)]
    assert len(set(ids)) == len(rows)


def test_driver_rows_refuse_unknown_columns() -> None:
    from sqlalchemy.dialects import sqlite

    with pytest.raises(ValueError, match="no columns"):
        store._DriverRows(store.RUN_TABLE, ("content_hash", "nonsense"), sqlite.dialect())
