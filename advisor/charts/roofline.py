"""Roofline chart: measured decode and prefill against the device's bandwidth and compute roofs."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

from advisor.charts._svg import LogScale, fmt, text

__all__ = ["RooflinePoint", "roofline_svg"]

_WIDTH, _HEIGHT = 640, 320
_LEFT, _RIGHT, _TOP, _BOTTOM = 64, 24, 28, 44
_chart_ids = itertools.count(1)


@dataclass(frozen=True, slots=True)
class RooflinePoint:
    """One phase of a run on the roofline.

    ``intensity`` is FLOPs per byte moved (decode ≈ 2 × batch / bytes per weight; prefill ≈ 2 ×
    prompt tokens / bytes per weight). Speeds are tokens/s; ``flops_per_token`` turns them into
    FLOP/s for the y axis, so the ceiling lands on a roof and the measured point below it.
    """

    phase: str
    intensity: float
    flops_per_token: float
    ceiling_tok_s: float
    measured_tok_s: float | None = None
    expected_low_tok_s: float | None = None
    expected_high_tok_s: float | None = None


def roofline_svg(
    points: Sequence[RooflinePoint],
    *,
    bandwidth_gb_s: float,
    peak_tflops: float | None,
    title: str = "Roofline",
    device: str = "",
    width: int = _WIDTH,
    height: int = _HEIGHT,
) -> Markup:
    """An inline ``<svg data-chart="roofline">`` (log-log: FLOP/byte against TFLOP/s).

    - The bandwidth roof is the slope ``bandwidth × intensity``; the compute roof is flat at
      ``peak_tflops`` (absent when the device publishes none).
    - Per phase (``data-phase``): the ceiling (hollow), the expected band (a bar from low to high)
      and the measured point (filled), each with a ``<title>`` in tokens/s.
    - Every label is escaped; the result is :class:`markupsafe.Markup`.
    """
    chart_id = f"roofline-{next(_chart_ids)}"
    heading = f"{title} — {device}" if device else title
    parts = [
        f'<svg data-chart="roofline" class="chart" viewBox="0 0 {width} {height}" role="img" '
        f'aria-labelledby="{chart_id}" xmlns="http://www.w3.org/2000/svg">',
        f'<title id="{chart_id}">{escape(heading)}</title>',
        text(_LEFT, 16, heading, css="chart-title"),
    ]
    bandwidth_tb_s = bandwidth_gb_s / 1000.0
    ridge = peak_tflops / bandwidth_tb_s if peak_tflops else None
    xs = [p.intensity for p in points if p.intensity > 0] + ([ridge] if ridge else [])
    x_low = min([*xs, 1.0]) / 4
    x_high = max([*xs, 100.0]) * 4
    perf = [
        v * p.flops_per_token / 1e12
        for p in points
        for v in (p.ceiling_tok_s, p.measured_tok_s, p.expected_low_tok_s, p.expected_high_tok_s)
        if v
    ]
    roof_top = peak_tflops or bandwidth_tb_s * x_high
    y_low = min([*perf, bandwidth_tb_s * x_low]) / 3
    y_high = max([*perf, roof_top]) * 2
    x = LogScale((x_low, x_high), (_LEFT, width - _RIGHT))
    y = LogScale((y_low, y_high), (height - _BOTTOM, _TOP))

    for tick in x.decades():
        parts.append(f'<line class="grid" x1="{x(tick):.1f}" x2="{x(tick):.1f}" y1="{_TOP}" y2="{height - _BOTTOM}"/>')
        parts.append(text(x(tick), height - _BOTTOM + 14, fmt(tick), css="tick", anchor="middle"))
    for tick in y.decades():
        parts.append(f'<line class="grid" x1="{_LEFT}" x2="{width - _RIGHT}" y1="{y(tick):.1f}" y2="{y(tick):.1f}"/>')
        parts.append(text(_LEFT - 6, y(tick) + 4, fmt(tick), css="tick", anchor="end"))
    parts.append(
        text((_LEFT + width - _RIGHT) / 2, height - 8, "arithmetic intensity (FLOP/byte)", css="axis", anchor="middle")
    )
    parts.append(
        f'<text class="axis" text-anchor="middle" transform="translate(14 {(height - _BOTTOM + _TOP) / 2:.1f}) '
        f'rotate(-90)">TFLOP/s</text>'
    )

    # The roofs: the bandwidth slope up to the ridge, then the flat compute roof.
    x_ridge = min(ridge, x_high) if ridge else x_high
    parts.append(
        f'<g data-roof="bandwidth"><title>{escape(fmt(bandwidth_gb_s))} GB/s</title>'
        f'<line class="roof" x1="{x(x_low):.1f}" y1="{y(bandwidth_tb_s * x_low):.1f}" '
        f'x2="{x(x_ridge):.1f}" y2="{y(bandwidth_tb_s * x_ridge):.1f}"/></g>'
    )
    parts.append(text(x(x_low) + 8, y(bandwidth_tb_s * x_low * 2) - 8, f"{fmt(bandwidth_gb_s)} GB/s", css="roof-label"))
    if peak_tflops and ridge:
        parts.append(
            f'<g data-roof="compute"><title>{escape(fmt(peak_tflops))} TFLOP/s</title>'
            f'<line class="roof" x1="{x(ridge):.1f}" y1="{y(peak_tflops):.1f}" x2="{x(x_high):.1f}" '
            f'y2="{y(peak_tflops):.1f}"/></g>'
        )
        # Under the flat roof, from the ridge: the phase labels sit right of their points, above it.
        parts.append(text(x(ridge) + 6, y(peak_tflops) + 16, f"{fmt(peak_tflops)} TFLOP/s", css="roof-label"))

    for point in points:
        if point.intensity <= 0 or point.flops_per_token <= 0:
            continue
        px = x(point.intensity)
        scale = point.flops_per_token / 1e12
        phase = escape(point.phase)
        parts.append(f'<g class="phase phase-{phase}" data-phase="{phase}">')
        if point.expected_low_tok_s and point.expected_high_tok_s:
            top, bottom = y(point.expected_high_tok_s * scale), y(point.expected_low_tok_s * scale)
            parts.append(
                f'<rect class="band" x="{px - 6:.1f}" y="{top:.1f}" width="12" height="{max(bottom - top, 1):.1f}">'
                f"<title>{phase} expected {escape(fmt(point.expected_low_tok_s))}–"
                f"{escape(fmt(point.expected_high_tok_s))} tok/s</title></rect>"
            )
        parts.append(
            f'<circle class="ceiling" cx="{px:.1f}" cy="{y(point.ceiling_tok_s * scale):.1f}" r="5">'
            f"<title>{phase} ceiling {escape(fmt(point.ceiling_tok_s))} tok/s</title></circle>"
        )
        label_y = y(point.ceiling_tok_s * scale)
        if point.measured_tok_s:
            my = y(point.measured_tok_s * scale)
            label_y = my
            parts.append(
                f'<circle class="measured" cx="{px:.1f}" cy="{my:.1f}" r="5">'
                f"<title>{phase} measured {escape(fmt(point.measured_tok_s))} tok/s</title></circle>"
            )
        parts.append(text(px + 10, label_y + 4, point.phase, css="phase-label"))
        parts.append("</g>")
    parts.append("</svg>")
    return Markup("".join(parts))
