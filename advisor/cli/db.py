"""``advisor db upgrade | downgrade | current | check``: the database migrations (Alembic), server
side; the migration stack is imported inside the commands."""

from __future__ import annotations

import click

from advisor.cli.catalog import echo_catalog_counts, load_catalog
from advisor.cli.database import settings_or_exit

__all__ = ["db_group"]


@click.group("db")
def db_group() -> None:
    """Database migrations (Alembic)."""


@db_group.command("upgrade")
@click.argument("revision", default="head")
@click.option("--no-catalog", is_flag=True, help="Do not (re)load the shipped catalogs after migrating.")
def db_upgrade(revision: str, no_catalog: bool) -> None:
    """Apply migrations up to REVISION (default: head), then load the shipped catalogs."""
    from advisor.db import migrate

    settings = settings_or_exit()
    migrate.upgrade(settings.db, revision)
    click.echo(f"database at {migrate.current_revision(settings.db)}")
    if not no_catalog and revision == "head":
        echo_catalog_counts(load_catalog(settings))


@db_group.command("downgrade")
@click.argument("revision", default="-1")
def db_downgrade(revision: str) -> None:
    """Revert migrations down to REVISION (default: one step; 'base' for all)."""
    from advisor.db import migrate

    settings = settings_or_exit()
    migrate.downgrade(settings.db, revision)
    click.echo(f"database at {migrate.current_revision(settings.db) or 'base'}")


@db_group.command("current")
def db_current() -> None:
    """Print the database's revision and the code's head revision."""
    from advisor.db import migrate

    settings = settings_or_exit()
    current = migrate.current_revision(settings.db)
    head = migrate.head_revision()
    state = "up to date" if current == head else "behind: run `advisor db upgrade`"
    click.echo(f"current: {current or 'base'}\nhead:    {head}\n{state}")


@db_group.command("check")
def db_check() -> None:
    """Fail when the models and the migrations disagree (alembic check)."""
    from advisor.db import migrate

    migrate.check(settings_or_exit().db)
    click.echo("models and migrations agree")
