"""The store: the one writer of runs, their raw payloads, deployments and recommendations.

Every write — a batch of submissions, a bulk load, a re-analysis, a reparse — is a :class:`WritePlan`
of finished rows (the analysis happened before), executed by :func:`write_plan` as plain Core
statements on one synchronous connection. Written as a synchronous function so it can run where it
is cheapest:

* on SQLite, in one hand-off to a thread that owns a synchronous pysqlite connection to the same
  file (:func:`advisor.db.batching.sqlite_writer`). Through aiosqlite, every cursor call (open,
  execute, fetch, close) is a separate hand-off between the event loop and aiosqlite's thread, and
  those hand-offs cost more than the statements they carry;
* on Postgres, through ``AsyncConnection.run_sync`` in the request's own transaction.

A batch costs the same few statements whatever its size: on Postgres a multi-row INSERT …
RETURNING per table (SQLAlchemy's "insertmanyvalues"), and COPY for a bulk load's runs; on SQLite,
where SQLAlchemy would send one INSERT per row, one executemany of the driver per table
(:class:`_DriverRows`) and the ids read back by a unique key.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import operator
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

import msgspec
from sqlalchemy import (
    Connection,
    Float,
    String,
    Table,
    any_,
    bindparam,
    delete,
    insert,
    literal_column,
    null,
    select,
    union_all,
    update,
)
from sqlalchemy import cast as cast_
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import IntegrityError
from sqlalchemy.util import await_only

from advisor.canonical import run_to_builtins
from advisor.db.models import METRIC_COLUMNS, Deployment, RawPayload, Recommendation, Run
from advisor.domain.recommendations import recommendation_values
from advisor.domain.runs.analysis import RunAnalysis
from advisor.domain.runs.resolution import ResolvedRun

__all__ = [
    "BatchReads", "BulkChunk", "NewDeployment", "RunUpdate", "WritePlan", "Written", "analysis_values",
    "bulk_chunk_prepare", "copy_run_rows", "insert_raw_payloads", "read_batch", "recommendation_rows",
    "run_ids_by_hash", "run_values", "write_plan",
]  # fmt: skip

RUN_TABLE = cast("Table", Run.__table__)
REC_TABLE = cast("Table", Recommendation.__table__)
RAW_TABLE = cast("Table", RawPayload.__table__)
DEPLOYMENT_TABLE = cast("Table", Deployment.__table__)


@dataclass
class NewDeployment:
    name: str
    runtime: str | None
    slo: dict[str, Any]


# attrgetter walks the structs in C; run_values runs for every ingested run.
_METRIC_GETTERS = tuple((column, operator.attrgetter(dotted)) for column, dotted in METRIC_COLUMNS)
_INTEGER_COLUMNS = frozenset({"requests_completed", "requests_failed", "num_requests"})


def run_values(resolved: ResolvedRun) -> dict[str, Any]:
    """The typed columns and JSON documents of a run row (what the analysis adds aside)."""
    run = resolved.run
    doc = resolved.doc if resolved.doc is not None else run_to_builtins(run)
    setup = run.setup
    values: dict[str, Any] = {
        "runtime": setup.runtime,
        "runtime_version": setup.runtime_version,
        "hardware_id": resolved.hardware_id,
        "model_id": resolved.model_id,
        "quantization_id": resolved.quantization_id,
        "gpu_count": setup.gpu_count,
        "tensor_parallel": setup.tensor_parallel,
        "kv_cache_dtype": setup.kv_cache_dtype,
        "max_model_len": setup.max_model_len,
        "source_format": run.source.format,
        "setup": doc.get("setup", {}),
        "workload": doc.get("workload", {}),
        "metrics": doc.get("metrics", {}),
        "labels": doc.get("labels", {}),
        "source": doc.get("source", {}),
        "content_hash": resolved.hash,
        "measured_at": run.measured_at,
    }
    for column, getter in _METRIC_GETTERS:
        value = getter(run)
        values[column] = int(value) if value is not None and column in _INTEGER_COLUMNS else value
    return values


def analysis_values(analysis: RunAnalysis | None) -> dict[str, Any]:
    """The columns the analysis fills; ``None``: not analysed yet (a bulk load's rows)."""
    if analysis is None:
        return {"verdict": None, "decode_efficiency": None, "prefill_efficiency": None, "analysis": {}}
    return {
        "verdict": analysis.verdict,
        "decode_efficiency": analysis.efficiency.get("decode"),
        "prefill_efficiency": analysis.efficiency.get("prefill"),
        "analysis": analysis.stored(),
    }


def recommendation_rows(analysis: RunAnalysis) -> list[dict[str, Any]]:
    return [recommendation_values(rank, rec) for rank, rec in enumerate(analysis.recommendations, start=1)]


@dataclass
class RunUpdate:
    """A stored run's new column values and open recommendations (a re-analysis or a reparse).

    Applied and dismissed recommendations are kept (they record what people did); the new ones for
    other rules rank after them. ``only_unanalysed``: skip the run when it has a verdict already
    (another worker analysed it first).
    """

    run_id: int
    values: dict[str, Any]
    recommendations: list[dict[str, Any]]
    only_unanalysed: bool = False


@dataclass
class WritePlan:
    """Everything one batch writes. Run rows name their deployment and raw payload by index."""

    deployment_ids: dict[str, int]  # deployments that exist
    slo_updates: dict[int, dict[str, Any]] = field(default_factory=dict)  # deployment id → merged SLO
    new_deployments: list[NewDeployment] = field(default_factory=list)
    raws: list[tuple[bytes, str | None, str | None, str | None]] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)  # column values
    run_deployments: list[str | None] = field(default_factory=list)  # per run
    run_raws: list[int] = field(default_factory=list)  # per run, an index into raws
    recommendations: list[list[dict[str, Any]]] = field(default_factory=list)  # per run, column values
    updates: list[RunUpdate] = field(default_factory=list)

    def is_empty(self) -> bool:
        return not (self.runs or self.new_deployments or self.slo_updates or self.updates)


