"""Trend chart: metric values over time, with SLO lines and marked events (regressions)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from markupsafe import Markup, escape

from advisor.charts._svg import LinearScale, fmt, nice_ticks, text

__all__ = ["Mark", "Series", "SloLine", "trend_svg"]

_WIDTH, _HEIGHT = 640, 240
_LEFT, _RIGHT, _TOP, _BOTTOM = 56, 16, 28, 36
_chart_ids = itertools.count(1)


@dataclass(frozen=True, slots=True)
class Series:
    """One line: ``points`` are ``(measured_at, value)`` pairs, in any order."""

    label: str
    points: Sequence[tuple[datetime, float]] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True)
class SloLine:
    """A horizontal limit, e.g. ``SloLine("ttft_p99_ms", 800)``."""

    label: str
    value: float


@dataclass(frozen=True, slots=True)
class Mark:
    """A vertical marker at ``at``, e.g. a regression; ``label`` is its tooltip."""

    at: datetime
    label: str
    kind: str = "regression"


def trend_svg(
    series: Sequence[Series],
    *,
    slo_lines: Sequence[SloLine] = (),
    marks: Sequence[Mark] = (),
    title: str,
    unit: str,
    width: int = _WIDTH,
    height: int = _HEIGHT,
) -> Markup:
    """An inline ``<svg data-chart="trend">`` of ``series`` over time.

    - Each series is a polyline with a dot per point; a dot's ``<title>`` gives its time and value.
    - ``slo_lines`` are dashed horizontal lines (``data-slo="<label>"``), always inside the y range.
    - ``marks`` are vertical lines (``data-mark="<kind>"``), e.g. regressions beyond noise.
    - Every label is escaped; the result is :class:`markupsafe.Markup`, safe to place in a template.
    - With no points at all it still returns an ``<svg>`` that says "no data".
    """
    chart_id = f"trend-{next(_chart_ids)}"
    points = [p for s in series for p in s.points]
    parts = [
        f'<svg data-chart="trend" class="chart" viewBox="0 0 {width} {height}" role="img" '
        f'aria-labelledby="{chart_id}" xmlns="http://www.w3.org/2000/svg">',
        f'<title id="{chart_id}">{escape(title)} ({escape(unit)})</title>',
        text(_LEFT, 16, f"{title} ({unit})", css="chart-title"),
    ]
    if not points:
        parts.append(text(width / 2, height / 2, "no data", css="chart-empty", anchor="middle"))
        parts.append("</svg>")
        return Markup("".join(parts))

    times = [t.timestamp() for t, _ in points] + [m.at.timestamp() for m in marks]
    values = [v for _, v in points] + [s.value for s in slo_lines]
    t_low, t_high = min(times), max(times)
    if t_high == t_low:
        t_low, t_high = t_low - 3600, t_high + 3600
    ticks = nice_ticks(min(0.0, *values), max(values) * 1.08)
    x = LinearScale((t_low, t_high), (_LEFT, width - _RIGHT))
    y = LinearScale((ticks[0], ticks[-1]), (height - _BOTTOM, _TOP))

    for tick in ticks:
        parts.append(f'<line class="grid" x1="{_LEFT}" x2="{width - _RIGHT}" y1="{y(tick):.1f}" y2="{y(tick):.1f}"/>')
        parts.append(text(_LEFT - 6, y(tick) + 4, fmt(tick), css="tick", anchor="end"))
    for stamp, anchor in ((t_low, "start"), (t_high, "end")):
        label = datetime.fromtimestamp(stamp, tz=UTC).strftime("%Y-%m-%d")
        parts.append(text(x(stamp), height - 12, label, css="tick", anchor=anchor))

    for slo in slo_lines:
        sy = y(slo.value)
        parts.append(
            f'<g data-slo="{escape(slo.label)}"><line class="slo" x1="{_LEFT}" x2="{width - _RIGHT}" '
            f'y1="{sy:.1f}" y2="{sy:.1f}"/>'
            + text(width - _RIGHT - 4, sy - 4, f"SLO {slo.label} {fmt(slo.value)}", css="slo-label", anchor="end")
            + "</g>"
        )
    for mark in marks:
        mx = x(mark.at.timestamp())
        parts.append(
            f'<g data-mark="{escape(mark.kind)}"><title>{escape(mark.label)}</title>'
            f'<line class="mark mark-{escape(mark.kind)}" x1="{mx:.1f}" x2="{mx:.1f}" y1="{_TOP}" '
            f'y2="{height - _BOTTOM}"/><path class="mark-{escape(mark.kind)}" '
            f'd="M{mx - 5:.1f},{_TOP - 6} L{mx + 5:.1f},{_TOP - 6} L{mx:.1f},{_TOP + 2} Z"/></g>'
        )

    for index, line in enumerate(series):
        ordered = sorted(line.points, key=lambda p: p[0])
        if not ordered:
            continue
        css = f"series series-{index % 4}"
        coords = " ".join(f"{x(t.timestamp()):.1f},{y(v):.1f}" for t, v in ordered)
        parts.append(f'<g class="{css}" data-series="{escape(line.label)}">')
        parts.append(f'<polyline points="{coords}"/>')
        for t, v in ordered:
            parts.append(
                f'<circle cx="{x(t.timestamp()):.1f}" cy="{y(v):.1f}" r="2.5">'
                f"<title>{escape(line.label)} {escape(t.isoformat(timespec='minutes'))}: "
                f"{escape(fmt(v))} {escape(unit)}</title></circle>"
            )
        parts.append("</g>")
        if len(series) > 1:  # one series is named by the title; several, by a legend under the plot
            legend_x = (_LEFT + width - _RIGHT) / 2 + (index - (len(series) - 1) / 2) * 120
            parts.append(text(legend_x, height - 12, f"● {line.label}", css=f"legend {css}", anchor="middle"))
    parts.append("</svg>")
    return Markup("".join(parts))
