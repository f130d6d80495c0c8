"""How much of the trees' residual correction a head serves: ``base + λ · trees`` in log space.

A head predicts ``log(measured / reference)`` as the physics-shaped base (:mod:`advisor.ml.base`)
plus gradient-boosted trees fitted on what the base leaves. On sources the model never saw the
trees can make things worse (prefill by held-out source: the base alone 23.9 % MdAPE, base + trees
28.5 %, docs/model.md), so the served prediction is ``base × exp(λ · trees)`` with ``λ ∈ [0, 1]``
per head, chosen on the out-of-fold predictions the fit's grouped cross-validation already made:
no extra fit per λ, since a fold's shrunk prediction is ``base + λ (raw − base)`` of the same
fold's base and raw (base + trees) predictions.

**Objective.** The mean absolute log error over the out-of-fold rows of the calibration groupings
(by device and by source, pooled), rows of a hardware kind their fold never saw left out (those
are answered by the unseen-kind fallback whatever λ is). The mean of ``|log error|`` rather than
the median of the percentage error the tables report: the median moves in steps as single rows
cross it, and chosen by it the nested decode score by held-out source was 15.1 % against 13.8 %
(prefill alike, 23.9 %; docs/model.md).

**Honest scores.** λ chosen on every fold and scored on the same folds would flatter it. The
cross-validation reports each fold with the λ chosen on the *other* folds' rows only
(:func:`nested`): for leave-one-source-out, the λ for source *s* comes from the out-of-fold
residuals of every other source (in both pooled groupings), so *s*'s measurements never choose
the λ they are scored with. The deployed head uses the λ chosen on every row (:func:`choose`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["LAMBDA_GRID", "Losses", "Selection", "apply_nested", "choose", "nested", "shrunk"]

#: The candidate λ (0: the base alone; 1: base + trees, the unshrunk model).
LAMBDA_GRID = np.round(np.linspace(0.0, 1.0, 21), 2)

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


def shrunk(base: FloatArray, raw: FloatArray, lam: float) -> FloatArray:
    """``base + λ (raw − base)``: a hybrid prediction ``raw`` with its trees scaled by ``λ``."""
    return np.asarray(base + lam * (raw - base), dtype=np.float64)


@dataclass(frozen=True)
class Selection:
    """One grouping's out-of-fold predictions over a CV sample: the base alone, base + trees
    (``raw``), and which rows were of a kind of device their fold had seen (``seen``; the others
    do not depend on λ)."""

    base: FloatArray
    raw: FloatArray
    seen: BoolArray


def _per_row(y: FloatArray, pool: Sequence[Selection], grid: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Each row's summed ``|log error|`` at every λ of ``grid`` over the groupings of ``pool``
    where it was of a seen kind (``(grid, rows)``), and in how many groupings it was."""
    total = np.zeros((len(grid), len(y)))
    count = np.zeros(len(y))
    for item in pool:
        seen = item.seen.astype(np.float64)
        residual = y - item.base
        trees = item.raw - item.base
        # |y − base − λ trees| for every λ at once; rows of an unseen kind weigh 0.
        total += np.abs(residual[None, :] - grid[:, None] * trees[None, :]) * seen[None, :]
        count += seen
    return total, count


def _best(losses: FloatArray, count: float, grid: FloatArray) -> float:
    """The λ of ``grid`` with the lowest summed loss (ties: the smallest λ, less of the trees);
    1.0, the unshrunk model, when no row counted."""
    if count <= 0:
        return 1.0
    mean = losses / count
    return float(grid[int(np.flatnonzero(mean <= mean.min() + 1e-12)[0])])


class Losses:
    """The pooled losses of one CV sample, computed once (:func:`choose` and :func:`nested`
    read them; the fit asks for the deployed λ and one λ per fold of every grouping)."""

    def __init__(self, y: FloatArray, pool: Sequence[Selection], *, grid: FloatArray = LAMBDA_GRID):
        self.grid = grid
        self.total, self.count = _per_row(y, pool, grid)
        self.all_losses, self.all_count = self.total.sum(axis=1), float(self.count.sum())

    def choose(self, keep: BoolArray | None = None) -> float:
        if keep is None:
            return _best(self.all_losses, self.all_count, self.grid)
        return _best(self.total[:, keep].sum(axis=1), float(self.count[keep].sum()), self.grid)

    def nested(self, folds: npt.NDArray[np.intp]) -> Mapping[int, float]:
        out: dict[int, float] = {}
        for fold in np.unique(folds).tolist():
            mask = folds == fold
            losses = self.all_losses - self.total[:, mask].sum(axis=1)
            out[int(fold)] = _best(losses, self.all_count - float(self.count[mask].sum()), self.grid)
        return out


def choose(
    y: FloatArray, pool: Sequence[Selection], keep: BoolArray | None = None, *, grid: FloatArray = LAMBDA_GRID
) -> float:
    """The λ of ``grid`` with the lowest mean ``|log error|`` over the pooled out-of-fold rows
    (``keep``: only these rows of ``y``). Ties go to the smaller λ; 1.0 when no row is usable."""
    return Losses(y, pool, grid=grid).choose(keep)


def nested(
    y: FloatArray, pool: Sequence[Selection], folds: npt.NDArray[np.intp], *, grid: FloatArray = LAMBDA_GRID
) -> Mapping[int, float]:
    """Per fold of a reporting grouping (``folds``: each row's fold), the λ :func:`choose` picks
    on the rows outside that fold only."""
    return Losses(y, pool, grid=grid).nested(folds)


def apply_nested(selection: Selection, folds: npt.NDArray[np.intp], lambdas: Mapping[int, float]) -> FloatArray:
    """The grouping's out-of-fold predictions with each fold's own λ (rows of unseen kinds are
    shrunk too; the caller answers them with the fallback)."""
    out = selection.raw.copy()
    for fold, lam in lambdas.items():
        mask = folds == fold
        out[mask] = shrunk(selection.base[mask], selection.raw[mask], lam)
    return out