@dataclass
class Written:
    deployment_ids: dict[str, int]
    run_ids: list[int]
    recommendation_ids: list[list[int]]
    updated: list[bool] = field(default_factory=list)  # per update: applied (False: skipped)


@dataclass
class BatchReads:
    """What a batch must know before analysing: which content hashes are stored already, and the
    deployments it names (id and stored SLO)."""

    known_hashes: set[str]
    deployments: dict[str, tuple[int, dict[str, Any]]]


# The statements every batch runs, built once: building a Core statement and its cache key costs
# more than executing it on SQLite (0.1-0.3 ms each, every batch); a constant statement's cache
# key is memoised. The IN lists are expanding bind parameters, rendered at execution.
_KNOWN_HASHES = select(RUN_TABLE.c.content_hash).where(
    RUN_TABLE.c.content_hash.in_(bindparam("hashes", expanding=True))
)
# On Postgres, one ``= ANY(array)`` for all of a bulk load's hashes: an index scan in one
# statement, where ten 500-parameter IN lists each took seconds on a freshly loaded table.
_KNOWN_HASHES_ANY = select(RUN_TABLE.c.content_hash).where(
    RUN_TABLE.c.content_hash == any_(bindparam("hashes", type_=ARRAY(String(64))))
)
_DEPLOYMENTS_NAMED = select(DEPLOYMENT_TABLE.c.name, DEPLOYMENT_TABLE.c.id, DEPLOYMENT_TABLE.c.slo).where(
    DEPLOYMENT_TABLE.c.name.in_(bindparam("names", expanding=True))
)
# On Postgres, both reads of a batch in one statement (one round trip instead of two: a batch of
# submissions costs 5-6 statements there, and its rate follows their latency): the stored hashes
# as ("h", hash, NULL, NULL) rows, the named deployments as ("d", name, id, slo).
_BATCH_READS_ANY = union_all(
    select(
        literal_column("'h'").label("kind"),
        RUN_TABLE.c.content_hash.label("key"),
        cast_(null(), DEPLOYMENT_TABLE.c.id.type).label("id"),
        cast_(null(), DEPLOYMENT_TABLE.c.slo.type).label("slo"),
    ).where(RUN_TABLE.c.content_hash == any_(bindparam("hashes", type_=ARRAY(String(64))))),
    select(literal_column("'d'"), DEPLOYMENT_TABLE.c.name, DEPLOYMENT_TABLE.c.id, DEPLOYMENT_TABLE.c.slo).where(
        DEPLOYMENT_TABLE.c.name == any_(bindparam("names", type_=ARRAY(String(200))))
    ),
)
_INSERT_DEPLOYMENTS = insert(DEPLOYMENT_TABLE).returning(DEPLOYMENT_TABLE.c.name, DEPLOYMENT_TABLE.c.id)
_INSERT_RUNS = insert(RUN_TABLE).returning(RUN_TABLE.c.id, sort_by_parameter_order=True)
_INSERT_RECOMMENDATIONS = insert(REC_TABLE).returning(REC_TABLE.c.id, sort_by_parameter_order=True)
_RAW_IDS = select(RAW_TABLE.c.sha256, RAW_TABLE.c.id).where(
    RAW_TABLE.c.sha256.in_(bindparam("digests", expanding=True))
)


