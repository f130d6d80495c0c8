"""The write phase of a batch of submissions: plain Core statements on one synchronous connection.

Written as a synchronous function so it can run where it is cheapest:

* on SQLite, in one hand-off to a thread that owns a synchronous pysqlite connection to the same
  file (:func:`advisor.db.config.sqlite_writer`). Through aiosqlite, every cursor call (open,
  execute, fetch, close) is a separate hand-off between the event loop and aiosqlite's thread, and
  those hand-offs cost more than the statements they carry;
* on Postgres, through ``AsyncConnection.run_sync`` in the request's own transaction.

Every statement is a multi-row INSERT … RETURNING over a table (SQLAlchemy's "insertmanyvalues"),
so a batch costs the same few statements whatever its size.
"""

from __future__ import annotations

import hashlib
import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy import Connection, Table, insert, select, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert

from advisor.db.models import Deployment, RawPayload, Recommendation, Run

__all__ = ["BatchReads", "NewDeployment", "WritePlan", "Written", "insert_raw_payloads", "read_batch", "write_plan"]

RUN_TABLE = cast("Table", Run.__table__)
REC_TABLE = cast("Table", Recommendation.__table__)
RAW_TABLE = cast("Table", RawPayload.__table__)
DEPLOYMENT_TABLE = cast("Table", Deployment.__table__)


@dataclass
class NewDeployment:
    name: str
    runtime: str | None
    slo: dict[str, Any]


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

    def is_empty(self) -> bool:
        return not (self.runs or self.new_deployments or self.slo_updates)


@dataclass
class Written:
    deployment_ids: dict[str, int]
    run_ids: list[int]
    recommendation_ids: list[list[int]]


@dataclass
class BatchReads:
    """What a batch must know before analysing: which content hashes are stored already, and the
    deployments it names (id and stored SLO)."""

    known_hashes: set[str]
    deployments: dict[str, tuple[int, dict[str, Any]]]


def read_batch(connection: Connection, hashes: list[str], names: list[str]) -> BatchReads:
    """The reads of a batch, in one go on ``connection`` (on SQLite: one hand-off, see above)."""
    known: set[str] = set()
    for start in range(0, len(hashes), 500):
        chunk = hashes[start : start + 500]
        found = connection.execute(select(RUN_TABLE.c.content_hash).where(RUN_TABLE.c.content_hash.in_(chunk)))
        known.update(found.scalars())
    deployments: dict[str, tuple[int, dict[str, Any]]] = {}
    if names:
        rows = connection.execute(
            select(DEPLOYMENT_TABLE.c.name, DEPLOYMENT_TABLE.c.id, DEPLOYMENT_TABLE.c.slo).where(
                DEPLOYMENT_TABLE.c.name.in_(names)
            )
        )
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
        created = connection.execute(
            insert(DEPLOYMENT_TABLE).returning(DEPLOYMENT_TABLE.c.name, DEPLOYMENT_TABLE.c.id), rows
        )
        deployment_ids.update({name: int(i) for name, i in created.all()})
    raw_ids = insert_raw_payloads(connection, plan.raws)
    for values, name, raw in zip(plan.runs, plan.run_deployments, plan.run_raws, strict=True):
        values["deployment_id"] = deployment_ids[name] if name else None
        values["raw_payload_id"] = raw_ids[raw]
        values["created_at"] = values["updated_at"] = now
    run_ids: list[int] = []
    if plan.runs:
        result = connection.execute(
            insert(RUN_TABLE).returning(RUN_TABLE.c.id, sort_by_parameter_order=True), plan.runs
        )
        run_ids = [int(i) for i in result.scalars().all()]
    recs = []
    for run_id, group in zip(run_ids, plan.recommendations, strict=True):
        for values in group:
            values.update(run_id=run_id, created_at=now, updated_at=now)
            recs.append(values)
    rec_ids: list[int] = []
    if recs:
        result = connection.execute(insert(REC_TABLE).returning(REC_TABLE.c.id, sort_by_parameter_order=True), recs)
        rec_ids = [int(i) for i in result.scalars().all()]
    per_run: list[list[int]] = []
    start = 0
    for group in plan.recommendations:
        per_run.append(rec_ids[start : start + len(group)])
        start += len(group)
    return Written(deployment_ids, run_ids, per_run)


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
                "data": zlib.compress(data, 6),
                "created_at": now,
                "updated_at": now,
            },
        )
    if connection.dialect.name == "postgresql":
        stmt: Any = postgresql_insert(RAW_TABLE).on_conflict_do_nothing(index_elements=["sha256"])
    else:
        # INSERT OR IGNORE rather than the dialect's on_conflict_do_nothing(): SQLAlchemy cannot
        # cache the compiled form of the latter, and this runs for every submission.
        stmt = insert(RAW_TABLE).prefix_with("OR IGNORE", dialect="sqlite")
    stmt = stmt.returning(RAW_TABLE.c.sha256, RAW_TABLE.c.id)
    ids = {sha: int(i) for sha, i in connection.execute(stmt, list(rows.values())).all()}
    missing = [d for d in rows if d not in ids]  # bytes an earlier submission stored
    if missing:
        found = connection.execute(select(RAW_TABLE.c.sha256, RAW_TABLE.c.id).where(RAW_TABLE.c.sha256.in_(missing)))
        ids.update({sha: int(i) for sha, i in found.all()})
    return [ids[d] for d in digests]
