"""Cumulative Prometheus histograms and the quantiles estimated from their buckets.

Estimated like Prometheus' ``histogram_quantile``: find the bucket that holds the rank, then
interpolate linearly inside it (:func:`histogram_quantile`). An estimate that lands in the first
bucket (whose lower edge, 0, is an assumption) or in the ``+Inf`` bucket (no upper edge) is not a
measurement, and says so (:attr:`QuantileEstimate.reliable`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from advisor.errors import IngestError

__all__ = ["Histogram", "QuantileEstimate", "counter_reset_error", "histogram_quantile"]


@dataclass(frozen=True)
class QuantileEstimate:
    """A quantile interpolated inside the bucket ``(lower, upper]`` that holds its rank."""

    value: float
    lower: float
    upper: float
    #: True when the rank fell in the first bucket, whose lower edge (0) is assumed, not measured.
    first_bucket: bool

    @property
    def reliable(self) -> bool:
        """False in the first bucket and in the ``+Inf`` bucket: the estimate is a guess there."""
        return not self.first_bucket and not math.isinf(self.upper)


def histogram_quantile(q: float, bounds: Sequence[float], counts: Sequence[float]) -> QuantileEstimate | None:
    """The ``q``-quantile (0..1) of a histogram given as cumulative bucket counts.

    ``bounds`` are the buckets' upper edges (``le``), strictly ascending, normally ending in ``+Inf``.
    This follows Prometheus' ``histogram_quantile`` (``promql/quantile.go``): counts are made
    monotonic, the rank is ``q × total``, and the value is interpolated linearly inside the bucket
    holding the rank, the first bucket starting at 0. Returns None for an empty histogram. Unlike
    Prometheus, the result says which bucket it came from, so callers can refuse estimates that are
    bounds rather than measurements. Hand-written because no maintained Python library implements it
    (``prometheus_client`` only exposes metrics).
    """
    if math.isnan(q) or not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile must be in 0..1, got {q}")
    if not bounds or len(bounds) != len(counts):
        raise ValueError("bounds and counts must be non-empty and of the same length")
    if any(b2 <= b1 for b1, b2 in itertools.pairwise(bounds)):
        raise ValueError("bucket bounds must be strictly ascending")
    # Prometheus' ensureMonotonic: a cumulative count can only grow (scrapes are not atomic).
    cumulative = list(itertools.accumulate((max(c, 0.0) for c in counts), max))
    total = cumulative[-1]
    if total <= 0:
        return None
    rank = q * total
    # The first bucket that reaches the rank and holds an observation (q = 0 → first non-empty one).
    b = next(i for i, c in enumerate(cumulative) if c >= rank and c > 0)
    upper = bounds[b]
    if b == 0:
        if upper <= 0 or math.isinf(upper):
            # Everything at or below a non-positive edge, or only the +Inf bucket: no interval.
            return None if math.isinf(upper) else QuantileEstimate(upper, upper, upper, first_bucket=True)
        lower, below = 0.0, 0.0
    else:
        lower, below = bounds[b - 1], cumulative[b - 1]
    if math.isinf(upper):
        # Prometheus answers with the largest finite edge: a lower bound, not an estimate.
        return QuantileEstimate(lower, lower, upper, first_bucket=False)
    value = lower + (upper - lower) * (rank - below) / (cumulative[b] - below)
    return QuantileEstimate(min(max(value, lower), upper), lower, upper, first_bucket=b == 0)


@dataclass(frozen=True)
class Histogram:
    """A cumulative histogram: ascending upper bounds (the last is ``+Inf``) and cumulative counts."""

    bounds: tuple[float, ...]
    counts: tuple[float, ...]
    sum: float | None = None

    @property
    def count(self) -> float:
        return self.counts[-1] if self.counts else 0.0

    @property
    def mean(self) -> float | None:
        """Exact mean (``_sum / _count``), unlike the percentiles."""
        if self.sum is None or self.count <= 0:
            return None
        return self.sum / self.count

    def quantile(self, q: float) -> QuantileEstimate | None:
        return histogram_quantile(q, self.bounds, self.counts)

    def minus(self, before: Histogram, name: str) -> Histogram:
        """This histogram less an earlier one of the same series (bucket-wise deltas)."""
        if before.bounds != self.bounds:
            raise IngestError(
                f"the buckets of {name} changed between the scrapes: the server restarted or was "
                "upgraded; take both scrapes from one server process",
                field=name,
            )
        counts = tuple(a - b for a, b in zip(self.counts, before.counts, strict=True))
        total = None if self.sum is None or before.sum is None else self.sum - before.sum
        if any(c < 0 for c in counts) or (total is not None and total < 0):
            raise counter_reset_error(name, before.count, self.count)
        return Histogram(self.bounds, counts, total)


def counter_reset_error(name: str, before: float, after: float) -> IngestError:
    return IngestError(
        f"counter {name} went down between the scrapes ({before:g} → {after:g}): the server restarted "
        "and its counters were reset; take both scrapes from one server process",
        field=name,
    )