@functools.lru_cache(maxsize=1024)
def _sqlite_in_sql(dialect: Dialect, table: str, columns: tuple[str, ...], key: str, n: int) -> str:
    quote = dialect.identifier_preparer.quote
    return (
        f"SELECT {', '.join(quote(c) for c in columns)} FROM {quote(table)} "
        f"WHERE {quote(key)} IN ({', '.join('?' * n)})"
    )


def _sqlite_lookup(
    connection: Connection, table: Table, columns: tuple[str, ...], key: str, values: Sequence[Any]
) -> list[tuple[Any, ...]]:
    """SQLite: ``columns`` of the rows whose ``key`` is one of ``values`` (strings or integers:
    columns without result processing), on the DB-API cursor of this connection's transaction.

    Why: a SELECT with an expanding ``IN`` through ``connection.execute`` renders its SQL and
    builds a result per call, 57 µs against 20 µs on the cursor for 16 hashes (a micro-benchmark,
    docs/benchmarks.md, session 6); a batch of submissions makes three or four of them on the
    writer thread. The statement text is cached per number of values, 500 at most per statement."""
    out: list[tuple[Any, ...]] = []
    cursor = connection.connection.cursor()
    try:
        for start in range(0, len(values), 500):
            chunk = tuple(values[start : start + 500])
            cursor.execute(_sqlite_in_sql(connection.dialect, table.name, columns, key, len(chunk)), chunk)
            out.extend(cursor.fetchall())
    finally:
        cursor.close()
    return out


@functools.cache
def _insert_raw(dialect: str) -> Any:
    """Raw payloads are deduplicated by digest: an existing one is skipped, not an error."""
    if dialect == "postgresql":
        stmt: Any = postgresql_insert(RAW_TABLE).on_conflict_do_nothing(index_elements=["sha256"])
    else:
        # INSERT OR IGNORE rather than the dialect's on_conflict_do_nothing(): SQLAlchemy cannot
        # cache the compiled form of the latter, and this runs for every submission.
        stmt = insert(RAW_TABLE).prefix_with("OR IGNORE", dialect="sqlite")
    return stmt.returning(RAW_TABLE.c.sha256, RAW_TABLE.c.id)


def read_batch(connection: Connection, hashes: list[str], names: list[str]) -> BatchReads:
    """The reads of a batch, in one go on ``connection`` (on SQLite: one hand-off, see above)."""
    known: set[str] = set()
    deployments: dict[str, tuple[int, dict[str, Any]]] = {}
    if connection.dialect.name == "postgresql" and hashes and names:
        for kind, key, ident, slo in connection.execute(_BATCH_READS_ANY, {"hashes": hashes, "names": names}).all():
            if kind == "h":
                known.add(key)
            else:
                deployments[key] = (int(ident), dict(slo or {}))
        return BatchReads(known, deployments)
    if connection.dialect.name == "postgresql" and hashes:
        known.update(connection.execute(_KNOWN_HASHES_ANY, {"hashes": hashes}).scalars())
        hashes = []
    if connection.dialect.name == "sqlite" and hashes:
        known.update(
            digest for (digest,) in _sqlite_lookup(connection, RUN_TABLE, ("content_hash",), "content_hash", hashes)
        )
        hashes = []
    for start in range(0, len(hashes), 500):
        found = connection.execute(_KNOWN_HASHES, {"hashes": hashes[start : start + 500]})
        known.update(found.scalars())
    if names and connection.dialect.name == "sqlite":  # the slo column's JSON text, decoded as its type would
        named = _sqlite_lookup(connection, DEPLOYMENT_TABLE, ("name", "id", "slo"), "name", names)
        deployments = {
            name: (int(i), dict((msgspec.json.decode(slo) if slo else None) or {})) for name, i, slo in named
        }
    elif names:
        rows = connection.execute(_DEPLOYMENTS_NAMED, {"names": names})
        deployments = {name: (int(i), dict(slo or {})) for name, i, slo in rows.all()}
    return BatchReads(known, deployments)


