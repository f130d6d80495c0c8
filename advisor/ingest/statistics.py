"""The one summary of raw values (per request, per token gap, per response): mean, spread and
percentiles, for the ingest parsers and the live probe (``advisor measure``) alike.

Percentiles use linear interpolation between closest ranks, numpy's default (``np.percentile``
``method="linear"``, Hyndman & Fan's type 7) and the way vLLM computes its own summary, so a summary
computed here from a tool's per-request arrays matches the one the tool printed.

Hand-written in pure Python rather than calling numpy so the CLI need not import numpy to summarise a
few dozen probes; it follows numpy's arithmetic step by step (its pairwise summation, its
interpolation), so the results agree with ``np.mean``/``np.std``/``np.percentile`` to the last bit and
the golden files do not depend on which of the two computed them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from advisor.canonical import Percentiles

__all__ = ["QUANTILES", "distribution", "mean_of", "percentile", "summarize"]

#: The percentiles a summary holds (every one :class:`advisor.canonical.Percentiles` has), in %.
QUANTILES: tuple[tuple[str, float], ...] = (
    ("p25", 25.0),
    ("p50", 50.0),
    ("p75", 75.0),
    ("p90", 90.0),
    ("p95", 95.0),
    ("p99", 99.0),
    ("p99_9", 99.9),
)


def _pairwise_sum(values: Sequence[float], start: int, count: int) -> float:
    """numpy's ``pairwise_sum`` (``loops_utils.h``): plain below 8 values, eight running sums up to
    a block of 128, halves (on a multiple of 8) above."""
    if count < 8:
        total = 0.0
        for i in range(start, start + count):
            total += values[i]
        return total
    if count <= 128:
        sums = list(values[start : start + 8])
        i = 8
        while i < count - count % 8:
            for j in range(8):
                sums[j] += values[start + i + j]
            i += 8
        total = ((sums[0] + sums[1]) + (sums[2] + sums[3])) + ((sums[4] + sums[5]) + (sums[6] + sums[7]))
        for k in range(start + i, start + count):
            total += values[k]
        return total
    half = count // 2
    half -= half % 8
    return _pairwise_sum(values, start, half) + _pairwise_sum(values, start + half, count - half)


def percentile(ordered: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) of ascending ``ordered`` values, linearly interpolated.

    The arithmetic follows numpy's step by step (virtual index ``(n - 1) × q / 100``, then its
    ``_lerp``, which interpolates from the nearer neighbour), so results agree to the last bit.
    """
    if not ordered:
        raise ValueError("the percentile of no values")
    if math.isnan(q) or not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile must be in 0..100, got {q}")
    position = (len(ordered) - 1) * (q / 100.0)
    below = math.floor(position)
    if below >= len(ordered) - 1:
        return float(ordered[-1])
    low, high = float(ordered[below]), float(ordered[below + 1])
    weight = position - below
    if weight >= 0.5:
        return high - (high - low) * (1.0 - weight)
    return low + (high - low) * weight


def summarize(values: Iterable[float]) -> Percentiles:
    """Mean, min, max, population standard deviation and every canonical percentile of ``values``;
    an empty summary for no values. Raises ValueError for a NaN or infinite value."""
    given = [float(v) for v in values]
    if not given:
        return Percentiles()
    if not all(math.isfinite(v) for v in given):
        raise ValueError("values to summarise must be finite numbers")
    count = len(given)
    # Summed in the given order, as numpy does: the rounding depends on it.
    mean = _pairwise_sum(given, 0, count) / count
    squares = [(v - mean) * (v - mean) for v in given]
    spread = math.sqrt(_pairwise_sum(squares, 0, count) / count)
    ordered = sorted(given)
    out = {key: percentile(ordered, q) for key, q in QUANTILES}
    return Percentiles(mean=mean, min=ordered[0], max=ordered[-1], std=spread, **out)


def distribution(values: Sequence[float]) -> Percentiles:
    """:func:`summarize` for per-response values, except that one response gives only its value, as
    the mean: a percentile or a spread of one sample would claim more than was measured."""
    if len(values) == 1:
        return Percentiles(mean=float(values[0]))
    return summarize(values)


def mean_of(values: Sequence[float]) -> float | None:
    """The arithmetic mean, or None for an empty sequence."""
    return _pairwise_sum([float(v) for v in values], 0, len(values)) / len(values) if values else None
