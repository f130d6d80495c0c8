"""Which expectation function serves predictions: the active fitted model, or the physics prior.

The one place that decides, so that /predict, the rules and reports always agree.

Each process keeps the loaded model in a cache, per database, keyed by the active version and
its artifact's SHA-256. At most every :data:`RECHECK_SECONDS` it asks the database which version
is active (one indexed single-row query, no artifact bytes), so every worker of every host picks
up an activation or a rollback within seconds, without a restart. A changed key loads the new artifact
off the event loop; an artifact that fails to load (library mismatch, corrupt bytes, untrusted
types) is remembered as failed, the physics prior serves, and :func:`model_status` (→ /health)
says why. The model is never loaded at import time.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, ClassVar

from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlalchemy.ext.asyncio import AsyncSession

from advisor.db.models import FittedModel
from advisor.domain.models.schemas import ModelStatus
from advisor.ml.prior import PRIOR_MODEL_VERSION, prior_expectations
from advisor.rules.context import ExpectationsFn

__all__ = ["RECHECK_SECONDS", "expectations_fn_for", "invalidate", "model_status", "reset"]

#: How stale a worker's idea of the active version may be.
RECHECK_SECONDS = 2.0


@dataclass(frozen=True)
class _Served:
    key: tuple[str, str] | None  # (version, artifact sha256) of the active row; None: none active
    fn: ExpectationsFn
    error: str | None


_PRIOR = _Served(None, prior_expectations, None)


@dataclass
class _Entry:
    served: _Served = _PRIOR
    checked_at: float = float("-inf")


class _Cache:
    #: Per database URL (a process normally talks to one; tests and tools to several).
    entries: ClassVar[dict[str, _Entry]] = {}
    lock: ClassVar[asyncio.Lock | None] = None
    lock_loop: ClassVar[asyncio.AbstractEventLoop | None] = None

    @classmethod
    def get_lock(cls) -> asyncio.Lock:
        # One lock per event loop (tests and the CLI run several loops in one process).
        loop = asyncio.get_running_loop()
        if cls.lock is None or cls.lock_loop is not loop:
            cls.lock, cls.lock_loop = asyncio.Lock(), loop
        return cls.lock


def _database(session: AsyncSession) -> str:
    bind = session.get_bind()  # the sync Engine (or Connection) behind the async session
    url = bind.url if isinstance(bind, Engine) else bind.engine.url
    return url.render_as_string(hide_password=True)


def invalidate() -> None:
    """Forget when the database was last checked (after an activation in this process), so the
    next request re-reads the active version at once. Loaded models stay cached by key."""
    for entry in _Cache.entries.values():
        entry.checked_at = float("-inf")


def reset() -> None:
    """Forget the loaded models as well, as a freshly started worker would (tests, tools)."""
    _Cache.entries.clear()


def _load(version: str, artifact: bytes, sha: str, libraries: dict[str, Any]) -> _Served:
    from advisor.ml.store import ArtifactError, loads

    try:
        model = loads(artifact, expected_sha256=sha, recorded_versions=libraries)
    except ArtifactError as exc:
        return _Served((version, sha), prior_expectations, f"version {version} not served: {exc}")
    return _Served((version, sha), model, None)


async def _current(session: AsyncSession) -> _Served:
    entry = _Cache.entries.setdefault(_database(session), _Entry())
    if time.monotonic() - entry.checked_at < RECHECK_SECONDS:
        return entry.served
    async with _Cache.get_lock():
        if time.monotonic() - entry.checked_at < RECHECK_SECONDS:
            return entry.served  # another request re-checked while this one waited
        row = (
            await session.execute(
                select(FittedModel.version, FittedModel.artifact_sha256, FittedModel.library_versions)
                .where(FittedModel.is_active.is_(True))
                .order_by(FittedModel.updated_at.desc())
                .limit(1)
            )
        ).first()
        if row is None:
            served = _PRIOR
        elif entry.served.key == (row.version, row.artifact_sha256):
            served = entry.served
        else:
            artifact = await session.scalar(select(FittedModel.artifact).where(FittedModel.version == row.version))
            # Deserialising and compiling takes ~0.1-0.5 s of CPU: keep it off the event loop.
            served = await asyncio.to_thread(
                _load, row.version, artifact or b"", row.artifact_sha256, dict(row.library_versions or {})
            )
        entry.served = served
        entry.checked_at = time.monotonic()
        return served


async def expectations_fn_for(session: AsyncSession) -> ExpectationsFn:
    """The expectation function in force: the active fitted model, else the physics prior."""
    return (await _current(session)).fn


async def model_status(session: AsyncSession) -> ModelStatus:
    """What this worker serves and, when an active version is not served, why."""
    served = await _current(session)
    if served.key is None:
        return ModelStatus(source="physics-prior", active=None, serving=PRIOR_MODEL_VERSION, loaded=False)
    version = served.key[0]
    if served.error is not None:
        return ModelStatus(
            source="physics-prior",
            active=version,
            serving=PRIOR_MODEL_VERSION,
            loaded=False,
            error=served.error,
        )
    return ModelStatus(source="fitted", active=version, serving=version, loaded=True)
