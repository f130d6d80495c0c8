"""The weekly fleet report, pure: ISO weeks, the noise test, the context builder and the renderers.

The database side (the SQL aggregation and the snapshots) is :mod:`advisor.domain.reports`.
"""

from advisor.reports.context import TRACKED_METRICS, WeeklyAggregates, WeeklyReport, build_weekly
from advisor.reports.noise import Comparison, NoiseTest, compare
from advisor.reports.render import render_html, render_json, render_markdown, render_slack
from advisor.reports.weeks import IsoWeek

__all__ = [
    "TRACKED_METRICS",
    "Comparison",
    "IsoWeek",
    "NoiseTest",
    "WeeklyAggregates",
    "WeeklyReport",
    "build_weekly",
    "compare",
    "render_html",
    "render_json",
    "render_markdown",
    "render_slack",
]
