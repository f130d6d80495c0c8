"""What the unseen-family band needs, family by family, on the published runs (issue #17, bands).

Runs the leave-one-family-out cross-validation of the decode and prefill heads as
``advisor.ml.train.fit`` does, then prints, for each held-out family, the widening factor the
session 6 band (the 10th-90th percentile of the fold's training residuals around the fallback's
answer, times a factor) and the shift the shipped band (the same percentiles, each end moved out
by a log offset) would need to cover 80 % of that family's rows, and what the shipped construction
covers one level out, row-pooled and with every family weighing the same (docs/model.md,
"Session 7"). About a second of CPU.

    .venv/bin/python -m bench.family_bands
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
from threadpoolctl import threadpool_limits

from advisor.catalog import Catalog
from advisor.ml import train
from advisor.ml.dataset import public_dataset

__all__ = ["main"]

#: The session 6 grid of widening factors (for the "needed" column only).
FACTOR_GRID = np.round(np.arange(1.0, 4.001, 0.1), 1)


def _factor_inside(
    residuals: npt.NDArray[np.float64], low: npt.NDArray[np.float64], high: npt.NDArray[np.float64], factor: float
) -> npt.NDArray[np.bool_]:
    """The session 6 band: the unshifted offsets times a factor."""
    return np.asarray((np.minimum(low * factor, 0.0) <= residuals) & (residuals <= np.maximum(high * factor, 0.0)))


def _needed(
    grid: npt.NDArray[np.float64],
    inside: Callable[[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64], float], Any],
    residuals: npt.NDArray[np.float64],
    low: npt.NDArray[np.float64],
    high: npt.NDArray[np.float64],
) -> float:
    """The smallest value of ``grid`` under which the band covers 80 % of the rows."""
    for value in grid.tolist():
        if float(np.mean(inside(residuals, low, high, value))) >= train.NOMINAL_COVERAGE:
            return float(value)
    return float(grid[-1])


def main() -> None:
    started = time.process_time()
    sets = train.build_training_sets(public_dataset(Catalog.default()))
    print("| target | held out | rows | widening needed | shift needed |")
    print("|---|---|---|---|---|")
    summary = []
    with threadpool_limits(limits=1):
        for target in train.FAMILY_TARGETS:
            ts = sets[target]
            sample = train._Sample.of(ts)
            run = train._cross_validate(ts, "family", lambda _: None, sample)
            if run is None:
                continue
            runs = {"family": run}
            mode = train._fallback_mode(ts, runs.values())
            train._answer_unseen(run, mode)
            widening = train._Widening.of(ts, runs, mode)
            if widening is None:
                continue
            for family in sorted(set(widening.families.tolist())):
                rows = widening.families == family
                r, lo, hi = widening.residuals[rows], widening.low[rows], widening.high[rows]
                factor = _needed(FACTOR_GRID, _factor_inside, r, lo, hi)
                shift = _needed(train.SHIFT_GRID, train._widened_inside, r, lo, hi)
                print(f"| {target} | {family} | {int(rows.sum())} | {factor:.1f} | {shift:.2f} |")
            metrics = train._scheme_metrics(ts, "family", run, mode, widening)
            summary.append(
                f"{target}: shipped shift {widening.choose():.2f}; leave-one-family-out coverage one level out "
                f"{metrics['coverage']:.1%} row-pooled, {metrics['coverage_family_mean']:.1%} per family"
            )
    print()
    print("\n".join(summary))
    print(f"({time.process_time() - started:.1f} s CPU)")


if __name__ == "__main__":
    main()
