"""Thin handlers: the weekly report (JSON, HTML, Markdown), its snapshots, and its web page."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

from litestar import Controller, Request, Response, get
from litestar.di import NamedDependency
from litestar.params import FromPath, FromQuery, QueryParameter
from litestar.response import Redirect, Template
from litestar.status_codes import HTTP_303_SEE_OTHER
from sqlalchemy.ext.asyncio import AsyncSession

from advisor.domain.reports.schemas import FORMATS, Format, Snapshot
from advisor.domain.reports.services import ReportService
from advisor.domain.web.auth import SignInRequired, web_guard
from advisor.errors import InvalidInput
from advisor.reports.render import html_context, render_html, render_json, render_markdown
from advisor.reports.weeks import IsoWeek

__all__ = ["ReportController", "ReportPageController", "render"]

_MEDIA = {"json": "application/json", "html": "text/html; charset=utf-8", "md": "text/markdown; charset=utf-8"}


def _week(text: str | None, field: str) -> IsoWeek | None:
    if text is None:
        return None
    try:
        return IsoWeek.parse(text)
    except ValueError as exc:
        raise InvalidInput(str(exc), field=field) from None


def render(report: object, format: str) -> Response[bytes]:
    from advisor.reports.context import WeeklyReport

    assert isinstance(report, WeeklyReport)
    headers: dict[str, str] = {}
    if format == "json":
        body = render_json(report)
    elif format == "html":
        body = render_html(report).encode()
        # A standalone document (also saved and mailed as a file): its styles are inline, and it
        # runs no script at all. The site-wide policy would block the styles; this one allows only them.
        headers["Content-Security-Policy"] = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"
    else:
        body = render_markdown(report).encode()
    return Response(body, media_type=_MEDIA[format], headers=headers)


class ReportController(Controller):
    path = "/reports"
    tags = ("reports",)

    @get(
        "/weekly",
        summary="The weekly fleet report",
        description=(
            "ISO week (default: the last complete week) against the week before: fleet summary, per-deployment "
            "changes with a noise-aware test, regressions, top open recommendations, adoption of applied ones, "
            "hardware efficiency and data quality. A complete week is served from its stored snapshot; "
            "refresh=true rebuilds it."
        ),
    )
    async def weekly(
        self,
        db_session: NamedDependency[AsyncSession],
        week: Annotated[str | None, QueryParameter(description="ISO week, e.g. 2026-W48")] = None,
        format: Annotated[Format, QueryParameter(description="json, html or md")] = "json",
        refresh: FromQuery[bool] = False,
    ) -> Response[bytes]:
        if format not in FORMATS:
            raise InvalidInput(f"must be one of {', '.join(FORMATS)}", field="format")
        report = await ReportService(db_session).weekly(_week(week, "week"), refresh=refresh)
        return render(report, format)

    @get("/", summary="Stored weekly report snapshots, newest first")
    async def snapshots(self, db_session: NamedDependency[AsyncSession]) -> list[Snapshot]:
        return await ReportService(db_session).snapshots()


def _signin_redirect(request: Request[Any, Any, Any], exc: SignInRequired) -> Response[Any]:
    return Redirect(f"/signin?next={quote(exc.next_path, safe='/')}", status_code=HTTP_303_SEE_OTHER)


class ReportPageController(Controller):
    """/reports/{week}: the report inside the web UI (its layout and, in token mode, its sign-in)."""

    path = "/reports"
    include_in_schema = False
    guards = [web_guard]
    exception_handlers = {SignInRequired: _signin_redirect}

    @get("/{week:str}", summary="The weekly report page")
    async def page(
        self, request: Request[Any, Any, Any], db_session: NamedDependency[AsyncSession], week: FromPath[str]
    ) -> Template:
        report = await ReportService(db_session).weekly(_week(week, "week"))
        context = {
            **html_context(report),
            "user": request.state.web_user,
            "token_mode": request.app.state.settings.auth.mode == "token",
        }
        return Template(template_name="reports/weekly.html", context=context)
