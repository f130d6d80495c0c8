"""Renderers of the weekly report: JSON (the API), Markdown (chat and PRs) and HTML (the web page,
with inline SVG charts from :mod:`advisor.charts`)."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Any

import msgspec
from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from advisor.charts import Bar, Mark, Series, SloLine, bars_svg, trend_svg
from advisor.reports.context import Change, WeeklyReport

__all__ = ["fmt_change", "fmt_value", "html_context", "render_html", "render_json", "render_markdown", "render_slack"]

_FLEET_LABELS = {
    "deployments": "deployments with runs",
    "runs": "runs",
    "slo_attainment": "SLO attainment",
    "decode_efficiency_median": "median decode efficiency (of the bandwidth ceiling)",
    "prefill_efficiency_median": "median prefill efficiency (of the compute ceiling)",
}
_RATIOS = {"slo_attainment", "decode_efficiency_median", "prefill_efficiency_median"}


def fmt_value(value: float | None, unit: str = "") -> str:
    if value is None:
        return "–"
    if unit == "ratio":
        return f"{value:.1%}"
    text = f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.3g}"
    return f"{text} {unit}".strip()


def fmt_change(value: float | None, *, points: bool = False) -> str:
    """A relative change as ``+12.0%``; ``points`` for the change of a ratio (``+3.1 pp``)."""
    if value is None:
        return "–"
    return f"{value * 100:+.1f} pp" if points else f"{value:+.1%}"


def render_json(report: WeeklyReport) -> bytes:
    return msgspec.json.format(msgspec.json.encode(report), indent=2)


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return out


def _setup_text(change: Change) -> str:
    return "; ".join(f"{s.field}: {s.last_week} → {s.this_week}" for s in change.setup_changes) or "no setup change"


def _fleet_rows(report: WeeklyReport) -> list[list[str]]:
    rows = []
    for m in report.fleet:
        ratio = m.name in _RATIOS
        unit = "ratio" if ratio else ""
        change = fmt_change(m.change, points=True) if ratio else (f"{m.change:+,.0f}" if m.change is not None else "–")
        rows.append(
            [_FLEET_LABELS.get(m.name, m.name), fmt_value(m.this_week, unit), fmt_value(m.last_week, unit), change]
        )
    return rows


def render_markdown(report: WeeklyReport) -> str:
    lines = [
        f"# Weekly fleet report {report.week}",
        "",
        f"Compared with {report.previous_week}. Significance: {report.noise_test}.",
        "",
    ]
    lines += ["## Fleet", "", *_table(["", "this week", "last week", "change"], _fleet_rows(report)), ""]

    lines += ["## Regressions", ""]
    if report.regressions:
        lines += _table(
            ["deployment", "metric", "last week", "this week", "change", "p", "runs", "what changed"],
            [
                [
                    r.deployment,
                    r.metric,
                    fmt_value(r.last_week, r.unit),
                    fmt_value(r.this_week, r.unit),
                    fmt_change(r.change),
                    f"{r.p_value:.2g}",
                    str(len(r.runs)),
                    _setup_text(r),
                ]
                for r in report.regressions
            ],
        )
    else:
        lines.append("No significant regression.")
    lines.append("")
    if report.improvements:
        lines += ["## Improvements", ""]
        lines += _table(
            ["deployment", "metric", "last week", "this week", "change", "what changed"],
            [
                [
                    r.deployment,
                    r.metric,
                    fmt_value(r.last_week, r.unit),
                    fmt_value(r.this_week, r.unit),
                    fmt_change(r.change),
                    _setup_text(r),
                ]
                for r in report.improvements
            ],
        )
        lines.append("")

    lines += ["## Top recommendations", ""]
    if report.top_recommendations:
        lines += _table(
            ["action", "metric", "total expected gain", "severity", "deployments"],
            [
                [t.action, t.metric or "–", f"{t.total_expected_gain:.2f}", t.severity, ", ".join(t.deployments)]
                for t in report.top_recommendations[:15]
            ],
        )
    else:
        lines.append("No open recommendation.")
    lines.append("")

    lines += ["## Adoption", ""]
    if report.adoption:
        lines += _table(
            ["deployment", "action", "metric", "applied", "before", "after", "change", "verdict"],
            [
                [
                    a.deployment,
                    a.action,
                    a.metric,
                    a.applied_at.date().isoformat(),
                    fmt_value(a.before),
                    fmt_value(a.after),
                    fmt_change(a.change),
                    a.verdict,
                ]
                for a in report.adoption
            ],
        )
    else:
        lines.append("No recommendation was marked applied in the last two weeks.")
    lines.append("")

    lines += ["## Deployments", ""]
    rows = []
    for d in report.deployments:
        cells = [d.name, f"{d.runs} ({d.runs_last_week})"]
        for m in d.metrics:
            mark = {"worse": " ▲ worse", "better": " ▼ better"}.get(m.verdict, "")
            cells.append(f"{fmt_value(m.this_week)} ({fmt_change(m.change)}){mark}")
        rows.append(cells)
    lines += _table(
        ["deployment", "runs (last week)", "TTFT p50 ms", "TTFT p99 ms", "ITL p99 ms", "decode tok/s"], rows
    )
    lines.append("")

    lines += ["## Hardware", ""]
    lines += _table(
        ["hardware", "deployments", "runs", "decode efficiency", "prefill efficiency"],
        [
            [
                h.hardware,
                str(h.deployments),
                str(h.runs),
                fmt_value(h.decode_efficiency, "ratio"),
                fmt_value(h.prefill_efficiency, "ratio"),
            ]
            for h in report.hardware
        ],
    )
    if report.far_below:
        lines += ["", "Far below what their hardware reaches elsewhere in the fleet:", ""]
        lines += [
            f"- **{f.deployment}** on {f.hardware}: decode efficiency {f.decode_efficiency:.1%} against a median of "
            f"{f.hardware_median:.1%} ({f.ratio:.0%})"
            for f in report.far_below
        ]
    lines.append("")

    quality = report.data_quality
    lines += ["## Data quality", ""]
    if quality.deployments_without_runs:
        lines.append("Deployments without runs this week: " + ", ".join(quality.deployments_without_runs) + ".")
    if quality.runs_not_analysed:
        lines.append(f"{quality.runs_not_analysed} runs are not analysed yet.")
    if quality.missing_fields:
        lines += [
            "",
            *_table(
                ["field", "runs", "deployments", "why it matters"],
                [[m.field, str(m.runs), str(m.deployments), m.hint] for m in quality.missing_fields],
            ),
        ]
    if not (quality.deployments_without_runs or quality.runs_not_analysed or quality.missing_fields):
        lines.append("Every deployment has runs, and no run lacks a field the diagnosis needs.")
    return "\n".join(lines) + "\n"


def render_slack(report: WeeklyReport, *, link: str | None = None) -> dict[str, Any]:
    """A Slack-compatible webhook body (``text`` in Slack's mrkdwn): the headline numbers only."""
    fleet = {m.name: m for m in report.fleet}
    slo = fleet["slo_attainment"]
    lines = [
        f"*Weekly fleet report {report.week}*" + (f" (<{link}|full report>)" if link else ""),
        f"{fmt_value(fleet['runs'].this_week)} runs on {fmt_value(fleet['deployments'].this_week)} deployments; "
        f"SLO attainment {fmt_value(slo.this_week, 'ratio')} ({fmt_change(slo.change, points=True)})",
    ]
    if report.regressions:
        lines.append(f"*{len(report.regressions)} regressions*")
        lines += [
            f"• {r.deployment} {r.metric} {fmt_change(r.change)} ({_setup_text(r)})" for r in report.regressions[:10]
        ]
    else:
        lines.append("No significant regression.")
    if report.top_recommendations:
        lines.append("*Top recommendations*")
        lines += [
            f"• {t.action} on {len(t.deployments)} deployments (gain {t.total_expected_gain:.2f})"
            for t in report.top_recommendations[:5]
        ]
    better = sum(1 for a in report.adoption if a.verdict == "better")
    if report.adoption:
        lines.append(f"{better} of {len(report.adoption)} applied recommendations measurably improved their metric.")
    return {"text": "\n".join(lines)}


@lru_cache(maxsize=1)
def _environment() -> Environment:
    return Environment(loader=PackageLoader("advisor", "templates"), autoescape=select_autoescape(["html"]))


def _charts(report: WeeklyReport) -> dict[str, Any]:
    trend = report.trend
    efficiency = trend_svg(
        [
            Series("decode", [(t.start, t.decode_efficiency) for t in trend if t.decode_efficiency is not None]),
            Series("prefill", [(t.start, t.prefill_efficiency) for t in trend if t.prefill_efficiency is not None]),
        ],
        title="Median efficiency per week",
        unit="of ceiling",
    )
    attainment = trend_svg(
        [Series("SLO attainment", [(t.start, t.slo_attainment) for t in trend if t.slo_attainment is not None])],
        title="SLO attainment, per week",
        unit="of runs",
    )
    hardware = bars_svg(
        [
            Bar(h.hardware, h.decode_efficiency, note=f"{h.deployments} deployments, {h.runs} runs")
            for h in report.hardware
            if h.decode_efficiency is not None
        ],
        title="Median decode efficiency per hardware",
        unit="of ceiling",
    )
    regressions: list[Markup] = []
    for r in report.regressions[:12]:
        regressions.append(
            trend_svg(
                [
                    Series(
                        "last week",
                        [(x.measured_at, x.value) for x in r.runs if x.week == "last" and x.value is not None],
                    ),
                    Series(
                        "this week",
                        [(x.measured_at, x.value) for x in r.runs if x.week == "this" and x.value is not None],
                    ),
                ],
                slo_lines=[SloLine(r.metric, r.slo)] if r.slo is not None else [],
                marks=[Mark(report.start, f"{report.week} starts", kind="week")],
                title=f"{r.deployment}: {r.metric} {fmt_change(r.change)}",
                unit=r.unit,
            )
        )
    return {"efficiency": efficiency, "attainment": attainment, "hardware": hardware, "regressions": regressions}


def html_context(report: WeeklyReport) -> dict[str, Any]:
    """What ``reports/_weekly.html`` reads: the report, its charts and the formatting functions
    (functions, not filters, so the web pages' Jinja environment renders it too)."""
    return {
        "report": report,
        "fleet_rows": _fleet_rows(report),
        "charts": _charts(report),
        "setup_text": _setup_text,
        "value": fmt_value,
        "change": fmt_change,
    }


@lru_cache(maxsize=1)
def _site_css() -> Markup:
    # The web pages' stylesheet, inlined so that a saved or mailed report looks like the page.
    return Markup((resources.files("advisor") / "static" / "advisor.css").read_text(encoding="utf-8"))


def render_html(report: WeeklyReport) -> str:
    """The standalone document (inline CSS and SVG); the web page extends the site's base instead."""
    template = _environment().get_template("reports/weekly_standalone.html")
    return template.render(html_context(report), site_css=_site_css())
