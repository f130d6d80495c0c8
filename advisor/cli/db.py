"""``advisor db upgrade | downgrade | current | check | backup | restore``: the database migrations
(Alembic) and SQLite backups, server side; the migration stack is imported inside the commands."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import click

from advisor.cli.catalog import echo_catalog_counts, load_catalog
from advisor.cli.database import settings_or_exit
from advisor.client.exit_codes import ExitCode

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


_PG_HINT = (
    "the database is Postgres: back it up with `pg_dump --format=custom --file=advisor.dump DBNAME` and "
    "restore with `pg_restore --clean --if-exists --dbname=DBNAME advisor.dump` (docs/security.md)"
)


def _sqlite_path() -> Path:
    """The configured SQLite file, or exit 2 (Postgres has its own tools; :memory: has no file)."""
    from sqlalchemy.engine import make_url

    settings = settings_or_exit()
    if not settings.db.is_sqlite:
        click.echo(f"advisor: {_PG_HINT}", err=True)
        sys.exit(ExitCode.USAGE)
    database = make_url(settings.db.url).database
    if not database or database == ":memory:":
        click.echo("advisor: an in-memory database has nothing to back up", err=True)
        sys.exit(ExitCode.USAGE)
    return Path(database)


def _copy(source: sqlite3.Connection, target: sqlite3.Connection) -> None:
    # SQLite's online backup API: a consistent copy page by page while writers go on (the copy
    # restarts when a writer changes a page already copied), never a file copy of a live database.
    with target:
        source.backup(target, pages=1024)


def _check_backup(path: Path) -> None:
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
            status = conn.execute("PRAGMA integrity_check").fetchone()[0]
            conn.execute("SELECT version_num FROM alembic_version").fetchone()
    except sqlite3.DatabaseError as exc:
        click.echo(f"advisor: {path} is not an advisor SQLite backup: {exc}", err=True)
        sys.exit(ExitCode.REJECTED)
    if status != "ok":
        click.echo(f"advisor: {path} fails SQLite's integrity check: {status}", err=True)
        sys.exit(ExitCode.REJECTED)


@db_group.command("backup")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
def db_backup(path: Path) -> None:
    """Copy the SQLite database to PATH with SQLite's online backup API (the server may keep running).
    For Postgres, use pg_dump (see docs/security.md)."""
    source_path = _sqlite_path()
    if path.exists():
        click.echo(f"advisor: {path} exists; choose a new file", err=True)
        sys.exit(ExitCode.USAGE)
    source = sqlite3.connect(f"file:{source_path}?mode=ro", uri=True)
    target = sqlite3.connect(path)
    try:
        _copy(source, target)
    finally:
        source.close()
        target.close()
    _check_backup(path)
    click.echo(f"backed up {source_path} to {path} ({path.stat().st_size} bytes)")


@db_group.command("restore")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--yes", is_flag=True, help="Replace the current database without asking.")
def db_restore(path: Path, yes: bool) -> None:
    """Replace the SQLite database with the backup at PATH (checked first), through the online
    backup API. Stop the server first: its workers' caches would not see the change. For Postgres,
    use pg_restore (see docs/security.md)."""
    target_path = _sqlite_path()
    _check_backup(path)
    if not yes:
        click.confirm(f"replace {target_path} with {path}?", abort=True)
    source = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    target = sqlite3.connect(target_path)
    try:
        _copy(source, target)
    finally:
        source.close()
        target.close()
    click.echo(f"restored {target_path} from {path}")
