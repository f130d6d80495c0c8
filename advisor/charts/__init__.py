"""Server-rendered SVG charts, shared by the web pages and the weekly report.

Pure functions of their inputs, returning :class:`markupsafe.Markup` (escaped labels), so a page
shows them without JavaScript and a template places them with ``{{ chart }}``.
"""

from __future__ import annotations

from advisor.charts.bars import Bar, bars_svg
from advisor.charts.roofline import RooflinePoint, roofline_svg
from advisor.charts.trend import Mark, Series, SloLine, trend_svg

__all__ = ["Bar", "Mark", "RooflinePoint", "Series", "SloLine", "bars_svg", "roofline_svg", "trend_svg"]
