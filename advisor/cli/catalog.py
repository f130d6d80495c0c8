"""``advisor catalog``: hardware, model and quantization catalogs.

``list``, ``show`` and ``add`` read and extend the catalog through the API of a running advisor
(``--url``); ``load`` (server side) loads the shipped catalogs into the database, importing its
stack inside the command.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

import click

from advisor.cli.client import emit, handle_errors, make_client
from advisor.cli.database import settings_or_exit
from advisor.cli.options import client_options, output_option
from advisor.client.render import fmt, render_json, table

if TYPE_CHECKING:
    from advisor.settings import Settings

__all__ = ["catalog_group", "echo_catalog_counts", "load_catalog"]


@click.group("catalog")
def catalog_group() -> None:
    """Hardware, model and quantization catalogs."""


@catalog_group.command("load")
def catalog_load() -> None:
    """Load the shipped catalogs into the database (idempotent; user entries are kept)."""
    echo_catalog_counts(load_catalog(settings_or_exit()))


def load_catalog(settings: Settings) -> dict[str, int]:
    """Load the shipped catalogs into the configured database; the counts of what is there."""
    from sqlalchemy.ext.asyncio import async_sessionmaker

    from advisor.db.config import create_engine
    from advisor.domain.catalog.services import CatalogService

    async def load() -> dict[str, int]:
        engine = create_engine(settings.db, pool=False)
        try:
            async with async_sessionmaker(engine, expire_on_commit=False)() as session:
                return await CatalogService(session).load_shipped()
        finally:
            await engine.dispose()

    return asyncio.run(load())


def echo_catalog_counts(counts: dict[str, int]) -> None:
    click.echo(
        f"catalog loaded: {counts['hardware']} hardware, {counts['model']} models, "
        f"{counts['quantization']} quantizations, {counts['aliases']} aliases"
    )


# ------------------------------------------------------------------------------------------------
# client side: over the API


_KINDS = click.Choice(["hardware", "models", "quantizations"])


@catalog_group.command("list")
@click.argument("kind", type=_KINDS)
@click.option("--origin", type=click.Choice(["shipped", "user"]), default=None)
@output_option("text", "md", "json")
@client_options
@click.pass_context
@handle_errors
def catalog_list(ctx: click.Context, /, kind: str, origin: str | None, **p: Any) -> None:
    """List a catalog from the advisor server."""
    with make_client(ctx, p["url"], p["token"], p["timeout"], p["retries"]) as client:
        entries = client.catalog(kind)
    entries = [e for e in entries if origin is None or e.get("origin") == origin]
    if p["output"] == "json":
        emit(render_json(entries))
        return
    columns = {
        "hardware": ["id", "name", "mem_bandwidth_gb_s", "memory_gb", "fp16_tflops", "origin"],
        "models": ["id", "name", "params_b", "active_params_b", "num_hidden_layers", "origin"],
        "quantizations": ["id", "name", "bits_per_weight", "origin"],
    }[kind]
    rows = [[e.get(c) if e.get(c) is not None else "–" for c in columns] for e in entries]
    emit(table(columns, rows, style="md" if p["output"] == "md" else "text"))


@catalog_group.command("show")
@click.argument("kind", type=_KINDS)
@click.argument("entry_id")
@output_option("text", "json")
@client_options
@click.pass_context
@handle_errors
def catalog_show(ctx: click.Context, /, kind: str, entry_id: str, **p: Any) -> None:
    """One catalog entry, by id or alias."""
    with make_client(ctx, p["url"], p["token"], p["timeout"], p["retries"]) as client:
        entry = client.catalog_entry(kind, entry_id)
    if p["output"] == "json":
        emit(render_json(entry))
        return
    emit("\n".join(f"{k}: {fmt(v)}" for k, v in entry.items()))


@catalog_group.command("add")
@click.argument("kind", type=_KINDS)
@click.argument("spec", type=click.File("r", encoding="utf-8"))
@output_option("text", "json")
@client_options
@click.pass_context
@handle_errors
def catalog_add(ctx: click.Context, /, kind: str, spec: Any, **p: Any) -> None:
    """Add a custom entry from a JSON file ('-' for stdin): the inline-spec form with an "id"
    (models may give a Hugging Face config.json body plus "id")."""
    try:
        entry = json.load(spec)
    except ValueError as exc:
        raise click.BadParameter(f"not JSON: {exc}", param_hint="SPEC") from exc
    if not isinstance(entry, dict):
        raise click.BadParameter("must be a JSON object", param_hint="SPEC")
    with make_client(ctx, p["url"], p["token"], p["timeout"], p["retries"]) as client:
        added = client.add_catalog_entry(kind, entry)
    if p["output"] == "json":
        emit(render_json(added))
        return
    emit(f"added {kind} entry {added.get('id')}")
