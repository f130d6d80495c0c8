"""What the server-side commands share: the settings (a bad one exits 2) and a run of async work
on the configured database (ADVISOR_DATABASE_URL).

The server stack (pydantic-settings, SQLAlchemy, the domain) is imported inside the functions, so
the client commands that sit beside server-side ones in a group (``runs``, ``model``, ``catalog``)
stay fast and free of it.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

import click

from advisor.client.exit_codes import ExitCode

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

    from advisor.settings import Settings

__all__ = ["run_on_database", "settings_or_exit"]

T = TypeVar("T")


def settings_or_exit() -> Settings:
    """The process settings, or exit 2 with the one-line message naming the bad variable."""
    from advisor.settings import SettingsError, get_settings

    try:
        return get_settings()
    except SettingsError as exc:
        click.echo(f"advisor: {exc}", err=True)
        sys.exit(ExitCode.USAGE)


def run_on_database(work: Callable[[async_sessionmaker[AsyncSession]], Awaitable[T]]) -> T:
    """Run ``work(session_maker)`` against the configured database (ADVISOR_DATABASE_URL) and
    dispose of the engine; an error the API would answer with a 4xx exits 4 with its message."""
    from sqlalchemy.ext.asyncio import async_sessionmaker

    from advisor.db.config import create_engine
    from advisor.errors import AdvisorError

    settings = settings_or_exit()

    async def main() -> T:
        engine = create_engine(settings.db, pool=False)
        try:
            return await work(async_sessionmaker(engine, expire_on_commit=False))
        finally:
            await engine.dispose()

    try:
        return asyncio.run(main())
    except AdvisorError as exc:
        click.echo(f"advisor: {exc.detail}", err=True)
        sys.exit(ExitCode.REJECTED)
