"""Raw payloads (:func:`advisor.domain.runs.store.insert_raw_payloads`): deduplicated by SHA-256,
their ids in the given order, stored as SQLAlchemy's own ``INSERT`` stores them. On SQLite they go
by one executemany of the driver and one read of the ids (session 6 of issue 19); the answer is the
one the ``INSERT … RETURNING`` path gives on Postgres."""

from __future__ import annotations

import hashlib
import zlib
from typing import Any

from sqlalchemy import Connection, insert
from sqlalchemy.ext.asyncio import AsyncEngine

from advisor.domain.runs import store
from tests.unit.db.test_driver_rows import NOW, _on, _stored, _without


def _payload(i: int) -> tuple[bytes, str | None, str | None, str | None]:
    return (b'{"run": %d, "pad": "%s"}' % (i, b"x" * (i % 7)), "application/json", f"f{i}.json", "canonical")


async def test_raw_payloads_are_stored_once_with_their_ids_in_order(engine: AsyncEngine) -> None:
    first = [_payload(0), _payload(1), _payload(0)]  # the same bytes twice in one call: one row
    second = [_payload(2), _payload(1), _payload(3)]  # _payload(1) was stored by the first call

    def write(connection: Connection) -> tuple[list[int], list[int], list[dict[str, Any]]]:
        a = store.insert_raw_payloads(connection, first)
        b = store.insert_raw_payloads(connection, second)
        return a, b, _stored(connection, store.RAW_TABLE, sorted({*a, *b}))

    ids_a, ids_b, rows = await _on(engine, write)
    assert ids_a[0] == ids_a[2] != ids_a[1]
    assert ids_b[1] == ids_a[1]
    assert len({*ids_a, *ids_b}) == 4 == len(rows)
    by_id = {row["id"]: row for row in rows}
    for ident, (data, content_type, _file_name, format_id) in zip([*ids_a, *ids_b], [*first, *second], strict=True):
        row = by_id[ident]
        assert row["sha256"] == hashlib.sha256(data).hexdigest()
        assert zlib.decompress(row["data"]) == data
        assert (row["content_type"], row["format"], row["size"], row["encoding"]) == (
            content_type,
            format_id,
            len(data),
            "zlib",
        )
    # the first file name that came with the bytes is kept
    assert by_id[ids_a[0]]["file_name"] == "f0.json"


async def test_raw_payload_rows_match_sqlalchemys_insert(engine: AsyncEngine) -> None:
    data = b'{"same": "document"}'

    def write(connection: Connection) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        (new_id,) = store.insert_raw_payloads(connection, [(data, "application/json", "a.json", "canonical")])
        new = _stored(connection, store.RAW_TABLE, [new_id])
        reference = {
            **_without(new[0], "id", "created_at", "updated_at"),
            "sha256": "0" * 64,  # another digest: the unique index would refuse the same one
            "created_at": NOW,
            "updated_at": NOW,
        }
        reference["data"] = bytes(reference["data"])
        ref_id = connection.execute(insert(store.RAW_TABLE).returning(store.RAW_TABLE.c.id), [reference]).scalar_one()
        return new, _stored(connection, store.RAW_TABLE, [int(ref_id)])

    new, ref = await _on(engine, write)
    varying = ("id", "sha256", "created_at", "updated_at")
    assert _without(new[0], *varying) == _without(ref[0], *varying)
    assert type(new[0]["created_at"]) is type(ref[0]["created_at"])  # the same stored form (SQLite: text)


async def test_ids_of_more_payloads_than_one_statement_reads(engine: AsyncEngine) -> None:
    payloads = [_payload(i) for i in range(1_100)]  # three reads of at most 500 on SQLite

    def write(connection: Connection) -> tuple[list[int], list[int]]:
        ids = store.insert_raw_payloads(connection, payloads)
        again = store.insert_raw_payloads(connection, list(reversed(payloads)))
        return ids, again

    ids, again = await _on(engine, write)
    assert len(set(ids)) == len(payloads)
    assert again == list(reversed(ids))