def write_plan(connection: Connection, plan: WritePlan) -> Written:
    """Execute ``plan`` on ``connection`` (the caller commits)."""
    now = datetime.now(UTC)
    deployment_ids = dict(plan.deployment_ids)
    for deployment_id, slo in plan.slo_updates.items():
        connection.execute(
            update(DEPLOYMENT_TABLE).where(DEPLOYMENT_TABLE.c.id == deployment_id).values(slo=slo, updated_at=now)
        )
    if plan.new_deployments:
        rows = [
            {"name": d.name, "runtime": d.runtime, "slo": d.slo, "created_at": now, "updated_at": now}
            for d in plan.new_deployments
        ]
        created = connection.execute(_INSERT_DEPLOYMENTS, rows)
        deployment_ids.update({name: int(i) for name, i in created.all()})
    raw_ids = insert_raw_payloads(connection, plan.raws)
    for values, name, raw in zip(plan.runs, plan.run_deployments, plan.run_raws, strict=True):
        values["deployment_id"] = deployment_ids[name] if name else None
        values["raw_payload_id"] = raw_ids[raw]
        values["created_at"] = values["updated_at"] = now
    run_ids: list[int] = []
    if plan.runs:
        run_ids = _insert_runs(connection, plan.runs)
    recs = []
    for run_id, group in zip(run_ids, plan.recommendations, strict=True):
        for values in group:
            values.update(run_id=run_id, created_at=now, updated_at=now)
            recs.append(values)
    rec_ids = _insert_recommendations(connection, recs) if recs else []
    per_run: list[list[int]] = []
    start = 0
    for group in plan.recommendations:
        per_run.append(rec_ids[start : start + len(group)])
        start += len(group)
    updated = _apply_updates(connection, plan.updates, now)
    return Written(deployment_ids, run_ids, per_run, updated)


_FAST_COMPRESS_BYTES = 1_000_000
_RUN_IDS_BY_HASH_ANY = select(RUN_TABLE.c.content_hash, RUN_TABLE.c.id).where(
    RUN_TABLE.c.content_hash == any_(bindparam("hashes", type_=ARRAY(String(64))))
)
#: From this many run rows on, Postgres gets them by COPY (one round trip, no SQL to parse per
#: row) instead of multi-row INSERTs of 500 rows each; a batch of single submissions stays below.
COPY_MIN_ROWS = 200


