"""Severity levels and four-level thresholds (after Dr. Elephant's ``Severity``/``SeverityThresholds``).

A rule never decides a level with scattered ``if``s: it measures one value, maps it through declared
:class:`Thresholds` and then *damps* the result with :func:`damp`, the min() with a "does it matter"
severity, so that a 3 % gap is never critical and a p99 from 20 requests is never severe.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum

__all__ = ["Severity", "Thresholds", "damp"]


class Severity(IntEnum):
    """NONE < LOW < MODERATE < SEVERE < CRITICAL. Only MODERATE and above count as a problem."""

    NONE = 0
    LOW = 1
    MODERATE = 2
    SEVERE = 3
    CRITICAL = 4

    @property
    def label(self) -> str:
        """The public spelling (``"severe"``), as in the Recommendation JSON."""
        # By value from a table: Enum's ``name`` is a descriptor of Python calls, asked per finding.
        return _LABELS[self]

    @classmethod
    def from_label(cls, label: str) -> Severity:
        """Parse ``"severe"`` (any case); raises ``ValueError`` naming the accepted labels."""
        try:
            return cls[label.strip().upper()]
        except KeyError:
            accepted = ", ".join(s.label for s in cls)
            raise ValueError(f"unknown severity {label!r}; expected one of {accepted}") from None


_LEVELS = (Severity.LOW, Severity.MODERATE, Severity.SEVERE, Severity.CRITICAL)
#: :attr:`Severity.label` by value.
_LABELS = tuple(level.name.lower() for level in Severity)


def damp(severity: Severity, *caps: Severity | None) -> Severity:
    """``min(severity, *caps)``; a ``None`` cap means "no opinion" and is ignored."""
    result = severity
    for cap in caps:
        if cap is not None and cap < result:
            result = cap
    return result


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Four monotonic limits and a direction.

    Ascending: ``value >= critical`` is CRITICAL, ``>= severe`` SEVERE, … ``< low`` NONE.
    Descending (smaller is worse, e.g. efficiency): ``value <= critical`` is CRITICAL, and so on.
    Equal neighbours are allowed (they collapse a level); out-of-order limits are rejected.
    """

    low: float
    moderate: float
    severe: float
    critical: float
    ascending: bool = True

    def __post_init__(self) -> None:
        values = self.values
        if any(math.isnan(v) or math.isinf(v) for v in values):
            raise ValueError(f"thresholds must be finite numbers, got {list(values)}")
        pairs = list(itertools.pairwise(values))
        ok = all(a <= b for a, b in pairs) if self.ascending else all(a >= b for a, b in pairs)
        if not ok:
            direction = "ascending" if self.ascending else "descending"
            raise ValueError(f"thresholds must be {direction} (low, moderate, severe, critical), got {list(values)}")

    @classmethod
    def of(cls, values: Sequence[float], *, ascending: bool = True) -> Thresholds:
        """Build from a ``[low, moderate, severe, critical]`` list (as written in thresholds.toml)."""
        if len(values) != 4:
            raise ValueError(f"expected 4 thresholds (low, moderate, severe, critical), got {len(values)}")
        low, moderate, severe, critical = (float(v) for v in values)
        return cls(low, moderate, severe, critical, ascending)

    @property
    def values(self) -> tuple[float, float, float, float]:
        return (self.low, self.moderate, self.severe, self.critical)

    def severity_of(self, value: float | None) -> Severity:
        """The level ``value`` reaches; ``None`` (not measured) is NONE."""
        # Every rule calls this several times on every run: the four comparisons unrolled.
        if value is None or value != value:  # noqa: PLR0124  (NaN, without a call to math.isnan)
            return Severity.NONE
        if self.ascending:
            if not value >= self.low:
                return Severity.NONE
            if not value >= self.moderate:
                return Severity.LOW
            if not value >= self.severe:
                return Severity.MODERATE
            return Severity.SEVERE if not value >= self.critical else Severity.CRITICAL
        if not value <= self.low:
            return Severity.NONE
        if not value <= self.moderate:
            return Severity.LOW
        if not value <= self.severe:
            return Severity.MODERATE
        return Severity.SEVERE if not value <= self.critical else Severity.CRITICAL

    def describe(self, level: Severity) -> str:
        """The range of values that gives ``level``, for docs and evidence (``">= 0.8"``)."""
        if level is Severity.NONE:
            return f"< {self.low:g}" if self.ascending else f"> {self.low:g}"
        limit = self.values[level.value - 1]
        return f">= {limit:g}" if self.ascending else f"<= {limit:g}"
