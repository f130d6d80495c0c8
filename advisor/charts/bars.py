"""Horizontal bar chart: one value per row (e.g. decode efficiency per hardware), with a reference."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

from advisor.charts._svg import LinearScale, fmt, nice_ticks, text

__all__ = ["Bar", "bars_svg"]

_WIDTH = 640
_LABEL_W, _RIGHT, _TOP, _ROW, _BOTTOM = 180, 56, 28, 22, 24
_chart_ids = itertools.count(1)


@dataclass(frozen=True, slots=True)
class Bar:
    """One row. ``low``/``high`` draw an optional range whisker (e.g. the expected band);
    ``note`` becomes the bar's tooltip."""

    label: str
    value: float
    low: float | None = None
    high: float | None = None
    note: str = ""


def bars_svg(
    rows: Sequence[Bar],
    *,
    title: str,
    unit: str,
    reference: float | None = None,
    reference_label: str = "reference",
    width: int = _WIDTH,
) -> Markup:
    """An inline ``<svg data-chart="bars">``: one horizontal bar per row, in the given order.

    - The x axis starts at zero (or the smallest negative value) and ends past the largest value.
    - ``reference`` draws a dashed vertical line (``data-reference``), e.g. 1.0 for "at the ceiling".
    - Every label is escaped; the result is :class:`markupsafe.Markup`, safe to place in a template.
    - With no rows it still returns an ``<svg>`` that says "no data".
    """
    chart_id = f"bars-{next(_chart_ids)}"
    height = _TOP + max(len(rows), 1) * _ROW + _BOTTOM
    parts = [
        f'<svg data-chart="bars" class="chart" viewBox="0 0 {width} {height}" role="img" '
        f'aria-labelledby="{chart_id}" xmlns="http://www.w3.org/2000/svg">',
        f'<title id="{chart_id}">{escape(title)} ({escape(unit)})</title>',
        text(8, 16, f"{title} ({unit})", css="chart-title"),
    ]
    if not rows:
        parts.append(text(width / 2, _TOP + _ROW / 2 + 4, "no data", css="chart-empty", anchor="middle"))
        parts.append("</svg>")
        return Markup("".join(parts))

    values = [r.value for r in rows] + [v for r in rows for v in (r.low, r.high) if v is not None]
    if reference is not None:
        values.append(reference)
    ticks = nice_ticks(min(0.0, *values), max(values) * 1.05)
    x = LinearScale((ticks[0], ticks[-1]), (_LABEL_W, width - _RIGHT))
    bottom = _TOP + len(rows) * _ROW
    for tick in ticks:
        parts.append(f'<line class="grid" x1="{x(tick):.1f}" x2="{x(tick):.1f}" y1="{_TOP}" y2="{bottom}"/>')
        parts.append(text(x(tick), bottom + 14, fmt(tick), css="tick", anchor="middle"))
    for index, row in enumerate(rows):
        top = _TOP + index * _ROW
        start, end = sorted((x(0.0), x(row.value)))
        tip = f"{row.label}: {fmt(row.value)} {unit}" + (f" ({row.note})" if row.note else "")
        parts.append(f'<g class="bar" data-bar="{escape(row.label)}"><title>{escape(tip)}</title>')
        parts.append(text(_LABEL_W - 6, top + _ROW / 2 + 4, row.label, css="bar-label", anchor="end"))
        parts.append(f'<rect x="{start:.1f}" y="{top + 4}" width="{max(end - start, 1):.1f}" height="{_ROW - 8}"/>')
        if row.low is not None and row.high is not None:
            cy = top + _ROW / 2
            parts.append(f'<line class="whisker" x1="{x(row.low):.1f}" x2="{x(row.high):.1f}" y1="{cy}" y2="{cy}"/>')
        parts.append(text(end + 4, top + _ROW / 2 + 4, fmt(row.value), css="bar-value"))
        parts.append("</g>")
    if reference is not None:
        rx = x(reference)
        parts.append(
            f'<g data-reference="{escape(reference_label)}"><line class="reference" x1="{rx:.1f}" x2="{rx:.1f}" '
            f'y1="{_TOP - 4}" y2="{bottom}"/>'
            + text(rx, _TOP - 8, f"{reference_label} {fmt(reference)}", css="reference-label", anchor="middle")
            + "</g>"
        )
    parts.append("</svg>")
    return Markup("".join(parts))
