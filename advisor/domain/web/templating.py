"""The Jinja2 environment of the pages (autoescaped) and their vendored static files."""

from __future__ import annotations

import math
from datetime import datetime
from pathlib import Path
from typing import Any

from litestar.datastructures import CacheControlHeader
from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.static_files import create_static_files_router
from litestar.template.config import TemplateConfig
from litestar.types import ControllerRouterHandler

from advisor.charts._svg import fmt

__all__ = ["STATIC_DIR", "TEMPLATE_DIR", "static_router", "template_config"]

_PACKAGE = Path(__file__).resolve().parents[2]
TEMPLATE_DIR = _PACKAGE / "templates"
STATIC_DIR = _PACKAGE / "static"


def _num(value: Any, digits: int | None = None) -> str:
    """A number for people: 3 significant digits, "—" when absent."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if digits is not None:
        return f"{value:,.{digits}f}"
    return fmt(float(value))


def _pct(value: Any) -> str:
    if value is None or not isinstance(value, int | float):
        return "—"
    return f"{value * 100:.0f}%"


def _signed_pct(value: Any) -> str:
    if value is None or not isinstance(value, int | float):
        return "—"
    return f"{value * 100:+.0f}%"


def _when(value: Any) -> str:
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return str(value)
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M UTC")
    return "—"


def _configure(engine: JinjaTemplateEngine) -> None:
    env = engine.engine
    env.filters.update(num=_num, pct=_pct, signed_pct=_signed_pct, when=_when)
    env.trim_blocks = True
    env.lstrip_blocks = True


def template_config() -> TemplateConfig[JinjaTemplateEngine]:
    return TemplateConfig(directory=TEMPLATE_DIR, engine=JinjaTemplateEngine, engine_callback=_configure)


def static_router() -> ControllerRouterHandler:
    """/static/*: the vendored CSS and JS, cacheable for a day."""
    return create_static_files_router(
        path="/static",
        directories=[STATIC_DIR],
        name="static",
        include_in_schema=False,
        cache_control=CacheControlHeader(max_age=86400, public=True),
    )
