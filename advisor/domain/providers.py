"""Dependency providers shared by the domain controllers."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from litestar.di import NamedDependency, Provide
from sqlalchemy.ext.asyncio import AsyncSession

__all__ = ["session_service"]

S = TypeVar("S")


def session_service(factory: Callable[[AsyncSession], S]) -> Provide:
    """A provider of ``factory(db_session)``: the request's service on the request's session."""

    async def provide(db_session: NamedDependency[AsyncSession]) -> S:
        return factory(db_session)

    return Provide(provide)
