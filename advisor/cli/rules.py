"""``advisor rules list | show ID``: the rule catalogue, from ``GET /api/v1/rules``."""

from __future__ import annotations

from typing import Any

import click

from advisor.cli.client import emit, handle_errors, make_client
from advisor.cli.options import client_options, output_option
from advisor.client.http import Rejected
from advisor.client.render import fmt, render_json, table

__all__ = ["rules_group"]


@click.group("rules")
def rules_group() -> None:
    """The rule catalogue."""


@rules_group.command("list")
@click.option("--group", default=None, help="pre, dec, sch, cap, cfg, reg or meas.")
@click.option("--status", default=None, help="stable, preview or deprecated.")
@output_option("text", "md", "json")
@client_options
@click.pass_context
@handle_errors
def rules_list(ctx: click.Context, /, group: str | None, status: str | None, **p: Any) -> None:
    """Every rule: id, name, phase, action and status."""
    with make_client(ctx, p["url"], p["token"], p["timeout"], p["retries"]) as client:
        rules = client.rules()
    rules = [
        r
        for r in rules
        if (group is None or str(r.get("group", "")).lower() == group.lower())
        and (status is None or r.get("status") == status)
    ]
    if p["output"] == "json":
        emit(render_json(rules))
        return
    rows = [
        [r.get("rule_id"), r.get("name"), r.get("phase"), r.get("action"), r.get("status"), r.get("summary")]
        for r in rules
    ]
    emit(
        table(
            ["id", "name", "phase", "action", "status", "summary"], rows, style="md" if p["output"] == "md" else "text"
        )
    )


@rules_group.command("show")
@click.argument("rule_id")
@output_option("text", "md", "json")
@client_options
@click.pass_context
@handle_errors
def rules_show(ctx: click.Context, /, rule_id: str, **p: Any) -> None:
    """One rule: why it matters, the fix, an example and its thresholds (by id, name or alias)."""
    import difflib

    with make_client(ctx, p["url"], p["token"], p["timeout"], p["retries"]) as client:
        rules = client.rules()
    wanted = rule_id.strip().lower()
    rule = next(
        (
            r
            for r in rules
            if wanted in {str(r.get("rule_id", "")).lower(), str(r.get("name", "")).lower()}
            or wanted in {str(a).lower() for a in r.get("aliases") or []}
        ),
        None,
    )
    if rule is None:
        names = [str(r.get("rule_id")) for r in rules] + [str(r.get("name")) for r in rules]
        close = difflib.get_close_matches(rule_id, names, n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise Rejected(f"no rule {rule_id!r}{hint}", status=404)
    if p["output"] == "json":
        emit(render_json(rule))
        return
    md = p["output"] == "md"
    heading = (
        f"## {rule['rule_id']} {rule['name']}" if md else f"{rule['rule_id']} {rule['name']} ({rule.get('status')})"
    )
    parts = [heading, str(rule.get("summary") or "")]
    for title, key in (("Why is this bad?", "why"), ("Fix", "fix"), ("Example", "example")):
        if rule.get(key):
            parts += ["", f"### {title}" if md else f"{title}", str(rule[key])]
    thresholds = rule.get("thresholds") or []
    if thresholds:
        rows = [
            [
                t.get("key"),
                t.get("direction") or t.get("kind"),
                fmt(t.get("values") or t.get("value")),
                t.get("unit") or "",
                t.get("doc") or "",
            ]
            for t in thresholds
        ]
        parts += [
            "",
            table(["threshold", "direction", "values", "unit", "meaning"], rows, style="md" if md else "text"),
        ]
    if rule.get("docs"):
        parts += ["", f"docs: {rule['docs']}"]
    emit("\n".join(parts))
