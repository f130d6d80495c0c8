"""``advisor report weekly``: the weekly fleet report.

By default it asks a running advisor (``GET /api/v1/reports/weekly``). With ``--db`` it builds the
report on the database (ADVISOR_DATABASE_URL), server side, with a progress bar, and ``--deliver``
also posts it to ADVISOR_REPORT_WEBHOOK_URL: that is the command a cron job or a Kubernetes CronJob
runs (docs/reports.md). The server stack is imported inside the ``--db`` path only.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from advisor.cli.client import handle_errors, make_client
from advisor.cli.options import client_options

if TYPE_CHECKING:
    from advisor.reports.context import WeeklyReport

__all__ = ["report_group"]


@click.group("report")
def report_group() -> None:
    """The weekly fleet report."""


@report_group.command("weekly")
@click.option(
    "--week", default=None, metavar="YYYY-Www", help="ISO week, e.g. 2026-W48 (default: the last complete week)."
)
@click.option("--format", "fmt", type=click.Choice(["md", "json", "html"]), default="md", show_default=True)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Write to FILE, not stdout.")
@click.option("--refresh", is_flag=True, help="Rebuild the week's stored snapshot.")
@click.option("--db", is_flag=True, help="Build on the database (ADVISOR_DATABASE_URL), server side.")
@click.option("--deliver", is_flag=True, help="With --db: also post it to ADVISOR_REPORT_WEBHOOK_URL.")
@client_options
@click.pass_context
@handle_errors
def weekly_command(
    ctx: click.Context,
    /,
    week: str | None,
    fmt: str,
    out: Path | None,
    refresh: bool,
    db: bool,
    deliver: bool,
    **p: Any,
) -> None:
    """The fleet report of one ISO week against the week before."""
    if deliver and not db:
        raise click.UsageError("--deliver works with --db (the server side holds the webhook setting)")
    if db:
        body = _on_database(week, fmt, refresh=refresh, deliver=deliver)
    else:
        with make_client(ctx, p["url"], p["token"], p["timeout"], p["retries"]) as client:
            body = client.weekly_report(week, format=fmt, refresh=refresh)
    if out is not None:
        out.write_bytes(body)
        click.echo(f"wrote {out} ({len(body)} bytes)", err=True)
    else:
        click.echo(body.decode().rstrip("\n"))


def _render(report: WeeklyReport, fmt: str) -> bytes:
    from advisor.reports.render import render_html, render_json, render_markdown

    if fmt == "json":
        return render_json(report)
    return (render_html(report) if fmt == "html" else render_markdown(report)).encode()


def _on_database(week_text: str | None, fmt: str, *, refresh: bool, deliver: bool) -> bytes:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from advisor.cli.database import run_on_database, settings_or_exit
    from advisor.domain.reports.delivery import DeliveryFailed
    from advisor.domain.reports.delivery import deliver as post_report
    from advisor.domain.reports.services import PROGRESS_STEPS, ReportService
    from advisor.reports.weeks import IsoWeek

    try:
        week = IsoWeek.parse(week_text) if week_text else None
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--week") from None
    settings = settings_or_exit()
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())

    async def work(maker: Any) -> WeeklyReport:
        with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
            task = bar.add_task("report", total=PROGRESS_STEPS)
            async with maker() as session:
                report = await ReportService(session).weekly(
                    week, refresh=refresh, progress=lambda step: bar.update(task, description=step, advance=1)
                )
            bar.update(task, completed=PROGRESS_STEPS)
        if deliver:
            if not settings.report.webhook_url:
                raise click.UsageError("--deliver needs ADVISOR_REPORT_WEBHOOK_URL")
            try:
                attempts = await post_report(report, settings.report)
            except DeliveryFailed as exc:
                raise click.ClickException(str(exc)) from exc
            click.echo(f"delivered {report.week} to the webhook ({attempts} attempts)", err=True)
        return report

    return _render(run_on_database(work), fmt)
