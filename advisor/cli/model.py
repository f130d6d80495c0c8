"""``advisor model``: the fitted performance model.

Over the API: ``list`` and ``fit``. On the database (ADVISOR_DATABASE_URL), on the host that runs
the server: ``fit --db`` and ``list --db`` (the same commands with ``--db``), ``activate`` and
``rollback``. The server side imports its stack inside the commands. Exit codes (ExitCode): 1 the
fit failed, 4 refused (unknown version, a fit already running, a version that cannot be served).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from advisor.cli.client import emit, handle_errors, make_client
from advisor.cli.database import run_on_database
from advisor.cli.options import client_options, output_option
from advisor.client.exit_codes import ExitCode
from advisor.client.render import fmt, render_json, table

__all__ = ["model_group"]


@click.group("model")
def model_group() -> None:
    """The fitted performance model."""


@model_group.command("list")
@output_option("text", "json")
@client_options
@click.pass_context
@handle_errors
def model_list(ctx: click.Context, /, **p: Any) -> None:
    """Fitted-model versions with their cross-validated error."""
    with make_client(ctx, p["url"], p["token"], p["timeout"], p["retries"]) as client:
        body = client.models()
    if p["output"] == "json":
        emit(render_json(body))
        return
    rows = []
    for m in body if isinstance(body, list) else []:
        # summary: {target: {scheme: {"mdape": {"model": ...}, "coverage": ...}}} (GET /api/v1/models)
        hardware = {
            t: (s.get("hardware") or {}).get("mdape", {}).get("model") for t, s in (m.get("summary") or {}).items()
        }
        rows.append(
            [
                m.get("version"),
                "*" if m.get("is_active") else "",
                m.get("created_at"),
                m.get("n_train"),
                fmt(hardware.get("decode_tok_s")),
                fmt(hardware.get("prefill_tok_s")),
            ]
        )
    if not rows:
        emit("no fitted versions yet: expectations come from the physics prior (`advisor model fit`)")
        return
    emit(table(["version", "active", "created", "n", "decode MdAPE", "prefill MdAPE"], rows))


@model_group.command("fit")
@click.option("--activate/--no-activate", default=None, help="Make the new version the active one.")
@click.option("--force", is_flag=True, help="Activate even if it loses to a baseline on a CV grouping.")
@output_option("text", "json")
@client_options
@click.pass_context
@handle_errors
def model_fit(ctx: click.Context, /, activate: bool | None, force: bool, **p: Any) -> None:
    """Fit a new model version on the reference data and the fleet's runs."""
    options: dict[str, Any] = {} if activate is None else {"activate": activate}
    if force:
        options["force"] = True
    with make_client(ctx, p["url"], p["token"], p["timeout"], p["retries"]) as client:
        job = client.wait_for_job(client.fit_model(options))
    if p["output"] == "json":
        emit(render_json(job))
    else:
        result = job.get("result") or {}
        emit(
            f"fit job {job.get('id')}: {job.get('status')}"
            + (f", version {result['version']}" if result.get("version") else "")
            + (f" ({job['error']})" if job.get("error") else "")
        )
    if job.get("status") != "succeeded":
        ctx.exit(ExitCode.UNREACHABLE)  # the server could not fit (see the job error), or it timed out
    refused = (job.get("result") or {}).get("activation_refused")
    if refused:
        click.echo(f"advisor: not activated: {refused}", err=True)
        ctx.exit(ExitCode.GATE)


# ------------------------------------------------------------------------------------------------
# server side: on the database


def _pct(value: Any) -> str:
    return f"{value * 100:.1f}%" if isinstance(value, int | float) else "–"


def _summary_table(summary: dict[str, Any]) -> Any:
    from rich.table import Table

    table = Table(title="cross-validated MdAPE (lower is better) and interval coverage (80% nominal)")
    for column in ("target", "grouped by", "model", "linear", "roofline", "roofline × const", "coverage", "beats"):
        table.add_column(column, justify="left" if column in ("target", "grouped by") else "right")
    for target, schemes in summary.items():
        for scheme, values in schemes.items():
            mdape = values.get("mdape") or {}
            table.add_row(
                target,
                scheme,
                _pct(mdape.get("model")),
                _pct(mdape.get("linear")),
                _pct(mdape.get("roofline")),
                _pct(mdape.get("constant")),
                _pct(values.get("coverage")),
                "yes" if values.get("beats_baselines") else "no",
            )
    return table


