"""``advisor compare RUN_A RUN_B``: what changed between two stored runs, and which metrics moved
beyond noise (the comparison itself is :mod:`advisor.client.compare`)."""

from __future__ import annotations

from typing import Any

import click

from advisor.cli.client import emit, handle_errors, make_client
from advisor.cli.options import client_options, output_option
from advisor.client.compare import Comparison, compare_runs
from advisor.client.exit_codes import ExitCode
from advisor.client.render import fmt, render_json, table

__all__ = ["compare_command"]


def _comparison_text(comp: Comparison, style: str, show_all: bool) -> str:
    lines = [f"run {comp.run_a} → run {comp.run_b}"]
    changes = [("setup", c) for c in comp.setup_changes] + [("workload", c) for c in comp.workload_changes]
    if changes:
        lines += [
            "",
            "what changed:",
            table(["", "field", "A", "B"], [[k, c.path, fmt(c.a), fmt(c.b)] for k, c in changes], style=style),
        ]
    else:
        lines += ["", "setup and workload are identical"]
    moves = comp.moves if show_all else comp.moved
    lines.append("")
    if moves:
        lines.append("metrics" + ("" if show_all else " that moved beyond noise") + ":")
        rows = [
            [
                m.metric,
                m.a,
                m.b,
                fmt(m.relative, pct=True) if m.relative is not None else "–",
                f"±{m.noise:.0%}",
                m.verdict,
            ]
            for m in moves
        ]
        lines.append(table(["metric", "A", "B", "change", "noise", "verdict"], rows, style=style))
    else:
        lines.append("no metric moved beyond noise")
    lines.extend(f"note: {note}" for note in comp.notes)
    return "\n".join(lines)


@click.command("compare")
@click.argument("run_a", type=int)
@click.argument("run_b", type=int)
@click.option(
    "--noise",
    type=click.FloatRange(min=0),
    default=0.05,
    show_default=True,
    help="Relative noise band for means and p50 (tails get 2–3×).",
)
@click.option("--all", "show_all", is_flag=True, help="Show every shared metric, not only those that moved.")
@click.option("--fail-on-regression", is_flag=True, help="Exit 1 when any metric got worse beyond noise.")
@output_option("text", "md", "json")
@client_options
@click.pass_context
@handle_errors
def compare_command(
    ctx: click.Context, /, run_a: int, run_b: int, noise: float, show_all: bool, fail_on_regression: bool, **p: Any
) -> None:
    """What changed between two runs, and which metrics moved beyond noise.

    "Change one thing at a time": when several setup fields differ, the comparison says the moves
    cannot be credited to one of them.
    """
    with make_client(ctx, p["url"], p["token"], p["timeout"], p["retries"]) as client:
        comp = compare_runs(client.run(run_a), client.run(run_b), noise=noise)
    if p["output"] == "json":
        emit(render_json(comp.to_dict()))
    else:
        emit(_comparison_text(comp, "md" if p["output"] == "md" else "text", show_all))
    if fail_on_regression and comp.regressions:
        worse = ", ".join(m.metric for m in comp.regressions)
        click.echo(f"advisor: gate failed: worse beyond noise: {worse}", err=True)
        ctx.exit(ExitCode.GATE)
