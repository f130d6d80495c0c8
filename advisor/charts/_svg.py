"""Small helpers shared by the chart functions: scales, ticks and escaped SVG text.

Charts are hand-built SVG rather than matplotlib: importing matplotlib alone costs more than the
whole page budget (100 ms), and a few scaled lines need no plotting library.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from markupsafe import escape

__all__ = ["LinearScale", "LogScale", "fmt", "nice_ticks", "text"]


def fmt(value: float) -> str:
    """A number as a short, readable label (3 significant digits, thousands grouped)."""
    if value == 0 or not math.isfinite(value):
        return "0" if value == 0 else str(value)
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:,.0f}"
    if magnitude >= 100:
        return f"{value:.0f}"
    if magnitude >= 10:
        return f"{value:.1f}".rstrip("0").rstrip(".")
    return f"{value:.3g}"


def text(x: float, y: float, label: object, *, css: str = "", anchor: str = "start") -> str:
    """An escaped ``<text>``: labels come from user data (deployment names), never trusted."""
    cls = f' class="{css}"' if css else ""
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{cls}>{escape(str(label))}</text>'


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values (1, 2 or 5 times a power of ten apart); the first is at or below ``low``
    and the last at or above ``high``, so every value lies inside the axis."""
    if high <= low:
        high = low + (abs(low) or 1.0)
    raw = (high - low) / max(count, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.floor(low / step + 1e-9) * step
    last = math.ceil(high / step - 1e-9) * step
    return [round(first + i * step, 12) for i in range(round((last - first) / step) + 1)]


class LinearScale:
    """Maps a data domain onto a pixel range."""

    def __init__(self, domain: tuple[float, float], span: tuple[float, float]) -> None:
        low, high = domain
        if high <= low:
            high = low + (abs(low) or 1.0)
        self.domain = (low, high)
        self.span = span

    def __call__(self, value: float) -> float:
        low, high = self.domain
        start, end = self.span
        return start + (value - low) / (high - low) * (end - start)


class LogScale:
    """Maps a positive data domain onto a pixel range, logarithmically."""

    def __init__(self, domain: tuple[float, float], span: tuple[float, float]) -> None:
        low, high = (max(domain[0], 1e-12), max(domain[1], 1e-12))
        if high <= low:
            high = low * 10
        self.domain = (low, high)
        self.span = span
        self._linear = LinearScale((math.log10(low), math.log10(high)), span)

    def __call__(self, value: float) -> float:
        return self._linear(math.log10(max(value, 1e-12)))

    def decades(self) -> Sequence[float]:
        """Powers of ten inside the domain, for tick marks."""
        low, high = self.domain
        return [10.0**e for e in range(math.ceil(math.log10(low)), math.floor(math.log10(high)) + 1)]
