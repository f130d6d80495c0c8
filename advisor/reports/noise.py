"""The noise-aware comparison of two samples of runs (last week against this week).

A change is significant only when both hold:
- a one-sided Mann–Whitney U test says "worse" (or "better") at ``alpha``: rank-based, so a few
  outlier runs (a cold start, a noisy neighbour) cannot decide it, and it assumes no distribution for
  tail latencies, which are skewed;
- the relative change of the medians is at least ``min_change`` and at least ``spread_factor`` times
  the run-to-run spread (the robust coefficient of variation, 1.4826·MAD / median, of the noisier
  week). With many
  runs a test alone finds tiny, real but irrelevant shifts; this floor keeps a change that stays
  inside the usual run-to-run spread from ever being called a regression.

docs/reports.md explains the choice and its false-alarm rate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

__all__ = ["NoiseTest", "Verdict", "compare"]

Verdict = Literal["worse", "better", "same", "too-few-runs"]

#: 1.4826·MAD estimates the standard deviation of normal data, while ignoring outliers.
_MAD_TO_SIGMA = 1.4826


@dataclass(frozen=True)
class NoiseTest:
    """The test's parameters (defaults in docs/reports.md)."""

    alpha: float = 0.001
    min_change: float = 0.05
    spread_factor: float = 2.0
    min_runs: int = 8

    def describe(self) -> str:
        return (
            f"one-sided Mann–Whitney U at alpha={self.alpha}, and a change of the median of at least "
            f"{self.min_change:.0%} and at least {self.spread_factor:g}× the run-to-run spread "
            f"(1.4826·MAD/median of the noisier week); at least {self.min_runs} runs on each side"
        )


@dataclass(frozen=True)
class Comparison:
    verdict: Verdict
    before: float | None
    after: float | None
    change: float | None
    p_value: float | None
    spread: float | None
    n_before: int
    n_after: int


def _relative_spread(values: np.ndarray) -> float:
    median = float(np.median(values))
    if median == 0:
        return 0.0
    return _MAD_TO_SIGMA * float(np.median(np.abs(values - median))) / abs(median)


def compare(
    before: Sequence[float], after: Sequence[float], *, higher_is_better: bool, test: NoiseTest = NoiseTest()
) -> Comparison:
    """Compare ``after`` with ``before``; ``change`` is the relative change of the median."""
    a = np.asarray([v for v in before if v is not None], dtype=float)
    b = np.asarray([v for v in after if v is not None], dtype=float)
    med_a = float(np.median(a)) if a.size else None
    med_b = float(np.median(b)) if b.size else None
    change = (med_b - med_a) / abs(med_a) if med_a and med_b is not None else None
    if a.size < test.min_runs or b.size < test.min_runs or change is None:
        return Comparison("too-few-runs", med_a, med_b, change, None, None, int(a.size), int(b.size))
    # The noisier week sets the spread: a week that got noisier cannot make its own shift look large.
    spread = max(_relative_spread(a), _relative_spread(b))
    floor = max(test.min_change, test.spread_factor * spread)
    worse_sign = -1.0 if higher_is_better else 1.0
    # The effect-size floor is cheap and decides most comparisons: the U test runs only past it.
    verdict: Verdict = "same"
    p_value: float | None = None
    if abs(change) >= floor:
        worse = change * worse_sign > 0
        alternative = (
            ("less" if higher_is_better else "greater") if worse else ("greater" if higher_is_better else "less")
        )
        from scipy.stats import mannwhitneyu  # scipy loads only when a report is built

        p_value = float(mannwhitneyu(b, a, alternative=alternative).pvalue)
        if p_value < test.alpha:
            verdict = "worse" if worse else "better"
    return Comparison(verdict, med_a, med_b, change, p_value, spread, int(a.size), int(b.size))
