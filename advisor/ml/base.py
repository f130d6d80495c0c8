"""The physics-shaped base every head's gradient boosting corrects (a hybrid model).

Trees cannot extrapolate: asked about a device or an engine build unlike anything in training,
they answer with the nearest leaf. Each head therefore predicts ``base(x) + trees(x)``, where the
base is a small parametric law with a physical shape, fitted (weighted least squares in log space)
on the same training rows, and the trees learn what is left. For rows like the training data the
trees carry the detail; for rows outside it the base's shape carries the prediction.

* **Decode** (``decode_tok_s``): a decode step takes ``bytes / (e × bandwidth)`` plus a fixed
  overhead per step (kernel launches, sampling, a server's scheduler) and a small cost per extra
  sequence in the batch. Per stream, against the per-stream ceiling ``C`` at batch ``B``::

      log(measured / C) = -log(1/e + C × (t0 × exp(u[cell]) + t1 × (B - 1)))

  so efficiency falls as the ceiling rises (a 1B model on an H100 is launch-bound) and as the
  batch grows. ``e``, ``t0`` and ``t1`` are shared; the overhead belongs to the engine on the
  platform, so each cell (hardware kind × runtime family: CUDA llama.cpp, Metal llama.cpp, a GPU
  server, ...) scales ``t0`` by ``exp(u)``, with a ridge penalty :data:`CELL_PENALTY` pulling ``u``
  to 0: a cell seen in training gets its own overhead, an unseen one the shared value.
* **Prefill** (``prefill_tok_s``): the matmuls and the attention run at different shares of peak
  (:func:`advisor.physics.roofline.prefill_seconds_split`), so with ``a`` the attention share of
  the prefill FLOPs (``prefill_attention_share``, which grows with KV depth)::

      log(measured / C) = p + u[cell] - log(1 + a × (exp(q) - 1))

  ``exp(p + u)`` is the matmul efficiency of the cell and ``exp(q)`` how many times slower per
  FLOP the attention runs (``e_m / e_a``, shared). At depth 0 and a short prompt (``a ≈ 0``) this
  is one efficiency per cell; at 32k depth the attention term carries the prediction, from the
  shape rather than from a leaf. The reference is corrected first where the physics only
  *estimated* the device's compute (:func:`compute_correction`).
* **Everything else** (TTFT, ITL tails): one efficiency per cell, shrunk the same way
  (``log(measured / reference) = p + u[cell]``).

The base is plain numbers (stored in the artifact as a dict, no code), evaluated with numpy for
batches and in plain Python for a few rows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy.optimize import least_squares

from advisor.ml.features import FEATURES

__all__ = [
    "CELL_PENALTY",
    "MAX_ROWS",
    "TYPICAL_OPS_PER_BYTE",
    "PhysicalBase",
    "cell_of",
    "compute_correction",
    "fit_base",
]

#: Ridge penalty on the per-cell log offsets (in units of the weighted mean squared log residual
#: of one row): weak, so a cell with a few rows moves freely, but a cell with none stays at the
#: shared value instead of being undetermined. Fixed a priori, not tuned.
CELL_PENALTY = 0.1

#: Median published dense FP16 FLOP per byte of bandwidth of the catalogued devices of a kind that
#: publish one: 30 GPUs (RTX 3090 76 … L40S 419, median 205) and 8 accelerators (median 232). The
#: physics' stand-in for a device without a figure is the kind's *10th percentile*
#: (:data:`advisor.physics.ESTIMATED_OPS_PER_BYTE`, 100), a deliberate understatement; the model's
#: prefill reference uses the typical value instead (:func:`compute_correction`). The catalogue
#: has no published figures for Apple SoCs or CPUs, so those keep the physics' estimate.
TYPICAL_OPS_PER_BYTE: dict[str, float] = {"gpu": 205.0, "accelerator": 232.0}

#: The base is fitted on at most this many rows (a random sample of larger training sets).
MAX_ROWS = 20_000

_IDX = {name: i for i, name in enumerate(FEATURES)}
_DECODE = "decode"
_EFFICIENCY = "efficiency"
_PREFILL = "prefill"
_N_SHARED = {_DECODE: 3, _EFFICIENCY: 1, _PREFILL: 2}


def cell_of(kind: object, family: object) -> str:
    """``"gpu/llamacpp"``: the base's cell for a hardware kind and runtime family (``?`` if
    missing)."""
    return f"{kind if isinstance(kind, str) else '?'}/{family if isinstance(family, str) else '?'}"


def _kind_level(cell: str) -> str:
    return cell.split("/", 1)[0] + "/*"


def compute_correction(
    kind: object, estimated: float, log_tflops: float, log_bandwidth_gb_s: float, vendor: object = None
) -> float:
    """Log factor by which an NVIDIA GPU's or accelerator's *estimated* compute understates a
    typical one.

    ``max(0, log(TYPICAL_OPS_PER_BYTE[kind]) − log(estimated TFLOPS × 1000 / bandwidth))`` when the
    compute figure is the physics' stand-in and the vendor is NVIDIA, else 0. An inline NVIDIA
    device of 273 GB/s (stand-in 27 TFLOPS) gets log(205/100). The typical ratio is the catalogue's
    median, which datacenter and NVIDIA parts dominate: an AMD or Intel iGPU or APU given by its
    bandwidth alone keeps the conservative stand-in (issue #17 reports such an APU, raised to the
    median, predicted about 10× too fast), as does a device of unknown vendor.
    """
    if not estimated or not isinstance(kind, str) or kind not in TYPICAL_OPS_PER_BYTE:
        return 0.0
    if not isinstance(vendor, str) or vendor.strip().lower() != "nvidia":
        return 0.0
    if not (math.isfinite(log_tflops) and math.isfinite(log_bandwidth_gb_s)):
        return 0.0
    ops_per_byte = math.exp(log_tflops - log_bandwidth_gb_s) * 1000.0
    return max(0.0, math.log(TYPICAL_OPS_PER_BYTE[kind] / ops_per_byte))


@dataclass(frozen=True)
class _Inputs:
    """The columns the base reads, as arrays."""

    cell: npt.NDArray[np.object_]
    log_ceiling: npt.NDArray[np.float64]
    batch: npt.NDArray[np.float64]
    correction: npt.NDArray[np.float64]
    attention: npt.NDArray[np.float64]

    @classmethod
    def of_frame(cls, frame: pd.DataFrame, *, corrected: bool) -> _Inputs:
        kinds, families = frame["hardware_kind"].tolist(), frame["runtime_family"].tolist()
        # One label per distinct (kind, family) pair, shared by reference across rows.
        labels: dict[tuple[object, object], str] = {}
        cell = np.array(
            [
                labels.get((k, f)) or labels.setdefault((k, f), cell_of(k, f))
                for k, f in zip(kinds, families, strict=True)
            ],
            dtype=object,
        )
        concurrency = frame["log_concurrency"].to_numpy(dtype=np.float64)
        correction = np.zeros(len(frame))
        if corrected:
            columns = zip(
                kinds,
                frame["tflops_estimated"].tolist(),
                frame["log_tflops"].tolist(),
                frame["log_bandwidth_gb_s"].tolist(),
                frame["vendor"].tolist(),
                strict=True,
            )
            correction = np.array([compute_correction(*c) for c in columns], dtype=np.float64)
        attention = np.clip(np.nan_to_num(frame["prefill_attention_share"].to_numpy(dtype=np.float64), nan=0.0), 0, 1)
        return cls(
            cell,
            frame["log_decode_ceiling"].to_numpy(dtype=np.float64),
            np.exp(np.nan_to_num(concurrency, nan=0.0)),
            correction,
            attention,
        )


@dataclass(frozen=True)
class PhysicalBase:
    """A fitted base (see the module docstring). ``params`` are ``(log 1/e, log t0, log t1)`` for
    the decode shape, ``(p, q)`` for the prefill shape (log matmul efficiency, log attention
    slowdown) and ``(p,)`` for the efficiency shape; ``cells`` the per-cell offsets."""

    shape: str
    params: tuple[float, ...]
    cells: Mapping[str, float] = field(default_factory=dict)
    corrected: bool = False

    # ------------------------------------------------------------------ evaluation

    def _evaluate(self, params: npt.NDArray[np.float64], u: npt.NDArray[np.float64], x: _Inputs) -> Any:
        if self.shape == _DECODE:
            ceiling = np.exp(x.log_ceiling)
            overhead = np.exp(params[1] + u) + np.exp(params[2]) * (x.batch - 1.0)
            return x.correction - np.log(np.exp(params[0]) + ceiling * overhead)
        if self.shape == _PREFILL:
            return x.correction + params[0] + u - np.log1p(x.attention * np.expm1(params[1]))
        return x.correction + params[0] + u

    def predict_frame(self, frame: pd.DataFrame) -> npt.NDArray[np.float64]:
        """``log(measured / reference)`` according to the base, for a feature frame."""
        x = _Inputs.of_frame(frame, corrected=self.corrected)
        u = np.array([self._offset(c) for c in x.cell.tolist()], dtype=np.float64)
        return np.asarray(self._evaluate(np.asarray(self.params), u, x), dtype=np.float64)

    def _offset(self, cell: str) -> float:
        return self.cells.get(_kind_level(cell), 0.0) + self.cells.get(cell, 0.0)

    def predict_rows(self, rows: Sequence[Sequence[Any]]) -> npt.NDArray[np.float64]:
        """The same for feature rows (tuples in :data:`FEATURES` order), in plain Python."""
        return np.array([self.predict_row(row) for row in rows], dtype=np.float64)

    def predict_row(self, row: Sequence[Any]) -> float:
        kind = row[_IDX["hardware_kind"]]
        u = self._offset(cell_of(kind, row[_IDX["runtime_family"]]))
        correction = 0.0
        if self.corrected:
            correction = compute_correction(
                kind,
                float(row[_IDX["tflops_estimated"]]),  # type: ignore[arg-type]
                float(row[_IDX["log_tflops"]]),  # type: ignore[arg-type]
                float(row[_IDX["log_bandwidth_gb_s"]]),  # type: ignore[arg-type]
                row[_IDX["vendor"]],
            )
        p = self.params
        if self.shape == _DECODE:
            log_concurrency = float(row[_IDX["log_concurrency"]])  # type: ignore[arg-type]
            batch = 1.0 if math.isnan(log_concurrency) else math.exp(log_concurrency)
            ceiling = math.exp(float(row[_IDX["log_decode_ceiling"]]))  # type: ignore[arg-type]
            overhead = math.exp(p[1] + u) + math.exp(p[2]) * (batch - 1.0)
            return correction - math.log(math.exp(p[0]) + ceiling * overhead)
        if self.shape == _PREFILL:
            share = float(row[_IDX["prefill_attention_share"]])  # type: ignore[arg-type]
            share = 0.0 if math.isnan(share) else min(max(share, 0.0), 1.0)
            return correction + p[0] + u - math.log1p(share * math.expm1(p[1]))
        return correction + p[0] + u

    # ------------------------------------------------------------------ storage

    def to_dict(self) -> dict[str, Any]:
        """Plain types only (the artifact is a skops file of plain containers)."""
        return {
            "shape": self.shape,
            "params": [float(v) for v in self.params],
            "cells": {str(k): float(v) for k, v in self.cells.items()},
            "corrected": bool(self.corrected),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PhysicalBase:
        shape = str(data["shape"])
        if shape not in _N_SHARED:
            raise ValueError(f"unknown base shape {shape!r}")
        params = tuple(float(v) for v in data["params"])
        if len(params) != _N_SHARED[shape]:
            raise ValueError(f"a {shape} base has {len(params)} parameters")
        cells = {str(k): float(v) for k, v in dict(data["cells"]).items()}
        return cls(shape, params, cells, bool(data.get("corrected", False)))


def fit_base(
    target: str, frame: pd.DataFrame, y: npt.NDArray[np.float64], weight: npt.NDArray[np.float64]
) -> PhysicalBase:
    """Fit the base of ``target`` on feature rows, log ratios and weights (see the module
    docstring): Levenberg-Marquardt on the weighted log residuals plus the cell penalty."""
    shape = {"decode_tok_s": _DECODE, "prefill_tok_s": _PREFILL}.get(target, _EFFICIENCY)
    corrected = target == "prefill_tok_s"
    if len(frame) > MAX_ROWS:
        # A dozen parameters: a fixed random sample determines them as well as every row does,
        # at a fraction of the cost (each iteration evaluates the law once per parameter).
        keep = np.sort(np.random.default_rng(0).choice(len(frame), size=MAX_ROWS, replace=False))
        frame, y, weight = frame.iloc[keep], y[keep], weight[keep]
    x = _Inputs.of_frame(frame, corrected=corrected)
    names, codes = np.unique(x.cell, return_inverse=True)
    kind_names, kind_codes = np.unique([_kind_level(c) for c in names.tolist()], return_inverse=True)
    n_cells = len(names)
    n_shared = _N_SHARED[shape]
    template = PhysicalBase(shape, (0.0,) * n_shared, {}, corrected)
    sw = np.sqrt(weight / weight.mean())
    scale = math.sqrt(CELL_PENALTY)

    def residuals(theta: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        shared, u = theta[:n_shared], theta[n_shared:]
        per_cell = u[:n_cells] + u[n_cells:][kind_codes]
        fitted = template._evaluate(shared, per_cell[codes], x)
        return np.concatenate([sw * (y - fitted), scale * u])

    if shape == _DECODE:
        # 1/e = 1.2, t0 = 5 ms, t1 = 0.3 ms: the order of magnitude llama.cpp shows on a GPU.
        start = np.array([math.log(1.2), math.log(0.005), math.log(0.0003)])
    elif shape == _PREFILL:
        # Attention at half the matmul efficiency: the order llama.cpp shows at long depth.
        start = np.array([float(np.average(y - x.correction, weights=weight)), math.log(2.0)])
    else:
        start = np.array([float(np.average(y - x.correction, weights=weight))])
    x0 = np.concatenate([start, np.zeros(n_cells + len(kind_names))])
    # Levenberg-Marquardt (MINPACK through scipy): a dozen parameters, forward-difference Jacobian.
    theta = least_squares(residuals, x0, method="lm", x_scale=1.0).x
    labels = names.tolist() + kind_names.tolist()
    cells = {str(name): float(value) for name, value in zip(labels, theta[n_shared:].tolist(), strict=True)}
    return PhysicalBase(shape, tuple(float(v) for v in theta[:n_shared]), cells, corrected)
