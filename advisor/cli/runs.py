"""``advisor runs list | show ID | raw ID`` over the API, and ``advisor runs reparse`` on the
database (server side; its stack is imported inside the command)."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Mapping
from typing import Any

import click

from advisor.cli.client import emit, handle_errors, make_client
from advisor.cli.database import settings_or_exit
from advisor.cli.options import client_options, output_option
from advisor.client.render import render_json, render_results, table

__all__ = ["runs_group"]


@click.group("runs")
def runs_group() -> None:
    """Stored runs: list, show, raw."""


def _p50(metrics: Mapping[str, Any], key: str) -> Any:
    value = metrics.get(key)
    return value.get("p50", value.get("mean")) if isinstance(value, dict) else value


@runs_group.command("list")
@click.option("--deployment", "-d", default=None)
@click.option("--runtime", default=None)
@click.option("--hardware", default=None)
@click.option("--model", default=None)
@click.option("--quantization", default=None)
@click.option("--verdict", type=click.Choice(["pass", "warn", "fail"]), default=None)
@click.option("--since", default=None, metavar="ISO-TIME")
@click.option("--until", default=None, metavar="ISO-TIME")
@click.option("--limit", type=click.IntRange(1, 500), default=20, show_default=True)
@click.option("--all", "all_pages", is_flag=True, help="Follow the cursor to the last page.")
@output_option("text", "md", "json")
@client_options
@click.pass_context
@handle_errors
def runs_list(ctx: click.Context, /, limit: int, all_pages: bool, **p: Any) -> None:
    """Runs, newest first."""
    filters = {
        k: p[k] for k in ("deployment", "runtime", "hardware", "model", "quantization", "verdict", "since", "until")
    }
    with make_client(ctx, p["url"], p["token"], p["timeout"], p["retries"]) as client:
        if all_pages:
            items = list(client.iter_runs(page_size=limit, **filters))
            total = len(items)
        else:
            page = client.runs(limit=limit, **filters)
            items, total = list(page.get("items") or []), int(page.get("total") or 0)
    if p["output"] == "json":
        emit(render_json({"items": items, "total": total}))
        return
    rows = []
    for run in items:
        setup, metrics = run.get("setup") or {}, run.get("metrics") or {}
        rows.append(
            [
                run.get("id"),
                str(run.get("measured_at", ""))[:16].replace("T", " "),
                run.get("deployment") or "–",
                setup.get("runtime") or "–",
                setup.get("hardware") or "–",
                setup.get("model") or "–",
                setup.get("quantization") or "–",
                run.get("verdict") or "–",
                _p50(metrics, "ttft_ms"),
                _p50(metrics, "itl_ms"),
                metrics.get("decode_tok_s"),
            ]
        )
    headers = [
        "id",
        "measured",
        "deployment",
        "runtime",
        "hardware",
        "model",
        "quant",
        "verdict",
        "TTFT p50",
        "ITL p50",
        "decode tok/s",
    ]
    emit(table(headers, rows, style="md" if p["output"] == "md" else "text"))
    emit(f"{len(items)} of {total} run(s)")


@runs_group.command("show")
@click.argument("run_id", type=int)
@output_option()
@client_options
@click.pass_context
@handle_errors
def runs_show(ctx: click.Context, /, run_id: int, **p: Any) -> None:
    """One run with its ranked recommendations."""
    with make_client(ctx, p["url"], p["token"], p["timeout"], p["retries"]) as client:
        run = client.run(run_id)
        recs = client.recommendations(run_id)
        base = client.base_url
    result = {"run": run, "verdict": run.get("verdict"), "recommendations": recs, "expectations": {}}
    if p["output"] == "json":
        emit(render_json(result))
        return
    emit(render_results([(None, result)], p["output"], base_url=base))


@runs_group.command("raw")
@click.argument("run_id", type=int)
@client_options
@click.pass_context
@handle_errors
def runs_raw(ctx: click.Context, /, run_id: int, **p: Any) -> None:
    """The original bytes a run was parsed from, to stdout."""
    with make_client(ctx, p["url"], p["token"], p["timeout"], p["retries"]) as client:
        data = client.raw(run_id)
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()


@runs_group.command("reparse")
@click.option("--run", "run_ids", type=int, multiple=True, help="Only these run ids (repeatable).")
@click.option("--format", "format_id", default=None, help="Only runs parsed from this format id.")
@click.option("--dry-run", is_flag=True, help="Report what would change; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def runs_reparse(run_ids: tuple[int, ...], format_id: str | None, dry_run: bool, as_json: bool) -> None:
    """Re-derive stored runs from their raw payloads with today's parsers (database side)."""
    from sqlalchemy.ext.asyncio import async_sessionmaker

    from advisor.db.config import create_engine
    from advisor.domain.runs.reparse import ReparseService

    settings = settings_or_exit()

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
