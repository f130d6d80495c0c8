"""Stored runs: finding, listing and reading them, and their raw payloads (the writes are the
store's: :mod:`advisor.domain.runs.store`)."""

from __future__ import annotations

import base64
import binascii
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgspec
from advanced_alchemy.repository import SQLAlchemyAsyncRepository
from advanced_alchemy.service import SQLAlchemyAsyncRepositoryService
from sqlalchemy import Select, and_, func, or_, select
from sqlalchemy.exc import IntegrityError

from advisor.canonical import CanonicalRun
from advisor.db.models import Deployment, RawPayload, Run
from advisor.domain.runs.schemas import RunOut
from advisor.errors import InvalidInput, NotFound

__all__ = [
    "RawPayloadService", "RunFilters", "RunService", "is_integrity_error", "run_out", "run_to_canonical", "run_to_out",
]  # fmt: skip

_CANONICAL_KEYS = ("setup", "workload", "metrics", "labels", "source")


def run_to_canonical(row: Run) -> CanonicalRun:
    doc: dict[str, Any] = {key: getattr(row, key) or {} for key in _CANONICAL_KEYS}
    doc["measured_at"] = row.measured_at
    doc["deployment"] = row.deployment.name if row.deployment is not None else None
    return msgspec.convert(doc, CanonicalRun, strict=False)


_OUT_FIELDS = (
    "measured_at", "created_at", "submitted_by", "content_hash", "verdict", "setup", "workload", "metrics",
    "labels", "source", "decode_efficiency", "prefill_efficiency", "analysis",
)  # fmt: skip


def run_to_out(row: Run) -> RunOut:
    return run_out(
        row.id, row.deployment.name if row.deployment is not None else None, {k: getattr(row, k) for k in _OUT_FIELDS}
    )


def run_out(run_id: int | None, deployment: str | None, values: Mapping[str, Any]) -> RunOut:
    """The API shape of a run from its column values: a stored row, the values just inserted, or
    (``run_id`` None) a run analysed without being stored."""
    analysis = values.get("analysis") or {}
    return RunOut(
        id=run_id,
        deployment=deployment,
        measured_at=values.get("measured_at"),
        submitted_at=values.get("created_at"),
        submitted_by=values.get("submitted_by"),
        content_hash=values["content_hash"],
        verdict=values.get("verdict"),
        setup=values.get("setup") or {},
        workload=values.get("workload") or {},
        metrics=values.get("metrics") or {},
        labels=values.get("labels") or {},
        source=values.get("source") or {},
        efficiency={
            "decode_bandwidth_utilisation": values.get("decode_efficiency"),
            "prefill_mfu": values.get("prefill_efficiency"),
            **{k: v for k, v in (analysis.get("efficiency") or {}).items() if k not in ("decode", "prefill")},
        },
        links={}
        if run_id is None
        else {
            "self": f"/api/v1/runs/{run_id}",
            "raw": f"/api/v1/runs/{run_id}/raw",
            "recommendations": f"/api/v1/runs/{run_id}/recommendations",
        },
    )


@dataclass(frozen=True)
class RunFilters:
    deployment: str | None = None
    runtime: str | None = None
    hardware: str | None = None
    model: str | None = None
    quantization: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    verdict: str | None = None


def _encode_cursor(measured_at: datetime, run_id: int) -> str:
    return base64.urlsafe_b64encode(f"{measured_at.isoformat()}|{run_id}".encode()).decode()


def _decode_cursor(cursor: str) -> tuple[datetime, int]:
    try:
        stamp, ident = base64.urlsafe_b64decode(cursor.encode()).decode().rsplit("|", 1)
        return datetime.fromisoformat(stamp), int(ident)
    except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
        raise InvalidInput("not a cursor this API returned", field="query.cursor") from exc


class RawPayloadService(SQLAlchemyAsyncRepositoryService[RawPayload]):
    class Repo(SQLAlchemyAsyncRepository[RawPayload]):
        model_type = RawPayload

    repository_type = Repo

    @staticmethod
    def decompress(payload: RawPayload) -> bytes:
        return zlib.decompress(payload.data) if payload.encoding == "zlib" else payload.data