@click.command("fit")
@click.option("--activate", is_flag=True, help="Serve the new version at once.")
@click.option("--notes", default=None, help="A note stored with the version.")
@click.option("--no-public", is_flag=True, help="Train on the fleet's runs only (not the shipped published runs).")
@click.option("--no-cv", is_flag=True, help="Skip cross-validation (intervals become in-sample; for quick tries).")
@click.option("--force", is_flag=True, help="Activate even if it loses to a baseline on a CV grouping.")
@click.option("--json", "as_json", is_flag=True, help="Print the finished job as JSON.")
def db_fit(activate: bool, notes: str | None, no_public: bool, no_cv: bool, force: bool, as_json: bool) -> None:
    """Fit a new version on the database's runs and the published runs, with a progress bar."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from advisor.domain.models.schemas import FitIn
    from advisor.domain.models.services import JobService, run_fit_job, start_fit

    params = FitIn(activate=activate, notes=notes, include_public=not no_public, cv=not no_cv, force=force)
    console = Console(stderr=True)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())

    async def work(maker: Any) -> Any:
        async with maker() as session:
            job = await start_fit(session, params, trigger="cli")
        with Progress(*columns, console=console, transient=as_json) as bar:
            task = bar.add_task("reading runs", total=None)

            def report(step: str, done: int, total: int) -> None:
                # Called from the fit's worker thread; rich's Progress is thread-safe.
                bar.update(task, description=step, completed=done, total=total or None)

            finished = await run_fit_job(maker, job.id, progress=report)
        return JobService.to_out(finished)

    job = run_on_database(work)
    if as_json:
        import msgspec

        click.echo(json.dumps(msgspec.to_builtins(job), indent=2))
    elif job.status == "succeeded" and job.result:
        result = job.result
        console = Console()
        console.print(
            f"fitted version [bold]{result['version']}[/bold] on {result['n_train']} observations "
            f"({result['fleet_runs']} fleet runs in {result['fleet_cells']} cells) in {result['seconds']} s"
            + (" — active" if result.get("activated") else "")
        )
        console.print(_summary_table(result.get("summary") or {}))
    if job.status != "succeeded":
        click.echo(f"advisor: the fit failed: {job.error}", err=True)
        sys.exit(ExitCode.GATE)
    refused = (job.result or {}).get("activation_refused")
    if refused:
        click.echo(f"advisor: not activated: {refused}", err=True)
        sys.exit(ExitCode.GATE)


@click.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the versions as JSON.")
def db_list(as_json: bool) -> None:
    """Fitted-model versions in the database, newest first."""
    from advisor.domain.models.services import FittedModelService

    async def work(maker: Any) -> Any:
        async with maker() as session:
            return await FittedModelService(session=session).versions()

    versions = run_on_database(work)
    if as_json:
        import msgspec

        click.echo(json.dumps(msgspec.to_builtins(versions), indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table()
    for column in ("version", "active", "created", "n", "decode MdAPE", "prefill MdAPE", "loadable", "notes"):
        table.add_column(column)
    for v in versions:
        hardware = {t: (s.get("hardware") or {}).get("mdape", {}).get("model") for t, s in v.summary.items()}
        table.add_row(
            v.version,
            "*" if v.is_active else "",
            f"{v.created_at:%Y-%m-%d %H:%M}",
            str(v.n_train),
            _pct(hardware.get("decode_tok_s")),
            _pct(hardware.get("prefill_tok_s")),
            "yes" if v.loadable else "no (library versions differ)",
            v.notes or "",
        )
    Console().print(table if versions else "no fitted versions yet: `advisor model fit --db`")


@click.command("activate")
@click.argument("version")
def db_activate(version: str) -> None:
    """Serve VERSION from every worker (they pick it up within seconds; no restart)."""
    from advisor.domain.models.services import FittedModelService

    async def work(maker: Any) -> Any:
        async with maker() as session:
            return await FittedModelService(session=session).activate(version)

    result = run_on_database(work)
    click.echo(f"active: {result.active} (was {result.previous or 'the physics prior'})")


@click.command("rollback")
def db_rollback() -> None:
    """Restore the version that was active before the last activation."""
    from advisor.domain.models.services import FittedModelService

    async def work(maker: Any) -> Any:
        async with maker() as session:
            return await FittedModelService(session=session).rollback()

    result = run_on_database(work)
    click.echo(f"active: {result.active or 'the physics prior'} (was {result.previous or 'the physics prior'})")


def _with_db_flag(client: click.Command, server: click.Command) -> click.Command:
    """``client`` as it was, plus ``--db``, which runs ``server`` on the database instead. The
    server command's own options are added unless the client already has one of that name."""
    taken = {p.name for p in client.params}
    extra = [p for p in server.params if p.name not in taken]
    db = click.Option(["--db"], is_flag=True, help="Work on the database (ADVISOR_DATABASE_URL), server side.")

    def callback(**kwargs: Any) -> Any:
        ctx = click.get_current_context()
        if kwargs.pop("db"):
            # A shared name keeps the client's option (``--activate/--no-activate``, default None):
            # None means "not given", which a server-side flag reads as off.
            values = {
                p.name: bool(kwargs.get(p.name)) if isinstance(p, click.Option) and p.is_flag else kwargs.get(p.name)
                for p in server.params
                if p.name
            }
            return ctx.invoke(server, **values)
        return ctx.invoke(client, **{p.name: kwargs[p.name] for p in client.params if p.name})

    return click.Command(
        client.name,
        params=[*client.params, *extra, db],
        callback=callback,
        help=f"{client.help or ''}\n\nWith --db: {server.help or ''}",
        short_help=client.short_help,
        context_settings=client.context_settings,
    )


def _extend(group: click.Group) -> None:
    """Add the server-side commands to the ``model`` group: ``fit``/``list`` gain ``--db`` when
    the client already defines them, ``activate``/``rollback`` are added."""
    for server in (db_fit, db_list, db_activate, db_rollback):
        name = server.name or ""
        existing = group.commands.get(name)
        group.add_command(_with_db_flag(existing, server) if existing is not None else server, name)


# `model fit|list --db`, `model activate|rollback` work on the database beside the client's commands.
_extend(model_group)
