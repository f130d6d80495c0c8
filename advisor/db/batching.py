"""Batching of writes: group commit across requests, and SQLite's writer thread.

Group commit: the submissions that arrive together are written together.

Under load, most of the cost of storing one small run is per statement and per commit (statement
compilation, driver round trips, the fsync), not per row. A :class:`GroupCommitter` queues the
submissions of one process and hands them to a batch writer: while one batch is being written the
next ones queue, so a busy server writes many submissions with one set of multi-row statements and
one commit, and an idle one writes each at once (no timer, no added latency).

The writer answers per item, in order: a result, or an exception that concerns that item alone. If
the batch as a whole fails, every item is retried alone, so one bad or racing submission can only
fail itself. This is hand-written because neither SQLAlchemy nor Litestar batches across requests.

SQLite's writer: :func:`on_connection` runs a synchronous function of a Connection (a batch's Core
statements) in one hand-off to a thread that owns a pysqlite connection to the same file, instead
of aiosqlite's four hand-offs per statement; on Postgres it runs in the session's transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable
from typing import Any, Generic, TypeVar, cast

import msgspec
from sqlalchemy import Connection, event
from sqlalchemy import create_engine as sa_create_engine
from sqlalchemy.engine import Engine
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from advisor.db.config import SQLITE_TIMEOUTS, json_dumps, sqlite_pragmas
from advisor.settings import DatabaseSettings

__all__ = ["MAX_PENDING", "GroupCommitter", "SqliteWriter", "on_connection", "sqlite_writer", "writer_lock"]

J = TypeVar("J")
R = TypeVar("R")
T = TypeVar("T")

BatchWriter = Callable[[list[J]], Awaitable[list[R | Exception]]]

#: Submissions that may wait per process behind the batch being written (8 batches of 64: well
#: under a second at the measured write rates) before new ones are shed with a 503.
MAX_PENDING = 512


class GroupCommitter(Generic[J, R]):
    """Queue items of one event loop and write them in batches of up to ``max_batch``."""

    def __init__(
        self, write: BatchWriter[J, R], *, max_batch: int = 64, on_idle: Callable[[], Awaitable[None]] | None = None
    ) -> None:
        """``on_idle``: awaited each time the queue runs empty (the writer may hold a resource,
        such as a database connection, from one batch to the next while submissions keep coming)."""
        self._write = write
        self._max_batch = max_batch
        self._on_idle = on_idle
        self._pending: list[tuple[J, asyncio.Future[R]]] = []
        self._runner: asyncio.Task[None] | None = None
        self.batches = 0  # counters for tests and the benchmark
        self.items = 0

    async def submit(self, item: J) -> R:
        if len(self._pending) >= MAX_PENDING:
            # Load shedding (issue #18): past the bound, a request would wait seconds for its turn;
            # it is answered 503 with Retry-After at once instead.
            from advisor.errors import Overloaded

            raise Overloaded(f"the write queue is full ({len(self._pending)} submissions waiting); retry later")
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
            if self._on_idle is not None:
                await self._on_idle()

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


class SqliteWriter:
    """A synchronous pysqlite engine on the same file as an async SQLite engine, used from one
    dedicated thread: a batch of Core statements then costs one hand-off to that thread instead of
    aiosqlite's four per statement (see :mod:`advisor.domain.runs.store`).

    The hand-off is a bare queue and ``call_soon_threadsafe``, not ``run_in_executor``: the
    executor's submit, its concurrent future and the chaining of that future into an asyncio one
    cost 21-23 µs of CPU per call under uvloop against 8-9 µs (docs/benchmarks.md, session 5), and
    every batch of submissions makes two."""

    def __init__(self, engine: AsyncEngine) -> None:
        timeout = SQLITE_TIMEOUTS.get(engine.sync_engine, DatabaseSettings().sqlite_busy_timeout_ms)
        self.engine = sa_create_engine(
            engine.url.set(drivername="sqlite+pysqlite"),
            json_serializer=json_dumps,
            json_deserializer=msgspec.json.decode,
            connect_args={"timeout": timeout / 1000, "check_same_thread": False},
            pool_size=1,
            max_overflow=0,
        )
        event.listen(self.engine, "connect", lambda conn, rec: sqlite_pragmas(conn, rec, timeout))
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        # A daemon: a thread blocked on its queue must not hold the interpreter's exit (the
        # finalizer below stops it first when the writer is dropped). Work cut off at exit is a
        # transaction never committed, and never acknowledged.
        thread = threading.Thread(target=_serve_jobs, args=(self._jobs,), name="advisor-sqlite-writer", daemon=True)
        thread.start()
        weakref.finalize(self, _close_writer, self.engine, self._jobs)

    async def run(self, fn: Callable[[Connection], T]) -> T:
        """``fn(connection)`` in one transaction on the writer thread; committed when it returns."""

        def call() -> T:
            with self.engine.begin() as connection:
                return fn(connection)

        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._jobs.put((call, loop, future))
        return await future


_Job = tuple[Callable[[], Any], asyncio.AbstractEventLoop, "asyncio.Future[Any]"]


def _serve_jobs(jobs: queue.SimpleQueue[_Job | None]) -> None:
    """The writer thread: each job in turn, its outcome handed back to the job's event loop."""
    while (job := jobs.get()) is not None:
        call, loop, future = job
        if future.cancelled():  # its caller went away before it started, as an executor skips it
            continue
        try:
            outcome: tuple[Any, BaseException | None] = (call(), None)
        except BaseException as exc:  # handed to the caller, whatever it is (as an executor does)
            outcome = (None, exc)
        with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits any more
            loop.call_soon_threadsafe(_settle_job, future, *outcome)