class _DriverRows:
    """Rows of one table as its DB-API driver takes them, for an insert that bypasses SQLAlchemy's
    per-row work: the column list is fixed once per dialect and set of keys, each row becomes a
    tuple in C (``operator.itemgetter``), and only the columns that have a bind processor (JSON
    documents, timestamps) go through one.

    Why: an executemany through ``connection.execute(insert(table), rows)`` runs
    ``construct_params`` and every column's bind processor per row in Python, 22 % of a bulk load's
    samples (docs/benchmarks.md, session 4). The processors used here are SQLAlchemy's own for the
    dialect (``type.dialect_impl(dialect).bind_processor(dialect)``), so the stored values are the
    ones that path stores (``tests/unit/db/test_driver_rows.py`` compares the two row by row).
    Columns the rows leave out get their scalar Python default, as SQLAlchemy would give them.
    """

    def __init__(self, table: Table, keys: tuple[str, ...], dialect: Dialect) -> None:
        unknown = set(keys) - set(table.columns.keys())
        if unknown:
            raise ValueError(f"{table.name} has no columns {sorted(unknown)}")
        present: list[str] = []
        defaulted: list[tuple[str, Any]] = []
        for column in table.columns:
            if column.primary_key and column.autoincrement is not False and column.key not in keys:
                continue  # the identity key: the database numbers the rows
            if column.key in keys:
                present.append(column.key)
                continue
            default = column.default
            if default is None:
                defaulted.append((column.key, None))
            elif getattr(default, "is_scalar", False):
                defaulted.append((column.key, getattr(default, "arg", None)))
            else:
                raise ValueError(f"{table.name}.{column.key} has a computed default; the rows must give it")
        self.columns = (*present, *(key for key, _ in defaulted))
        # Float columns skip theirs (SQLite's ``to_float``: every value here is a float or an int
        # from msgspec, and a REAL column stores an int as a float just as it would); on asyncpg
        # they have none. That leaves the JSON documents and the timestamps.
        processors = {
            column.key: proc
            for column in table.columns
            if not isinstance(column.type, Float)
            and (proc := column.type.dialect_impl(dialect).bind_processor(dialect)) is not None
        }
        self._getter = operator.itemgetter(*present)
        self._single = len(present) == 1
        self._processed = tuple((i, processors[key]) for i, key in enumerate(present) if key in processors)
        self._constants = tuple(processors[key](value) if key in processors else value for key, value in defaulted)
        quote = dialect.identifier_preparer.quote
        self.sql = (
            f"INSERT INTO {quote(table.name)} ({', '.join(quote(c) for c in self.columns)}) "
            f"VALUES ({', '.join('?' for _ in self.columns)})"
        )

    def tuples(self, rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        """The rows as tuples in :attr:`columns` order, processed for the driver.

        A value the rows share (one object: the batch's ``created_at``, a bulk load's context
        document) is processed once; the processors are pure, and the rows outlive the call."""
        getter, processed, constants = self._getter, self._processed, self._constants
        memo: dict[tuple[int, int], Any] = {}
        out: list[tuple[Any, ...]] = []
        for row in rows:
            values = [getter(row)] if self._single else list(getter(row))
            for i, proc in processed:
                value = values[i]
                key = (i, id(value))
                done = memo.get(key, memo)
                if done is memo:
                    done = memo[key] = proc(value)
                values[i] = done
            out.append((*values, *constants))
        return out


@functools.lru_cache(maxsize=64)
def _driver_rows(table: Table, keys: tuple[str, ...], dialect: Dialect) -> _DriverRows:
    return _DriverRows(table, keys, dialect)


def _grouped(rows: list[dict[str, Any]]) -> dict[tuple[str, ...], list[dict[str, Any]]]:
    """Rows by their set of keys (one, in practice: every row of a plan is built alike)."""
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(tuple(row), []).append(row)
    return groups


def _driver_executemany(connection: Connection, table: Table, rows: list[dict[str, Any]]) -> None:
    """SQLite: the rows in one executemany of pysqlite (its loop is C), through the connection's
    transaction (``exec_driver_sql``: no statement compilation, no per-row processing)."""
    for keys, group in _grouped(rows).items():
        driver = _driver_rows(table, keys, connection.dialect)
        connection.exec_driver_sql(driver.sql, driver.tuples(group))


#: Bind parameters per statement: asyncpg refuses more than 32,767 (the Bind message counts its
#: parameter formats in an Int16; MagicStack/asyncpg#127, limit added in #136).
_PG_MAX_PARAMS = 32_767


@functools.lru_cache(maxsize=512)
def _pg_values_sql(dialect: Dialect, table: str, columns: tuple[str, ...], n: int, tail: str) -> str:
    quote = dialect.identifier_preparer.quote
    width = len(columns)
    rows = ", ".join("(" + ", ".join(f"${r * width + c + 1}" for c in range(width)) + ")" for r in range(n))
    return f"INSERT INTO {quote(table)} ({', '.join(quote(c) for c in columns)}) VALUES {rows} {tail}"


def _pg_insert_returning(
    connection: Connection, table: Table, rows: list[dict[str, Any]], returning: tuple[str, ...], conflict: str = ""
) -> list[tuple[Any, ...]] | None:
    """Postgres: ``rows`` inserted by multi-row ``INSERT … VALUES … RETURNING`` on asyncpg's
    connection of this transaction, the rows as :class:`_DriverRows` makes them (each row a tuple,
    SQLAlchemy's own bind processors for the JSON documents); the ``returning`` columns of every
    inserted row, in no particular order. None when the connection is not asyncpg's or has no
    transaction open (the statement would commit on its own), and the caller inserts instead.

    Why: through ``connection.execute(insert(table).returning(...), rows)`` a batch's insert ran
    ``construct_params`` and the bind processors per row in Python, and every statement paid the
    adapter's own cost (≈ 90 µs of CPU per statement against asyncpg's 52 µs for a small read
    in a micro-benchmark, docs/benchmarks.md, session 6). A unique violation is raised as
    SQLAlchemy's :class:`~sqlalchemy.exc.IntegrityError`, as the other path raises it."""
    driver_connection = getattr(connection.connection, "driver_connection", None)
    fetch = getattr(driver_connection, "fetch", None)
    if fetch is None or driver_connection is None or not driver_connection.is_in_transaction():
        return None
    quote = connection.dialect.identifier_preparer.quote
    tail = f"{conflict} RETURNING {', '.join(quote(c) for c in returning)}".strip()
    out: list[tuple[Any, ...]] = []
    for keys, group in _grouped(rows).items():
        driver = _driver_rows(table, keys, connection.dialect)
        tuples = driver.tuples(group)
        per = max(1, _PG_MAX_PARAMS // len(driver.columns))
        for start in range(0, len(tuples), per):
            chunk = tuples[start : start + per]
            sql = _pg_values_sql(connection.dialect, table.name, driver.columns, len(chunk), tail)
            try:
                records = await_only(fetch(sql, *itertools.chain.from_iterable(chunk)))
            except Exception as exc:
                from asyncpg.exceptions import IntegrityConstraintViolationError

                if isinstance(exc, IntegrityConstraintViolationError):
                    raise IntegrityError(sql, None, exc) from exc
                raise
            out.extend(tuple(record) for record in records)
    return out


def _copy_rows(connection: Connection, table: Table, rows: list[dict[str, Any]]) -> bool:
    """Postgres: the rows by asyncpg's ``copy_records_to_table`` (COPY … FROM STDIN, binary) on
    the connection of this transaction; False when that connection is not asyncpg's, or has no
    transaction open (COPY outside it would commit on its own), and the caller inserts instead."""
    driver_connection = getattr(connection.connection, "driver_connection", None)
    copy = getattr(driver_connection, "copy_records_to_table", None)
    if copy is None or driver_connection is None or not driver_connection.is_in_transaction():
        return False
    for keys, group in _grouped(rows).items():
        driver = _driver_rows(table, keys, connection.dialect)
        await_only(copy(table.name, records=driver.tuples(group), columns=list(driver.columns)))
    return True


def _insert_runs(connection: Connection, rows: list[dict[str, Any]]) -> list[int]:
    """Insert run rows; their ids in order.

    On SQLite, SQLAlchemy cannot order a multi-row INSERT … RETURNING by its parameters for this
    table (its BIGINT key is not a sentinel it trusts there), so it sends one INSERT per row: 5,000
    statements for a bulk load. Instead: one executemany of the driver (:class:`_DriverRows`),
    then the ids read back by content hash, which is unique (this transaction holds SQLite's write
    lock, so they are the rows just written). On Postgres, a bulk load's rows go by COPY and their
    ids are read back the same way; fewer rows go as SQLAlchemy's multi-row INSERT … RETURNING."""
    dialect = connection.dialect.name
    hashes = [row["content_hash"] for row in rows]
    ids: dict[str, int] = {}
    if dialect == "sqlite":
        if len(rows) == 1:
            driver = _driver_rows(RUN_TABLE, tuple(rows[0]), connection.dialect)
            run_id = connection.exec_driver_sql(driver.sql, driver.tuples(rows)[0]).lastrowid
            return [int(run_id)]
        _driver_executemany(connection, RUN_TABLE, rows)
        ids.update(_sqlite_lookup(connection, RUN_TABLE, ("content_hash", "id"), "content_hash", hashes))
        return [int(ids[digest]) for digest in hashes]
    if dialect == "postgresql" and len(rows) >= COPY_MIN_ROWS and _copy_rows(connection, RUN_TABLE, rows):
        found = connection.execute(_RUN_IDS_BY_HASH_ANY, {"hashes": hashes})
        ids.update({digest: int(i) for digest, i in found.all()})
        return [ids[digest] for digest in hashes]
    if dialect == "postgresql":
        inserted = _pg_insert_returning(connection, RUN_TABLE, rows, ("content_hash", "id"))
        if inserted is not None:
            ids.update({digest: int(i) for digest, i in inserted})
            return [ids[digest] for digest in hashes]
    return [int(i) for i in connection.execute(_INSERT_RUNS, rows).scalars().all()]


@dataclass
class BulkChunk:
    """What one chunk of a streamed bulk load (Postgres) learnt before its rows go by COPY: which of
    its candidate hashes are stored already, every deployment id it needs (created when new), and
    the bulk body's raw payload id (inserted with the first chunk that has a new run)."""

    known_hashes: set[str]
    deployment_ids: dict[str, int]
    raw_id: int | None


def bulk_chunk_prepare(
    connection: Connection,
    candidates: list[tuple[str, str | None, str | None]],
    deployment_ids: dict[str, int],
    raw: tuple[bytes, str | None, str | None, str | None] | None,
) -> BulkChunk:
    """The statements before a streamed bulk chunk's COPY, in one hand-off: the chunk's stored
    hashes and unknown deployments in one read (:func:`read_batch`), the deployments its new runs
    name and that do not exist yet, and ``raw`` when the chunk has a new run. ``candidates``:
    ``(content hash, deployment, runtime)`` of the chunk's runs not seen earlier in the load, in
    order; ``deployment_ids``: the ones earlier chunks resolved (not read again). A deployment is
    created with the runtime of the first new run that names it, as :func:`write_plan` does."""
    names = sorted({name for _, name, _ in candidates if name and name not in deployment_ids})
    reads = read_batch(connection, [digest for digest, _, _ in candidates], names)
    ids = dict(deployment_ids)
    ids.update({name: ident for name, (ident, _) in reads.deployments.items()})
    fresh = [(name, runtime) for digest, name, runtime in candidates if digest not in reads.known_hashes]
    runtimes: dict[str, str | None] = {}
    for name, runtime in fresh:
        if name and name not in ids:
            runtimes.setdefault(name, runtime)
    if runtimes:
        now = datetime.now(UTC)
        created: list[dict[str, Any]] = [
            {"name": name, "runtime": runtime, "slo": {}, "created_at": now, "updated_at": now}
            for name, runtime in runtimes.items()
        ]
        ids.update({name: int(i) for name, i in connection.execute(_INSERT_DEPLOYMENTS, created).all()})
    raw_id = insert_raw_payloads(connection, [raw])[0] if raw is not None and fresh else None
    return BulkChunk(reads.known_hashes, ids, raw_id)


async def copy_run_rows(driver_connection: Any, dialect: Dialect, rows: list[dict[str, Any]]) -> None:
    """Postgres: finished run rows by asyncpg's binary COPY on ``driver_connection``, which must be
    the one of the open transaction (the caller checks; COPY outside it would commit on its own).
    Awaited from the event loop, not through ``run_sync``, so that the caller's CPU work on the
    next chunk runs while Postgres takes these rows in."""
    for keys, group in _grouped(rows).items():
        driver = _driver_rows(RUN_TABLE, keys, dialect)
        await driver_connection.copy_records_to_table(
            RUN_TABLE.name, records=driver.tuples(group), columns=list(driver.columns)
        )


def run_ids_by_hash(connection: Connection, hashes: list[str]) -> list[int]:
    """Postgres: the ids of runs by content hash (unique), in the given order."""
    found = connection.execute(_RUN_IDS_BY_HASH_ANY, {"hashes": hashes})
    ids = {digest: int(i) for digest, i in found.all()}
    return [ids[digest] for digest in hashes]


def _insert_recommendations(connection: Connection, rows: list[dict[str, Any]]) -> list[int]:
    """Insert the recommendations of newly inserted runs; their ids in order.

    On SQLite the same as the runs (one statement per row otherwise): one executemany of the
    driver, then the ids by ``(run_id, rank)``, unique among the recommendations of runs this
    transaction has just inserted."""
    if connection.dialect.name == "postgresql":
        inserted = _pg_insert_returning(connection, REC_TABLE, rows, ("run_id", "rank", "id"))
        if inserted is not None:
            by_key = {(int(run_id), int(rank)): int(i) for run_id, rank, i in inserted}
            if len(by_key) != len(rows):  # never an answer with another row's id: fail the transaction
                raise RuntimeError(f"read back {len(by_key)} recommendation ids for {len(rows)} rows inserted")
            return [by_key[(row["run_id"], row["rank"])] for row in rows]
    if connection.dialect.name != "sqlite":
        return [int(i) for i in connection.execute(_INSERT_RECOMMENDATIONS, rows).scalars().all()]
    _driver_executemany(connection, REC_TABLE, rows)
    run_ids = sorted({row["run_id"] for row in rows})
    found = _sqlite_lookup(connection, REC_TABLE, ("run_id", "rank", "id"), "run_id", run_ids)
    ids = {(int(run_id), int(rank)): int(i) for run_id, rank, i in found}
    if len(ids) != len(rows):  # never an answer with another row's id: fail the transaction
        raise RuntimeError(f"read back {len(ids)} recommendation ids for {len(rows)} rows inserted")
    return [ids[(row["run_id"], row["rank"])] for row in rows]


def _apply_updates(connection: Connection, changes: list[RunUpdate], now: datetime) -> list[bool]:
    """:func:`_apply_update` for many runs in a few statements whatever their number (a batch of
    background analyses): one read of which runs may change (locked on Postgres, so a concurrent
    worker's analysis of the same run waits and then skips it), one executemany UPDATE per set of
    columns, one DELETE of their open recommendations, one read of the kept ones, one INSERT."""
    if len(changes) <= 1:
        return [_apply_update(connection, change, now) for change in changes]
    ids = sorted({c.run_id for c in changes})
    state: dict[int, Any] = {}
    for start in range(0, len(ids), 500):
        stmt = select(RUN_TABLE.c.id, RUN_TABLE.c.verdict).where(RUN_TABLE.c.id.in_(ids[start : start + 500]))
        if connection.dialect.name == "postgresql":
            stmt = stmt.with_for_update(of=RUN_TABLE)
        state.update({int(i): verdict for i, verdict in connection.execute(stmt).all()})
    applied: list[bool] = []
    chosen: dict[int, RunUpdate] = {}
    for change in changes:
        ok = change.run_id in state and not (change.only_unanalysed and state[change.run_id] is not None)
        ok = ok and change.run_id not in chosen  # the same run twice: the first change wins
        applied.append(ok)
        if ok:
            chosen[change.run_id] = change
    if not chosen:
        return applied
    by_columns: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for change in chosen.values():
        row = {**change.values, "updated_at": now}
        by_columns.setdefault(tuple(sorted(row)), []).append({"_run_id": change.run_id, **row})
    for rows in by_columns.values():
        connection.execute(update(RUN_TABLE).where(RUN_TABLE.c.id == bindparam("_run_id")), rows)
    run_ids = sorted(chosen)
    kept: dict[int, set[str]] = {}
    for start in range(0, len(run_ids), 500):
        chunk = run_ids[start : start + 500]
        connection.execute(delete(REC_TABLE).where(REC_TABLE.c.run_id.in_(chunk), REC_TABLE.c.status == "open"))
        for run_id, rule_id in connection.execute(
            select(REC_TABLE.c.run_id, REC_TABLE.c.rule_id).where(REC_TABLE.c.run_id.in_(chunk))
        ).all():
            kept.setdefault(int(run_id), set()).add(rule_id)
    fresh: list[dict[str, Any]] = []
    for run_id, change in chosen.items():
        keep = kept.get(run_id, set())
        new = [dict(values) for values in change.recommendations if values["rule_id"] not in keep]
        for rank, values in enumerate(new, start=len(keep) + 1):
            values.update(rank=rank, run_id=run_id, created_at=now, updated_at=now)
        fresh.extend(new)
    if fresh:
        connection.execute(insert(REC_TABLE), fresh)
    return applied


def _apply_update(connection: Connection, change: RunUpdate, now: datetime) -> bool:
    stmt = update(RUN_TABLE).where(RUN_TABLE.c.id == change.run_id)
    if change.only_unanalysed:
        stmt = stmt.where(RUN_TABLE.c.verdict.is_(None))
    if connection.execute(stmt.values(**change.values, updated_at=now)).rowcount == 0:
        return False
    connection.execute(delete(REC_TABLE).where(REC_TABLE.c.run_id == change.run_id, REC_TABLE.c.status == "open"))
    kept = set(connection.execute(select(REC_TABLE.c.rule_id).where(REC_TABLE.c.run_id == change.run_id)).scalars())
    fresh = [dict(values) for values in change.recommendations if values["rule_id"] not in kept]
    for rank, values in enumerate(fresh, start=len(kept) + 1):
        values.update(rank=rank, run_id=change.run_id, created_at=now, updated_at=now)
    if fresh:
        connection.execute(insert(REC_TABLE), fresh)
    return True


def insert_raw_payloads(
    connection: Connection, payloads: list[tuple[bytes, str | None, str | None, str | None]]
) -> list[int]:
    """Store payloads (bytes, content type, file name, format), deduplicated by SHA-256, with one
    multi-row insert; their ids in the given order (equal bytes get the same id)."""
    if not payloads:
        return []
    now = datetime.now(UTC)
    digests = [hashlib.sha256(data).hexdigest() for data, *_ in payloads]
    rows: dict[str, dict[str, Any]] = {}
    for digest, (data, content_type, file_name, format_id) in zip(digests, payloads, strict=True):
        rows.setdefault(
            digest,
            {
                "sha256": digest,
                "content_type": content_type,
                "file_name": file_name,
                "format": format_id,
                "size": len(data),
                "encoding": "zlib",
                # A bulk body (megabytes) at level 1: level 6 cost a fifth of a bulk load's CPU
                # for a few percent smaller; a single file keeps level 6.
                "data": zlib.compress(data, 1 if len(data) > _FAST_COMPRESS_BYTES else 6),
                "created_at": now,
                "updated_at": now,
            },
        )
    if connection.dialect.name == "sqlite":
        # One executemany of the driver (INSERT OR IGNORE: a stored payload is skipped), then every
        # id by digest, instead of SQLAlchemy's INSERT … RETURNING with its per-row processing.
        values = list(rows.values())
        driver = _driver_rows(RAW_TABLE, tuple(values[0]), connection.dialect)
        connection.exec_driver_sql(driver.sql.replace("INSERT INTO", "INSERT OR IGNORE INTO", 1), driver.tuples(values))
        stored = dict(_sqlite_lookup(connection, RAW_TABLE, ("sha256", "id"), "sha256", list(rows)))
        return [int(stored[d]) for d in digests]
    inserted = (
        _pg_insert_returning(
            connection, RAW_TABLE, list(rows.values()), ("sha256", "id"), conflict="ON CONFLICT (sha256) DO NOTHING"
        )
        if connection.dialect.name == "postgresql"
        else None
    )
    if inserted is not None:
        ids = {sha: int(i) for sha, i in inserted}
    else:
        stmt = _insert_raw(connection.dialect.name)
        ids = {sha: int(i) for sha, i in connection.execute(stmt, list(rows.values())).all()}
    missing = [d for d in rows if d not in ids]  # bytes an earlier submission stored
    if missing:
        found = connection.execute(_RAW_IDS, {"digests": missing})
        ids.update({sha: int(i) for sha, i in found.all()})
    return [ids[d] for d in digests]
