"""The bounded memo the analysis keeps its per-setup answers in (engine configs, rooflines and
expectations, what-if re-analyses, what rules derive from a setup)."""

from __future__ import annotations

import contextlib
from typing import TypeVar

__all__ = ["remember"]

_K = TypeVar("_K")
_V = TypeVar("_V")


def remember(cache: dict[_K, _V], key: _K, value: _V, size: int) -> _V:
    """Store ``value`` under ``key`` and return it; at ``size`` entries the oldest goes first.

    A plain dict in insertion order, not :func:`functools.lru_cache`: the callers key by object
    identity and keep the keyed objects alive in the entry, and they look up before computing
    without a wrapper call. Another thread evicting at the same time is harmless."""
    if len(cache) >= size:
        with contextlib.suppress(KeyError, RuntimeError, StopIteration):
            del cache[next(iter(cache))]
    cache[key] = value
    return value
