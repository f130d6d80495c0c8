"""The fitted performance model at prediction time: heads, intervals and :class:`Expectations`.

A :class:`PerformanceModel` holds one :class:`Head` per target it was trained for. A head
predicts ``log(measured / reference)`` (:func:`advisor.ml.dataset.reference`) with a fitted
Pipeline and turns it into a band with split-conformal offsets: the 10th and 90th percentile of
the residuals its hardware-grouped cross-validation left (per hardware kind when there were
enough), so the band says how far runs on hardware the model had not seen landed.

Calling the model is the expectation function the rules, /predict and reports use (the same
signature as :func:`advisor.ml.prior.prior_expectations`, plus the specs).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from sklearn.pipeline import Pipeline

from advisor.ml.base import PhysicalBase
from advisor.ml.dataset import reference
from advisor.ml.expectations import Band, Expectations, physical_band
from advisor.ml.features import (
    FeatureInput,
    feature_frame,
    feature_row,
    hardware_family,
    neutral_columns,
    runtime_family,
    tree_rows,
)
from advisor.ml.forest import CompiledPipeline
from advisor.ml.prior import ttft_overhead
from advisor.physics import HardwareSpec, ModelSpec, QuantSpec, Roofline

__all__ = [
    "BATCH_THRESHOLD",
    "COMPUTE_TARGETS",
    "FALLBACK_SHIFT",
    "FALLBACK_WIDENING",
    "THIN_CELL_SOURCES",
    "Fallback",
    "Head",
    "PerformanceModel",
    "runtime_cell",
]

#: From this many rows on, scikit-learn's own predict is faster than the per-row evaluator.
BATCH_THRESHOLD = 64
#: Targets whose reference depends on the device's compute figure (their band widens when that
#: figure is only estimated: an inline device given by its bandwidth alone).
COMPUTE_TARGETS = frozenset({"prefill_tok_s", "ttft_p50_ms", "ttft_p99_ms"})
#: A prefill or TTFT band on a device whose compute figure is only the physics' stand-in (an
#: inline device given by its bandwidth alone) is widened by this factor in log space: the
#: reference itself is uncertain. Before session 7 the fallback's band was widened by it too
#: (now :data:`FALLBACK_SHIFT`).
FALLBACK_WIDENING = 1.5

#: The baseline's band on a kind of device the model never saw is its training residuals'
#: 10th-90th percentile (log offsets around its answer) moved out by this much on each side when
#: no leave-one-family-out rows choose the shift (:class:`advisor.ml.train._Widening`): a family
#: of device the model never saw may sit off by its own efficiency factor, an offset in log space,
#: which the spread of the known families' residuals does not contain. ``log(1.5)``: a priori, an
#: unseen family 1.5x off either way.
FALLBACK_SHIFT = math.log(1.5)

#: A runtime family (``server``, ``llamacpp``, ``mlx``) measured on a kind of device in fewer
#: than this many sources (publications, fleet deployments) is barely known there: its band is
#: widened to cover the fallback's (the band of a kind never seen), though the point prediction
#: stays the model's. One publication's rows say how that benchmark scatters around the model,
#: not how far the next one sits off (the shipped runs have the GPU servers from one source, NIM's
#: four rows; docs/model.md, "Session 8").
THIN_CELL_SOURCES = 2


def runtime_cell(kind: object, family: object) -> str | None:
    """``kind/runtime family`` (``gpu/server``), or None when either is unknown."""
    if not isinstance(kind, str) or not isinstance(family, str):
        return None
    return f"{kind}/{family}"


@dataclass(frozen=True)
class Fallback:
    """What a head answers for a hardware kind absent from its training rows: the roofline times
    the best constant (``constant`` = weighted median log ratio) with a wider band (``interval``,
    log offsets). Trees answer such a row from the nearest leaf, which is no better than the
    constant and can be far worse (an APU answered like a datacenter GPU)."""

    constant: float
    interval: tuple[float, float]
    families: frozenset[str]
    #: ``"constant"``: roofline × ``constant``; ``"base"``: the physics-shaped base alone (what
    #: scored better on kinds left out in cross-validation, :func:`advisor.ml.train.fit`).
    mode: str = "constant"
    #: Sources per :func:`runtime_cell` in the training rows; None for artifacts fitted before
    #: session 8 (no cell is then judged thin).
    cells: Mapping[str, int] | None = None

    def thin(self, cell: str | None) -> int | None:
        """The sources a known kind's runtime cell was measured in when fewer than
        :data:`THIN_CELL_SOURCES` (0: never), else None."""
        if self.cells is None or cell is None:
            return None
        found = self.cells.get(cell, 0)
        return found if found < THIN_CELL_SOURCES else None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "constant": self.constant,
            "interval": list(self.interval),
            "families": sorted(self.families),
            "mode": self.mode,
        }
        if self.cells is not None:
            out["cells"] = dict(sorted(self.cells.items()))
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Fallback:
        low, high = data["interval"]
        mode = str(data.get("mode", "constant"))
        if mode not in ("constant", "base"):
            raise ValueError(f"unknown fallback mode {mode!r}")
        families = frozenset(str(k) for k in data["families"])
        cells = data.get("cells")
        found = {str(k): int(v) for k, v in cells.items()} if isinstance(cells, Mapping) else None
        return cls(float(data["constant"]), (float(low), float(high)), families, mode, found)


@dataclass
class Head:
    """One target's Pipeline and its interval offsets (log space, ``(low, high)`` per hardware
    kind; ``"*"`` pools every kind). With a ``base`` (:mod:`advisor.ml.base`) the Pipeline
    predicts what is left over the base, and the head predicts the base plus ``shrink`` times
    the Pipeline (:mod:`advisor.ml.shrink`)."""

    target: str
    pipeline: Pipeline
    interval: Mapping[str, tuple[float, float]]
    n_train: int
    compiled: CompiledPipeline | None = field(default=None, repr=False, compare=False)
    base: PhysicalBase | None = None
    fallback: Fallback | None = None
    #: λ of :mod:`advisor.ml.shrink`: with a base, the head serves ``base + λ · trees`` (log
    #: space: ``base × exp(λ · trees)`` in the target's units), λ chosen by the grouped CV.
    shrink: float = 1.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.shrink <= 1.0:
            raise ValueError(f"shrink must be within [0, 1], got {self.shrink!r}")

    def falls_back(self, family: str) -> bool:
        """Whether a row of this hardware family (:func:`advisor.ml.features.hardware_family`) is
        answered by the fallback: neither its kind and vendor nor, without a vendor, its kind was
        in the training rows."""
        if self.fallback is None or family in self.fallback.families:
            return False
        kind, _, vendor = family.partition("/")
        if vendor == "?":
            # The caller did not say the vendor (a bare roofline, as the rules' what-ifs pass):
            # judged by the kind alone.
            return not any(known.partition("/")[0] == kind for known in self.fallback.families)
        return True

    def offsets(self, kind: str | None) -> tuple[float, float]:
        """Interval offsets for a hardware kind, never excluding the point prediction."""
        low, high = self.interval.get(kind or "*") or self.interval["*"]
        return min(low, 0.0), max(high, 0.0)

    def predict(
        self, rows: Sequence[tuple[object, ...]], encoded: npt.NDArray[np.float64] | None = None
    ) -> npt.NDArray[np.float64]:
        """``log(measured / reference)`` for feature rows. ``encoded``: the same rows as
        :meth:`CompiledPipeline.encode` of a head with the same categories encodes them, before
        any column is neutralised (:meth:`PerformanceModel.predict_arrays` encodes a batch once
        for every head that shares its categories)."""
        if self.compiled is None:
            trees = np.asarray(self.pipeline.predict(feature_frame(tree_rows(self.target, rows))), dtype=np.float64)
        elif len(rows) < BATCH_THRESHOLD:
            trees = self.compiled.predict(tree_rows(self.target, rows))
        elif encoded is not None:
            trees = self.compiled.predict_large_encoded(self._neutralised(encoded))
        else:
            trees = self.compiled.predict_large(tree_rows(self.target, rows))
        if self.base is None:
            return trees
        if self.shrink != 1.0:
            trees = self.shrink * trees
        return self.base.predict_rows(rows) + trees

    def _neutralised(self, encoded: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """An encoded batch as this head's trees see it: what :func:`tree_rows` then
        :meth:`CompiledPipeline.encode` give (a neutral numeric column 0, a neutral categorical
        one missing)."""
        columns = neutral_columns(self.target)
        if not columns or self.compiled is None:
            return encoded
        out = encoded.copy()
        for j in columns:
            out[:, j] = math.nan if j < self.compiled.n_categorical else 0.0
        return out


class PerformanceModel:
    """A loaded fitted-model version. Callable as an expectation function."""

    def __init__(self, heads: Mapping[str, Head], *, version: str, meta: Mapping[str, Any] | None = None):
        if "decode_tok_s" not in heads or "prefill_tok_s" not in heads:
            raise ValueError("a fitted model needs decode_tok_s and prefill_tok_s heads")
        self.heads = dict(heads)
        self.version = version
        self.meta: dict[str, Any] = dict(meta or {})

    def compile(self) -> PerformanceModel:
        """Build every head's fast evaluator (done once, when an artifact is loaded)."""
        for head in self.heads.values():
            if head.compiled is None:
                head.compiled = CompiledPipeline.from_pipeline(head.pipeline)
        return self

    # ------------------------------------------------------------------ raw predictions

    def predict_arrays(self, items: Sequence[FeatureInput]) -> dict[str, npt.NDArray[np.float64]]:
        """Every head's prediction in its target's units, as a ``(3, n)`` array of low,
        expected and high per input (NaN where the physics has no reference: no prompt for TTFT).
        The fast path for batches (rankings, reports, benchmarks)."""
        rows = [feature_row(item) for item in items]
        kinds = np.array([row[2] if isinstance(row[2], str) else "*" for row in rows])
        families = np.array([hardware_family(row[2], row[3]) for row in rows])
        estimated = np.array([item.roofline.prefill_tflops_estimated for item in items], dtype=bool)
        cells = np.array([runtime_cell(row[2], row[1]) or "" for row in rows])
        out: dict[str, npt.NDArray[np.float64]] = {}
        # Encoded once per set of categories, not once per head (the heads of one fit mostly
        # share them): ~1 ms per head on 1,000 rows.
        encodings: list[tuple[tuple[dict[str, int], ...], npt.NDArray[np.float64]]] = []

        def encoded_for(head: Head) -> npt.NDArray[np.float64] | None:
            if head.compiled is None or len(rows) < BATCH_THRESHOLD:
                return None
            for categories, matrix in encodings:
                if categories == head.compiled.categories:
                    return matrix
            matrix = head.compiled.encode(rows)
            encodings.append((head.compiled.categories, matrix))
            return matrix

        for target, head in self.heads.items():
            ratio = head.predict(rows, encoded_for(head))
            low, high = np.empty(len(rows)), np.empty(len(rows))
            for kind in np.unique(kinds).tolist():
                low[kinds == kind], high[kinds == kind] = head.offsets(kind)
            fallback = head.fallback
            if fallback is not None:
                fb_low, fb_high = min(fallback.interval[0], 0.0), max(fallback.interval[1], 0.0)
                for family in np.unique(families).tolist():
                    if head.falls_back(family):
                        mask = families == family
                        if fallback.mode == "base" and head.base is not None:
                            ratio[mask] = head.base.predict_rows([r for r, m in zip(rows, mask, strict=True) if m])
                        else:
                            ratio[mask] = fallback.constant
                        low[mask], high[mask] = fb_low, fb_high
                # A runtime family barely measured on a known kind: the model's answer, the band
                # at least as wide as the unseen kind's (rows that fell back have that band already).
                thin = np.isin(cells, [c for c in np.unique(cells).tolist() if c and fallback.thin(c) is not None])
                low[thin], high[thin] = np.minimum(low[thin], fb_low), np.maximum(high[thin], fb_high)
            if target in COMPUTE_TARGETS and estimated.any():
                # The device's compute is the physics' stand-in: the band widens as for an unseen
                # kind (the reference itself is uncertain).
                low[estimated] *= FALLBACK_WIDENING
                high[estimated] *= FALLBACK_WIDENING
            ref = np.array([reference(target, item.roofline) or math.nan for item in items], dtype=np.float64)
            logs = np.vstack([ratio + low, ratio, ratio + high])
            with np.errstate(over="ignore", invalid="ignore"):
                out[target] = ref * np.exp(logs)
        return out

    # ------------------------------------------------------------------ expectations

    def expectations_many(self, items: Sequence[FeatureInput]) -> list[Expectations]:
        """:class:`Expectations` for many setups at once (one batched predict per head)."""
        arrays = self.predict_arrays(items)
        columns = {target: values.T.tolist() for target, values in arrays.items()}
        heads = list(self.heads.values())
        out = []
        for i, item in enumerate(items):
            family = _family_of(item)
            carrier = "baseline" if any(head.falls_back(family) for head in heads) else "model"
            thin = None
            if carrier == "model":
                cell = runtime_cell(item.hardware_kind, runtime_family(item.runtime))
                counts = [h.fallback.thin(cell) for h in heads if h.fallback is not None]
                thin = next((n for n in counts if n is not None), None)
            values = {t: c[i] for t, c in columns.items()}
            out.append(self._expectations(item.roofline, values, carrier, thin, item.runtime))
        return out

    def expectations(
        self,
        roofline: Roofline,
        *,
        runtime: str | None,
        hardware_kind: str,
        hardware: HardwareSpec | None = None,
        model: ModelSpec | None = None,
        quant: QuantSpec | None = None,
        **_: object,
    ) -> Expectations:
        """What this setup and workload should measure (the expectation-function signature)."""
        item = FeatureInput(roofline, runtime, hardware_kind, hardware, model, quant)
        return self.expectations_many([item])[0]

    __call__ = expectations

    def _expectations(
        self,
        roof: Roofline,
        values: Mapping[str, Sequence[float]],
        carrier: str,
        thin: int | None = None,
        runtime: str | None = None,
    ) -> Expectations:
        decode = _band(values["decode_tok_s"], reference("decode_tok_s", roof))
        prefill = _band(values["prefill_tok_s"], reference("prefill_tok_s", roof))
        itl: Band | None = None
        if decode is not None:
            itl = physical_band(
                1000.0 / decode.expected, 1000.0 / decode.high, 1000.0 / decode.low, roof.itl_floor_ms, rate=False
            )
        ttft: Band | None = None
        derived: list[str] = []
        if "ttft_p50_ms" in values:
            ttft = _band(values["ttft_p50_ms"], reference("ttft_p50_ms", roof), rate=False)
        elif prefill is not None and roof.prompt_tokens:
            # No TTFT head (no fleet runs report TTFT yet): the prior's construction on the
            # fitted prefill band.
            prompt = roof.prompt_tokens
            overhead, overhead_low, overhead_high = ttft_overhead(runtime)
            ttft = physical_band(
                prompt / prefill.expected * 1000.0 + overhead,
                prompt / prefill.high * 1000.0 + overhead_low,
                prompt / prefill.low * 1000.0 + overhead_high,
                roof.ttft_floor_ms,
                rate=False,
            )
            derived.append("ttft from prefill")
        tails = {
            name: _band(values[name], reference(name, roof), rate=False) if name in values else None
            for name in ("ttft_p99_ms", "itl_p99_ms")
        }
        heads = ", ".join(sorted(self.heads))
        if carrier == "baseline":
            derived.append("kind or vendor of device unseen in training: answered by a baseline, wider band")
        elif thin is not None:
            derived.append(
                f"this runtime family was measured on this kind of device in {thin} source(s) of the training "
                "data: band widened to the unseen-kind band"
            )
        note = f"; {', '.join(derived)}" if derived else ""
        return Expectations(
            decode_tok_s=decode,
            prefill_tok_s=prefill,
            ttft_ms=ttft,
            itl_ms=itl,
            model_version=self.version,
            source=f"fitted model {self.version} ({heads}{note})",
            ttft_p99_ms=tails["ttft_p99_ms"],
            itl_p99_ms=tails["itl_p99_ms"],
            carried_by=carrier,
        )


def _family_of(item: FeatureInput) -> str:
    """The item's hardware family as :func:`advisor.ml.features.feature_row` spells its parts."""
    hw = item.hardware
    kind = item.hardware_kind or (hw.kind if hw is not None else None)
    vendor = hw.vendor.strip().lower() if hw is not None and hw.vendor else None
    return hardware_family(kind, vendor)


def _band(values: Sequence[float], ref: float | None, *, rate: bool = True) -> Band | None:
    """``[low, expected, high]`` in the target's units → a physical Band (never past the
    reference, :func:`physical_band`; None without a finite reference or for values that
    overflowed)."""
    low, expected, high = values
    # NaN and inf fail both comparisons (the positive check also rules out an underflow to 0).
    if ref is None or not (0 < low < math.inf and 0 < expected < math.inf and 0 < high < math.inf):
        return None
    return physical_band(expected, low, high, ref, rate=rate)
