"""The catalog in force: the shipped data plus user entries stored in the database.

Resolution runs against an in-memory :class:`advisor.catalog.Catalog`; the database holds the shipped
rows (so reports can join on them) and the user-added ones (so every worker and host sees them).
Each process caches the merged catalog and re-reads the user entries when their fingerprint changes,
checked at most every ``_RECHECK_SECONDS``.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from advisor.catalog import Catalog
from advisor.db.config import database_key
from advisor.db.models import CatalogAlias, HardwareEntry, ModelEntry, QuantizationEntry
from advisor.errors import InvalidInput, NotFound

__all__ = ["KINDS", "CatalogService"]

#: API kind → (Catalog.with_entries keyword, ORM model, records' entry_kind)
KINDS: dict[str, tuple[str, type[Any], str]] = {
    "hardware": ("hardware", HardwareEntry, "hardware"),
    "models": ("models", ModelEntry, "model"),
    "quantizations": ("quantizations", QuantizationEntry, "quantization"),
}
_RECHECK_SECONDS = 2.0

_HW_COLUMNS = {
    "vendor": "vendor",
    "name": "name",
    "kind": "kind",
    "memory_gb": "memory_gb",
    "mem_bandwidth_gb_s": "mem_bandwidth_gb_s",
    "fp16_tflops": "fp16_dense_tflops",
    "bf16_tflops": "bf16_dense_tflops",
    "fp8_tflops": "fp8_dense_tflops",
    "int8_tops": "int8_dense_tops",
    "tdp_w": "tdp_w",
    "interconnect": "interconnect",
}
_MODEL_COLUMNS = (
    "family", "hf_repo", "params_b", "active_params_b", "num_hidden_layers", "hidden_size",
    "num_attention_heads", "num_key_value_heads", "head_dim", "attention", "max_position_embeddings",
    "vocab_size",
)  # fmt: skip


def _row_values(entry_kind: str, fields: dict[str, Any]) -> dict[str, Any]:
    """Typed columns for a catalog row from a spec's fields."""
    if entry_kind == "hardware":
        values = {column: fields.get(key) for key, column in _HW_COLUMNS.items()}
        values["name"] = values["name"] or fields.get("id")
        return values
    if entry_kind == "model":
        values = {column: fields.get(column) for column in _MODEL_COLUMNS}
        values["extra"] = {k: v for k, v in fields.items() if k not in _MODEL_COLUMNS and k != "id"}
        kv = fields.get("kv_bytes_per_token_fp16")
        values["kv_bytes_per_token_fp16"] = kv
        return values
    return {
        "name": fields.get("name") or fields.get("id"),
        "bits_per_weight": fields["bits_per_weight"],
        "family": fields.get("family"),
    }


