"""Server-side maintenance commands that work on the database directly (ADVISOR_DATABASE_URL)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import click
from sqlalchemy.ext.asyncio import async_sessionmaker

from advisor.cli.server_commands import _settings_or_exit

__all__ = ["runs_reparse_command"]


@click.command("reparse")
@click.option("--run", "run_ids", type=int, multiple=True, help="Only these run ids (repeatable).")
@click.option("--format", "format_id", default=None, help="Only runs parsed from this format id.")
@click.option("--dry-run", is_flag=True, help="Report what would change; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def runs_reparse_command(run_ids: tuple[int, ...], format_id: str | None, dry_run: bool, as_json: bool) -> None:
    """Re-derive stored runs from their raw payloads with today's parsers (database side)."""
    from advisor.db.config import create_engine
    from advisor.domain.runs.reparse import ReparseService

    settings = _settings_or_exit()

    async def run() -> dict[str, Any]:
        engine = create_engine(settings.db, pool=False)
        try:
            async with async_sessionmaker(engine, expire_on_commit=False)() as session:
                report = await ReparseService(session).reparse(
                    run_ids=list(run_ids) or None, format_id=format_id, dry_run=dry_run
                )
        finally:
            await engine.dispose()
        return {
            "checked": report.checked,
            "changed": report.changed,
            "unchanged": report.unchanged,
            "duplicates": report.duplicates,
            "failed": report.failed,
            "dry_run": dry_run,
        }

    result = asyncio.run(run())
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    verb = "would change" if dry_run else "changed"
    click.echo(
        f"checked {result['checked']} runs: {verb} {len(result['changed'])}, unchanged {result['unchanged']}, "
        f"duplicates {len(result['duplicates'])}, failed {len(result['failed'])}"
    )
    for run_id, error in result["failed"].items():
        click.echo(f"  run {run_id}: {error}", err=True)