class RunService(SQLAlchemyAsyncRepositoryService[Run]):
    """Stored runs."""

    class Repo(SQLAlchemyAsyncRepository[Run]):
        model_type = Run

    repository_type = Repo

    BASELINE_RUNS = 20  # the most recent comparable runs a submission is compared with

    async def get_run(self, run_id: int) -> Run:
        row = await self.get_one_or_none(Run.id == run_id)
        if row is None:
            raise NotFound(f"no run with id {run_id}", field="id")
        return row

    async def by_hashes(self, hashes: list[str]) -> dict[str, Run]:
        """Stored runs with these content hashes (callers that may find none probe with
        :meth:`existing_hashes` or the batch's reads first: loading nothing should not cost an ORM
        query)."""
        found: dict[str, Run] = {}
        session = self.repository.session
        for start in range(0, len(hashes), 500):
            chunk = hashes[start : start + 500]
            rows = (await session.execute(select(Run).where(Run.content_hash.in_(chunk)))).scalars()
            found.update({row.content_hash: row for row in rows})
        return found

    async def existing_hashes(self, hashes: list[str]) -> set[str]:
        session = self.repository.session
        found: set[str] = set()
        for start in range(0, len(hashes), 500):
            chunk = hashes[start : start + 500]
            found.update((await session.execute(select(Run.content_hash).where(Run.content_hash.in_(chunk)))).scalars())
        return found

    async def by_idempotency_keys(self, keys: list[str]) -> list[Run]:
        rows = await self.repository.session.execute(
            select(Run).where(Run.idempotency_key.in_(keys)).order_by(Run.source_index)
        )
        return list(rows.scalars())

    @staticmethod
    def _cell_conditions(deployment_id: int, values: dict[str, Any]) -> list[Any]:
        conditions = [Run.deployment_id == deployment_id]
        for column in ("runtime", "hardware_id", "model_id", "quantization_id", "concurrency"):
            value = values.get(column)
            attr = getattr(Run, column)
            conditions.append(attr.is_(None) if value is None else attr == value)
        return conditions

    async def baseline(
        self, exclude_id: int | None, *, deployment_id: int | None, values: dict[str, Any], limit: int = BASELINE_RUNS
    ) -> list[CanonicalRun]:
        """Recent comparable runs of the same deployment: same runtime, hardware, model, quantization
        and concurrency, measured before this one."""
        if deployment_id is None:
            return []
        conditions = self._cell_conditions(deployment_id, values)
        measured_at = values.get("measured_at")
        if measured_at is not None:
            conditions.append(Run.measured_at < measured_at)
        if exclude_id is not None:
            conditions.append(Run.id != exclude_id)
        # Only the canonical documents, not ORM entities: the baseline is read on every ingestion.
        stmt = (
            select(Run.measured_at, Run.setup, Run.workload, Run.metrics)
            .where(and_(*conditions))
            .order_by(Run.measured_at.desc())
            .limit(limit)
        )
        rows = (await self.repository.session.execute(stmt)).all()
        deployment = values.get("deployment")  # the name: comparable() checks it
        return [_baseline_run(deployment, r.measured_at, r.setup, r.workload, r.metrics) for r in rows]

    async def cell_runs(
        self,
        *,
        deployment_id: int,
        values: dict[str, Any],
        since: datetime | None,
        until: datetime,
        limit: int | None,
    ) -> list[tuple[int, CanonicalRun]]:
        """The runs of one baseline cell (as :meth:`baseline` filters them) measured in
        ``[since, until)``, newest first, at most ``limit``, with their ids: what the baselines of a
        batch of stored runs are cut from (:meth:`RunPipeline.analyse_rows`)."""
        conditions = [*self._cell_conditions(deployment_id, values), Run.measured_at < until]
        if since is not None:
            conditions.append(Run.measured_at >= since)
        stmt = (
            select(Run.id, Run.measured_at, Run.setup, Run.workload, Run.metrics)
            .where(and_(*conditions))
            .order_by(Run.measured_at.desc(), Run.id.desc())
        )
        if limit is not None:
            stmt = stmt.limit(limit)
        rows = (await self.repository.session.execute(stmt)).all()
        deployment = values.get("deployment")
        return [(int(r.id), _baseline_run(deployment, r.measured_at, r.setup, r.workload, r.metrics)) for r in rows]

    def _filtered(self, stmt: Select[Any], filters: RunFilters) -> Select[Any]:
        if filters.deployment is not None:
            stmt = stmt.join(Deployment, Run.deployment_id == Deployment.id).where(
                Deployment.name == filters.deployment
            )
        for column, value in (
            (Run.runtime, filters.runtime),
            (Run.hardware_id, filters.hardware),
            (Run.model_id, filters.model),
            (Run.quantization_id, filters.quantization),
            (Run.verdict, filters.verdict),
        ):
            if value is not None:
                stmt = stmt.where(column == value)
        if filters.since is not None:
            stmt = stmt.where(Run.measured_at >= filters.since)
        if filters.until is not None:
            stmt = stmt.where(Run.measured_at < filters.until)
        return stmt

    async def page(
        self, filters: RunFilters, *, limit: int, cursor: str | None
    ) -> tuple[list[RunOut], int, str | None]:
        """Newest first, keyset-paginated on (measured_at, id), with the filtered total.

        The listing is most of a server's reads: it selects the columns the answer shows (no ORM
        entities, no raw payload) with the deployment's name joined. (The total stays a query of
        its own: ``count(*) OVER ()`` would make the database read every matching row first.)"""
        session = self.repository.session
        total = int((await session.execute(self._filtered(select(func.count(Run.id)), filters))).scalar_one())
        stmt = self._filtered(select(*_PAGE_COLUMNS, Deployment.name.label("deployment_name")), filters)
        if filters.deployment is None:  # _filtered joins it when it filters on it
            stmt = stmt.outerjoin(Deployment, Run.deployment_id == Deployment.id)
        if cursor:
            stamp, ident = _decode_cursor(cursor)
            stmt = stmt.where(or_(Run.measured_at < stamp, and_(Run.measured_at == stamp, Run.id < ident)))
        stmt = stmt.order_by(Run.measured_at.desc(), Run.id.desc()).limit(limit + 1)
        rows = (await session.execute(stmt)).all()
        items = [run_out(row.id, row.deployment_name, row._mapping) for row in rows[:limit]]
        next_cursor = _encode_cursor(rows[limit - 1].measured_at, rows[limit - 1].id) if len(rows) > limit else None
        return items, total, next_cursor


_PAGE_COLUMNS = (
    Run.id, Run.measured_at, Run.created_at, Run.submitted_by, Run.content_hash, Run.verdict, Run.setup,
    Run.workload, Run.metrics, Run.labels, Run.source, Run.decode_efficiency, Run.prefill_efficiency, Run.analysis,
)  # fmt: skip


def _baseline_run(deployment: Any, measured_at: Any, setup: Any, workload: Any, metrics: Any) -> CanonicalRun:
    doc = {"deployment": deployment, "measured_at": measured_at, "setup": setup, "workload": workload}
    return msgspec.convert({**doc, "metrics": metrics}, CanonicalRun, strict=False)


def is_integrity_error(exc: BaseException) -> bool:
    return isinstance(exc, IntegrityError) or type(exc).__name__ in ("IntegrityError", "DuplicateKeyError")