class CatalogService:
    """Loads, extends and serves the catalog."""

    #: Per database URL: (fingerprint of the user entries, the merged catalog, when last checked).
    _cache: ClassVar[dict[str, tuple[Any, Catalog, float]]] = {}

    def __init__(self, session: AsyncSession) -> None:
        self.session = session
        self._key = database_key(session)

    @classmethod
    def invalidate(cls) -> None:
        cls._cache.clear()

    async def _fingerprint(self) -> tuple[Any, ...]:
        parts: list[Any] = []
        for _, model, _ in KINDS.values():
            row = (
                await self.session.execute(
                    select(func.count(model.id), func.max(model.updated_at)).where(model.origin == "user")
                )
            ).one()
            parts.extend([int(row[0]), row[1]])
        return tuple(parts)

    async def current(self) -> Catalog:
        """The shipped catalog extended with every user entry in the database."""
        now = time.monotonic()
        cached = type(self)._cache.get(self._key)
        if cached is not None and now - cached[2] < _RECHECK_SECONDS:
            return cached[1]
        fingerprint = await self._fingerprint()
        if cached is not None and cached[0] == fingerprint:
            type(self)._cache[self._key] = (fingerprint, cached[1], now)
            return cached[1]
        catalog = Catalog.default()
        if any(fingerprint[0::2]):
            entries: dict[str, list[dict[str, Any]]] = {}
            for keyword, model, _ in KINDS.values():
                rows = (
                    await self.session.execute(select(model).where(model.origin == "user").order_by(model.created_at))
                ).scalars()
                entries[keyword] = [dict(row.spec) for row in rows]
            catalog = catalog.with_entries(**entries)
        type(self)._cache[self._key] = (fingerprint, catalog, now)
        return catalog

    async def load_shipped(self) -> dict[str, int]:
        """Upsert the shipped entries and their aliases; user entries are never touched."""
        counts = {"hardware": 0, "model": 0, "quantization": 0, "aliases": 0}
        now = datetime.now(UTC)
        records = [r for r in Catalog.default().records() if r["builtin"]]
        models = {entry_kind: model for _, model, entry_kind in KINDS.values()}
        kind_names = {entry_kind: kind for kind, (_, _, entry_kind) in KINDS.items()}
        for record in records:
            model = models[record["entry_kind"]]
            fields = record["fields"]
            values = _row_values(record["entry_kind"], fields)
            row = await self.session.get(model, record["id"])
            if row is not None and row.origin == "user":
                continue  # a user entry with a shipped id (added before the data grew) wins
            if row is None:
                row = model(id=record["id"], origin="shipped", created_at=now)
                self.session.add(row)
            for key, value in values.items():
                setattr(row, key, value)
            row.source = fields.get("source")
            row.notes = fields.get("notes")
            row.spec = {}
            row.updated_at = now
            counts[record["entry_kind"]] += 1
        await self.session.flush()
        await self.session.execute(delete(CatalogAlias).where(CatalogAlias.origin == "shipped"))
        seen: set[tuple[str, str]] = set()
        for record in records:
            alias_kind = kind_names[record["entry_kind"]]
            for alias in record["aliases"]:
                alias_key = (alias_kind, alias)
                if alias_key in seen or len(alias) > 300:
                    continue
                seen.add(alias_key)
                self.session.add(CatalogAlias(kind=alias_kind, alias=alias, target_id=record["id"], origin="shipped"))
                counts["aliases"] += 1
        await self.session.commit()
        return counts

    def listing(self, catalog: Catalog, kind: str) -> list[dict[str, Any]]:
        entry_kind = KINDS[kind][2]
        return [_listing_item(r) for r in catalog.records() if r["entry_kind"] == entry_kind]

    async def add(self, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Validate a user entry against the catalog in force and store it."""
        if kind not in KINDS:
            raise NotFound(f"unknown catalog {kind!r}", field="kind")
        keyword, model, entry_kind = KINDS[kind]
        if not isinstance(payload, dict):
            raise InvalidInput("must be a JSON object", field="body")
        catalog = await self.current()
        try:
            extended = catalog.with_entries(**{keyword: [payload]})
        except InvalidInput as exc:
            if exc.field and exc.field.startswith(f"{keyword}[0]"):
                exc.field = exc.field.replace(f"{keyword}[0].", "", 1).replace(f"{keyword}[0]", "body")
            raise
        record = next(r for r in extended.records() if r["entry_kind"] == entry_kind and r["id"] == payload["id"])
        now = datetime.now(UTC)
        row = model(id=payload["id"], origin="user", spec=payload, created_at=now, updated_at=now)
        for key, value in _row_values(entry_kind, record["fields"]).items():
            setattr(row, key, value)
        self.session.add(row)
        for alias in record["aliases"]:
            self.session.add(CatalogAlias(kind=kind, alias=alias, target_id=payload["id"], origin="user"))
        await self.session.commit()
        type(self).invalidate()
        return _listing_item(record)


def _listing_item(record: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": record["id"],
        "origin": "shipped" if record["builtin"] else "user",
        "aliases": record["aliases"],
        **{k: v for k, v in record["fields"].items() if k != "id"},
    }
