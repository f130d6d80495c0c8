"""A batch's inserts on Postgres go by asyncpg directly (multi-row ``INSERT … VALUES … RETURNING``
on the transaction's connection, session 6 of issue 19): the rows stored are SQLAlchemy's
(``test_driver_rows.py`` compares them column by column), a duplicate is SQLAlchemy's
``IntegrityError`` (which the group committer's race handling looks for), and without an open
transaction the statement is not sent on its own."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Connection
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from advisor.domain.runs import store
from advisor.domain.runs.services import is_integrity_error
from tests.unit.db.test_driver_rows import NOW, _on, _rows

# asyncpg's path is Postgres's: the SQLite parameter is not collected (tests/conftest.py).
pytestmark = pytest.mark.postgres_only


async def test_a_batch_goes_by_asyncpg(engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    runs, recs = _rows(3, "asyncpg")
    used: list[str] = []
    real = store._pg_insert_returning

    def spy(connection: Connection, table: Any, rows: list[dict[str, Any]], *args: Any, **kwargs: Any) -> Any:
        out = real(connection, table, rows, *args, **kwargs)
        used.append(table.name if out is not None else f"{table.name}: fallback")
        return out

    monkeypatch.setattr(store, "_pg_insert_returning", spy)

    def write(connection: Connection) -> tuple[list[int], list[int]]:
        (raw_id,) = store.insert_raw_payloads(connection, [(b"{}", "application/json", None, "canonical")])
        for row in runs:
            row["raw_payload_id"] = raw_id
        run_ids = store._insert_runs(connection, runs)
        rows = [
            {**v, "run_id": run_id, "created_at": NOW, "updated_at": NOW}
            for run_id, group in zip(run_ids, recs, strict=True)
            for v in group
        ]
        return run_ids, store._insert_recommendations(connection, rows)

    run_ids, rec_ids = await _on(engine, write)
    assert used == ["raw_payload", "run", "recommendation"]
    assert len(set(run_ids)) == 3
    assert len(set(rec_ids)) == sum(len(g) for g in recs) > 0


async def test_a_duplicate_run_is_an_integrity_error(engine: AsyncEngine) -> None:
    runs, _ = _rows(1, "duplicate")

    def write(connection: Connection) -> None:
        store._insert_runs(connection, [dict(runs[0])])
        store._insert_runs(connection, [dict(runs[0])])  # the same content hash

    with pytest.raises(IntegrityError) as caught:
        await _on(engine, write)
    assert is_integrity_error(caught.value)


async def test_no_statement_outside_a_transaction(engine: AsyncEngine) -> None:
    runs, _ = _rows(1, "no-transaction")
    async with engine.connect() as conn:
        raw = await conn.get_raw_connection()
        assert not raw.driver_connection.is_in_transaction()  # nothing sent yet: SQLAlchemy begins lazily
        inserted = await conn.run_sync(lambda c: store._pg_insert_returning(c, store.RUN_TABLE, runs, ("id",)))
        assert inserted is None
        await conn.rollback()


async def test_rows_beyond_a_statements_parameters_go_in_several(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs, _ = _rows(5, "chunks")
    width = len(store._driver_rows(store.RUN_TABLE, tuple(runs[0]), engine.dialect).columns)
    monkeypatch.setattr(store, "_PG_MAX_PARAMS", 2 * width - 1)  # fewer than two rows' worth per statement
    sent: list[str] = []
    real = store._pg_values_sql

    def spy(*args: Any) -> str:
        sent.append(real(*args))
        return sent[-1]

    monkeypatch.setattr(store, "_pg_values_sql", spy)
    ids = await _on(engine, lambda c: store._insert_runs(c, runs))
    assert len(sent) == 5  # one row each
    assert len(set(ids)) == 5
    hashes = await _on(
        engine,
        lambda c: dict(
            c.execute(
                store.RUN_TABLE.select().with_only_columns(store.RUN_TABLE.c.id, store.RUN_TABLE.c.content_hash)
            ).all()
        ),
    )
    assert [hashes[i] for i in ids] == [row["content_hash"] for row in runs]
