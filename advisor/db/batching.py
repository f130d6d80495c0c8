"""Group commit: the submissions that arrive together are written together.

Under load, most of the cost of storing one small run is per statement and per commit (statement
compilation, driver round trips, the fsync), not per row. A :class:`GroupCommitter` queues the
submissions of one process and hands them to a batch writer: while one batch is being written the
next ones queue, so a busy server writes many submissions with one set of multi-row statements and
one commit, and an idle one writes each at once (no timer, no added latency).

The writer answers per item, in order: a result, or an exception that concerns that item alone. If
the batch as a whole fails, every item is retried alone, so one bad or racing submission can only
fail itself. This is hand-written because neither SQLAlchemy nor Litestar batches across requests.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar, cast

__all__ = ["GroupCommitter"]

J = TypeVar("J")
R = TypeVar("R")

BatchWriter = Callable[[list[J]], Awaitable[list[R | Exception]]]


class GroupCommitter(Generic[J, R]):
    """Queue items of one event loop and write them in batches of up to ``max_batch``."""

    def __init__(self, write: BatchWriter[J, R], *, max_batch: int = 64) -> None:
        self._write = write
        self._max_batch = max_batch
        self._pending: list[tuple[J, asyncio.Future[R]]] = []
        self._runner: asyncio.Task[None] | None = None
        self.batches = 0  # counters for tests and the benchmark
        self.items = 0

    async def submit(self, item: J) -> R:
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        self._pending.append((item, future))
        if self._runner is None:
            self._runner = asyncio.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        try:
            while self._pending:
                batch = self._pending[: self._max_batch]
                del self._pending[: self._max_batch]
                await self._run(batch)
        finally:
            self._runner = None

    async def _run(self, batch: list[tuple[J, asyncio.Future[R]]]) -> None:
        self.batches += 1
        self.items += len(batch)
        try:
            outcomes = await self._write([item for item, _ in batch])
        except Exception as exc:
            if len(batch) == 1:
                _settle(batch[0][1], exc)
                return
            for one in batch:  # the batch failed as a whole: find out whose fault, one by one
                await self._run([one])
            return
        for (_, future), outcome in zip(batch, outcomes, strict=True):
            _settle(future, outcome)

    @classmethod
    def shared(cls, key: Hashable, factory: Callable[[], GroupCommitter[J, R]]) -> GroupCommitter[J, R]:
        """The committer of ``key`` (e.g. a database engine) on the running event loop."""
        per_loop = _REGISTRY.setdefault(asyncio.get_running_loop(), {})
        committer = per_loop.get(key)
        if committer is None:
            committer = per_loop[key] = factory()
        return cast("GroupCommitter[J, R]", committer)


_REGISTRY: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Hashable, object]] = weakref.WeakKeyDictionary()


def _settle(future: asyncio.Future[R], outcome: R | Exception) -> None:
    if future.done():  # the request went away; its items were still written
        return
    if isinstance(outcome, Exception):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)
