"""The optional in-process weekly schedule (ADVISOR_REPORT_SCHEDULE_ENABLED, off by default), as
Litestar start-up and shutdown hooks. The report stack is imported only when the schedule is on."""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from litestar import Litestar

    from advisor.reports.context import WeeklyReport

__all__ = ["start_schedule", "stop_schedule"]

_TASK = "report_schedule_task"


async def start_schedule(app: Litestar) -> None:
    """Start the weekly build-and-deliver loop when the setting is on. Every worker process with it
    on runs the loop, so turn it on for one process only (docs/reports.md)."""
    settings = app.state.settings.report
    if not settings.schedule_enabled:
        return
    from advisor.domain.reports.delivery import schedule_loop
    from advisor.domain.reports.services import ReportService

    maker = app.state.sqlalchemy_config.create_session_maker()

    async def build() -> WeeklyReport:
        async with maker() as session:
            return await ReportService(session).weekly(refresh=True)

    app.state[_TASK] = asyncio.get_running_loop().create_task(schedule_loop(build, settings))


async def stop_schedule(app: Litestar) -> None:
    task = app.state.get(_TASK)
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
