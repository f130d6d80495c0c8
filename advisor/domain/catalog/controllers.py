from __future__ import annotations

from typing import Annotated, Any

from litestar import Controller, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody, PathParameter

from advisor.domain.catalog.services import KINDS, CatalogService
from advisor.domain.providers import session_service
from advisor.errors import NotFound

KindParam = Annotated[str, PathParameter(description="hardware, models or quantizations")]


def _kind(kind: str) -> str:
    if kind not in KINDS:
        raise NotFound(f"unknown catalog {kind!r}; use hardware, models or quantizations", field="kind")
    return kind


class CatalogController(Controller):
    path = "/catalog"
    tags = ("catalog",)
    dependencies = {"catalogs": session_service(CatalogService)}

    @get("/{kind:str}", summary="List a catalog (hardware, models, quantizations) with aliases")
    async def list_entries(self, catalogs: NamedDependency[CatalogService], kind: KindParam) -> list[dict[str, Any]]:
        return catalogs.listing(await catalogs.current(), _kind(kind))

    @get("/{kind:str}/{entry_id:path}", summary="One catalog entry by id or alias (Hugging Face ids contain '/')")
    async def get_entry(
        self, catalogs: NamedDependency[CatalogService], kind: KindParam, entry_id: FromPath[str]
    ) -> dict[str, Any]:
        entry_id = entry_id.lstrip("/")  # Litestar's path parameters keep the leading slash
        service = catalogs
        catalog = await service.current()
        kind = _kind(kind)
        if kind == "hardware":
            spec_id = catalog.resolve_hardware(entry_id, field_prefix="entry_id").id
        elif kind == "models":
            spec_id = catalog.resolve_model(entry_id, field_prefix="entry_id")[0].id
        else:
            spec_id = catalog.resolve_quantization(entry_id, field_prefix="entry_id").id
        return next(item for item in service.listing(catalog, kind) if item["id"] == spec_id)

    @post(
        "/{kind:str}",
        summary="Add a custom entry (inline-spec form with an id; models may give a config.json)",
        opt={"role": "admin"},
    )
    async def add_entry(
        self, catalogs: NamedDependency[CatalogService], kind: KindParam, data: JSONBody[dict[str, Any]]
    ) -> dict[str, Any]:
        return await catalogs.add(_kind(kind), data)
