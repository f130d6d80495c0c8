"""Server-side commands: serve, db upgrade|downgrade|current|check."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import TypeVar

import click
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from advisor.client.commands import catalog_add, catalog_list, catalog_show
from advisor.settings import Settings, SettingsError, get_settings

T = TypeVar("T")


def _settings_or_exit() -> Settings:
    try:
        return get_settings()
    except SettingsError as exc:
        click.echo(f"advisor: {exc}", err=True)
        sys.exit(2)


EXIT_REFUSED = 4


def run_on_database(work: Callable[[async_sessionmaker[AsyncSession]], Awaitable[T]]) -> T:
    """Run ``work(session_maker)`` against the configured database (ADVISOR_DATABASE_URL) and
    dispose of the engine; an error the API would answer with a 4xx exits 4 with its message."""
    from advisor.db.config import create_engine
    from advisor.errors import AdvisorError

    settings = _settings_or_exit()

    async def main() -> T:
        engine = create_engine(settings.db, pool=False)
        try:
            return await work(async_sessionmaker(engine, expire_on_commit=False))
        finally:
            await engine.dispose()

    try:
        return asyncio.run(main())
    except AdvisorError as exc:
        click.echo(f"advisor: {exc.detail}", err=True)
        sys.exit(EXIT_REFUSED)


@click.command("serve")
@click.option("--host", default=None, help="Interface to bind (ADVISOR_HOST, default 127.0.0.1).")
@click.option("--port", type=int, default=None, help="TCP port (ADVISOR_PORT, default 8000).")
@click.option("--workers", type=int, default=None, help="Worker processes (ADVISOR_WORKERS, default 1).")
@click.option("--reload", is_flag=True, help="Restart on code changes (development).")
def serve_command(host: str | None, port: int | None, workers: int | None, reload: bool) -> None:
    """Serve the API (and OpenAPI at /schema)."""
    import uvicorn

    settings = _settings_or_exit()
    uvicorn.run(
        "advisor.server.asgi:app",
        host=host or settings.server.host,
        port=port or settings.server.port,
        workers=None if reload else (workers or settings.server.workers),
        reload=reload,
        log_level=settings.server.log_level,
        proxy_headers=True,
        access_log=False,  # requests are logged by the app, with their request id
    )


@click.group("db")
def db_group() -> None:
    """Database migrations (Alembic)."""


@db_group.command("upgrade")
@click.argument("revision", default="head")
@click.option("--no-catalog", is_flag=True, help="Do not (re)load the shipped catalogs after migrating.")
def db_upgrade(revision: str, no_catalog: bool) -> None:
    """Apply migrations up to REVISION (default: head), then load the shipped catalogs."""
    from advisor.db import migrate

    settings = _settings_or_exit()
    migrate.upgrade(settings.db, revision)
    click.echo(f"database at {migrate.current_revision(settings.db)}")
    if not no_catalog and revision == "head":
        _echo_catalog_counts(_load_catalog(settings))


@db_group.command("downgrade")
@click.argument("revision", default="-1")
def db_downgrade(revision: str) -> None:
    """Revert migrations down to REVISION (default: one step; 'base' for all)."""
    from advisor.db import migrate

    settings = _settings_or_exit()
    migrate.downgrade(settings.db, revision)
    click.echo(f"database at {migrate.current_revision(settings.db) or 'base'}")


@db_group.command("current")
def db_current() -> None:
    """Print the database's revision and the code's head revision."""
    from advisor.db import migrate

    settings = _settings_or_exit()
    current = migrate.current_revision(settings.db)
    head = migrate.head_revision()
    state = "up to date" if current == head else "behind: run `advisor db upgrade`"
    click.echo(f"current: {current or 'base'}\nhead:    {head}\n{state}")


@db_group.command("check")
def db_check() -> None:
    """Fail when the models and the migrations disagree (alembic check)."""
    from advisor.db import migrate

    migrate.check(_settings_or_exit().db)
    click.echo("models and migrations agree")


@click.group("catalog")
def catalog_group() -> None:
    """Hardware, model and quantization catalogs."""


@catalog_group.command("load")
def catalog_load() -> None:
    """Load the shipped catalogs into the database (idempotent; user entries are kept)."""
    _echo_catalog_counts(_load_catalog(_settings_or_exit()))


def _load_catalog(settings: Settings) -> dict[str, int]:
    import asyncio

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


def _echo_catalog_counts(counts: dict[str, int]) -> None:
    click.echo(
        f"catalog loaded: {counts['hardware']} hardware, {counts['model']} models, "
        f"{counts['quantization']} quantizations, {counts['aliases']} aliases"
    )


# Client-side subcommands: they read the catalog through the API of a running advisor (--url).
catalog_group.add_command(catalog_list)
catalog_group.add_command(catalog_show)
catalog_group.add_command(catalog_add)
