"""Loading the shipped catalogs into the database is idempotent and keeps user entries."""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

from advisor.catalog import Catalog
from advisor.db.models import CatalogAlias, HardwareEntry, ModelEntry, QuantizationEntry
from advisor.domain.catalog.services import CatalogService


async def _load_and_count(url: str) -> dict[str, Any]:
    engine = create_async_engine(url)
    try:
        async with async_sessionmaker(engine, expire_on_commit=False)() as session:
            counts = await CatalogService(session).load_shipped()
            out: dict[str, Any] = {"loaded": counts}
            for name, model in (("hw", HardwareEntry), ("models", ModelEntry), ("quants", QuantizationEntry)):
                out[name] = (await session.execute(select(func.count()).select_from(model))).scalar_one()
            out["aliases"] = (await session.execute(select(func.count()).select_from(CatalogAlias))).scalar_one()
            out["user"] = (
                (await session.execute(select(HardwareEntry.id).where(HardwareEntry.origin == "user"))).scalars().all()
            )
            h100 = await session.get(HardwareEntry, "nvidia-h100-sxm")
            out["h100_bandwidth"] = h100.mem_bandwidth_gb_s if h100 else None
            return out
    finally:
        await engine.dispose()


def test_load_is_idempotent_and_keeps_user_entries(client: Any, clean_db: str) -> None:
    first = asyncio.run(_load_and_count(clean_db))
    shipped = Catalog.default()
    assert first["hw"] == len(shipped.list_hardware())
    assert first["models"] == len(shipped.list_models())
    assert first["quants"] == len(shipped.list_quantizations())
    assert first["aliases"] > 100
    assert first["h100_bandwidth"] == 3350

    added = client.post(
        "/api/v1/catalog/hardware", json={"id": "lab-npu", "mem_bandwidth_gb_s": 500, "aliases": ["NPU-1"]}
    )
    assert added.status_code == 201, added.text

    second = asyncio.run(_load_and_count(clean_db))
    assert second["hw"] == first["hw"] + 1
    assert (second["models"], second["quants"]) == (first["models"], first["quants"])
    assert second["aliases"] == first["aliases"] + 1
    assert second["user"] == ["lab-npu"]
    assert client.get("/api/v1/catalog/hardware/NPU-1").json()["id"] == "lab-npu"
