"""Delivery of the weekly report to chat (a Slack-compatible webhook) and the optional in-process
weekly schedule (ADVISOR_REPORT_SCHEDULE_ENABLED, off by default)."""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, time, timedelta
from typing import Any

import httpx
import structlog

from advisor.reports.context import WeeklyReport
from advisor.reports.render import render_slack
from advisor.settings import ReportSettings

__all__ = ["DeliveryFailed", "deliver", "next_run", "post_with_retries", "schedule_loop"]

_log = structlog.get_logger("advisor.reports")

#: Worth another attempt: the receiver is overloaded, rate-limits us, or a gateway failed.
_RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})


class DeliveryFailed(Exception):
    """Every attempt failed; the message says how the last one ended."""


async def post_with_retries(
    url: str,
    body: dict[str, Any],
    *,
    retries: int,
    backoff: float,
    client: httpx.AsyncClient | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> int:
    """POST ``body`` as JSON; retry connection errors and retryable statuses ``retries`` times,
    waiting ``backoff × 2**attempt`` (with jitter, at least a ``Retry-After``). Returns the attempts.

    httpx's transport retries only failed connects, immediately; this adds backoff and statuses.
    """
    owned = client is None
    http = client or httpx.AsyncClient(timeout=httpx.Timeout(10.0))
    last = "no attempt"
    try:
        for attempt in range(retries + 1):
            retry_after = None
            try:
                response = await http.post(url, json=body)
            except httpx.TransportError as exc:
                last = f"{type(exc).__name__}: {exc}"
            else:
                if response.is_success:
                    return attempt + 1
                last = f"HTTP {response.status_code}"
                if response.status_code not in _RETRY_STATUSES:
                    break
                retry_after = response.headers.get("retry-after")
            if attempt < retries:
                delay = backoff * 2.0**attempt * (1 + random.random() / 4)
                with contextlib.suppress(TypeError, ValueError):
                    delay = max(delay, min(float(retry_after), 60.0))  # type: ignore[arg-type]
                _log.warning(
                    "report delivery failed, retrying", attempt=attempt + 1, error=last, delay_s=round(delay, 2)
                )
                await sleep(delay)
    finally:
        if owned:
            await http.aclose()
    raise DeliveryFailed(f"the webhook refused the report after {attempt + 1} attempts: {last}")


async def deliver(report: WeeklyReport, settings: ReportSettings, *, client: httpx.AsyncClient | None = None) -> int:
    """Post the report's summary to ``ADVISOR_REPORT_WEBHOOK_URL``; 0 when none is set."""
    if not settings.webhook_url:
        return 0
    link = f"{settings.public_url.rstrip('/')}/reports/{report.week}" if settings.public_url else None
    return await post_with_retries(
        settings.webhook_url,
        render_slack(report, link=link),
        retries=settings.webhook_retries,
        backoff=settings.webhook_backoff_s,
        client=client,
    )


def next_run(now: datetime, settings: ReportSettings) -> datetime:
    """The next scheduled build strictly after ``now`` (UTC)."""
    hour, minute = (int(p) for p in settings.schedule_time.split(":"))
    now = now.astimezone(UTC)
    day = now.date() + timedelta(days=(settings.schedule_weekday - now.isoweekday()) % 7)
    when = datetime.combine(day, time(hour, minute), tzinfo=UTC)
    return when if when > now else when + timedelta(days=7)


async def schedule_loop(
    build: Callable[[], Awaitable[WeeklyReport]],
    settings: ReportSettings,
    *,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> None:
    """Forever: wait for the next slot, rebuild last week's snapshot, deliver it. A failure is
    logged and the loop waits for the next week (the snapshot is idempotent, so a rerun is safe)."""
    while True:
        await sleep(max((next_run(clock(), settings) - clock()).total_seconds(), 0.0))
        try:
            report = await build()
            attempts = await deliver(report, settings)
            _log.info("weekly report built", week=report.week, delivered=bool(attempts), attempts=attempts)
        except Exception as exc:  # the schedule must survive a bad week
            _log.error("weekly report failed", error=repr(exc))