def _settle_job(future: asyncio.Future[Any], result: Any, exc: BaseException | None) -> None:
    if future.cancelled():
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result)


def _close_writer(engine: Engine, jobs: queue.SimpleQueue[_Job | None]) -> None:
    jobs.put(None)
    engine.dispose()


_WRITERS: weakref.WeakKeyDictionary[Engine, SqliteWriter] = weakref.WeakKeyDictionary()


def sqlite_writer(engine: AsyncEngine) -> SqliteWriter:
    """The process's :class:`SqliteWriter` for this SQLite engine."""
    writer = _WRITERS.get(engine.sync_engine)
    if writer is None:
        writer = _WRITERS[engine.sync_engine] = SqliteWriter(engine)
    return writer


def _uses_writer_thread(engine: object) -> bool:
    return (
        isinstance(engine, AsyncEngine)
        and engine.dialect.name == "sqlite"
        and engine.url.database not in (None, "", ":memory:")  # another connection would not see it
    )


async def on_connection(session: AsyncSession, fn: Callable[[Connection], T]) -> T:
    """``fn(connection)``: on SQLite in one hand-off to the writer thread (its own transaction,
    committed), on Postgres (and in-memory SQLite) in the session's transaction (the caller commits)."""
    if _uses_writer_thread(session.bind):
        return await sqlite_writer(cast("AsyncEngine", session.bind)).run(fn)
    connection = await session.connection()
    return await connection.run_sync(fn)


# One lock per event loop (a server has one; a test suite runs many): an asyncio.Lock binds to the
# loop where it was first waited on, and would refuse every other loop afterwards.
_SQLITE_WRITER_LOCKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()


def _sqlite_writer_lock() -> asyncio.Lock:
    loop = asyncio.get_running_loop()
    lock = _SQLITE_WRITER_LOCKS.get(loop)
    if lock is None:
        lock = _SQLITE_WRITER_LOCKS[loop] = asyncio.Lock()
    return lock


@contextlib.asynccontextmanager
async def writer_lock(session: AsyncSession) -> AsyncIterator[None]:
    """Serialise this process's write transactions on SQLite.

    SQLite admits one writer at a time and makes the others poll with growing sleeps (busy_timeout),
    which wrecks throughput under concurrent requests; queueing writers on an asyncio lock instead
    costs nothing. Postgres has row-level locking and needs no such thing.
    """
    if session.bind.dialect.name != "sqlite":
        yield
        return
    async with _sqlite_writer_lock():
        yield
