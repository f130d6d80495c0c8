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

from advisor.ml.dataset import reference
from advisor.ml.expectations import Band, Expectations
from advisor.ml.features import FeatureInput, feature_frame, feature_row
from advisor.ml.forest import CompiledPipeline
from advisor.ml.prior import TTFT_OVERHEAD_MS
from advisor.physics import HardwareSpec, ModelSpec, QuantSpec, Roofline

__all__ = ["BATCH_THRESHOLD", "Head", "PerformanceModel", "Prediction"]

#: From this many rows on, scikit-learn's own predict is faster than the per-row evaluator.
BATCH_THRESHOLD = 64


@dataclass
class Head:
    """One target's Pipeline and its interval offsets (log space, ``(low, high)`` per hardware
    kind; ``"*"`` pools every kind)."""

    target: str
    pipeline: Pipeline
    interval: Mapping[str, tuple[float, float]]
    n_train: int
    compiled: CompiledPipeline | None = field(default=None, repr=False, compare=False)

    def offsets(self, kind: str | None) -> tuple[float, float]:
        """Interval offsets for a hardware kind, never excluding the point prediction."""
        low, high = self.interval.get(kind or "*") or self.interval["*"]
        return min(low, 0.0), max(high, 0.0)

    def predict(self, rows: Sequence[tuple[object, ...]]) -> npt.NDArray[np.float64]:
        """``log(measured / reference)`` for feature rows."""
        if self.compiled is not None and len(rows) < BATCH_THRESHOLD:
            return self.compiled.predict(rows)
        return np.asarray(self.pipeline.predict(feature_frame(rows)), dtype=np.float64)


@dataclass(frozen=True, slots=True)
class Prediction:
    """A head's answer for one row: the log ratio and its band (log space)."""

    log_ratio: float
    low: float
    high: float

    def band(self, ref: float | None) -> Band | None:
        """The band in the target's units: ``reference × exp(…)``; None without a reference."""
        if ref is None or not (ref > 0 and math.isfinite(ref)):
            return None
        values = [ref * math.exp(v) for v in (self.low, self.log_ratio, self.high)]
        if not all(math.isfinite(v) for v in values):
            return None
        return Band(expected=values[1], low=values[0], high=values[2], ceiling=ref)


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

    def predict(self, items: Sequence[FeatureInput]) -> dict[str, list[Prediction]]:
        """Every head's prediction for each input (log space)."""
        rows = [feature_row(item) for item in items]
        kinds = [row[2] if isinstance(row[2], str) else None for row in rows]
        out: dict[str, list[Prediction]] = {}
        for target, head in self.heads.items():
            values = head.predict(rows)
            preds = []
            for value, kind in zip(values.tolist(), kinds, strict=True):
                low, high = head.offsets(kind)
                preds.append(Prediction(value, value + low, value + high))
            out[target] = preds
        return out

    # ------------------------------------------------------------------ expectations

    def expectations_many(self, items: Sequence[FeatureInput]) -> list[Expectations]:
        """:class:`Expectations` for many setups at once (one batched predict per head)."""
        predictions = self.predict(items)
        return [
            self._expectations(item.roofline, {t: p[i] for t, p in predictions.items()}) for i, item in enumerate(items)
        ]

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

    def _expectations(self, roof: Roofline, preds: Mapping[str, Prediction]) -> Expectations:
        decode = preds["decode_tok_s"].band(reference("decode_tok_s", roof))
        prefill = preds["prefill_tok_s"].band(reference("prefill_tok_s", roof))
        itl: Band | None = None
        if decode is not None:
            itl = Band(
                expected=1000.0 / decode.expected,
                low=1000.0 / decode.high,
                high=1000.0 / decode.low,
                ceiling=roof.itl_floor_ms,
            )
        ttft: Band | None = None
        derived: list[str] = []
        if "ttft_p50_ms" in preds:
            ttft = preds["ttft_p50_ms"].band(reference("ttft_p50_ms", roof))
        elif prefill is not None and roof.prompt_tokens:
            # No TTFT head (no fleet runs report TTFT yet): the prior's construction on the
            # fitted prefill band.
            prompt = roof.prompt_tokens
            overhead, overhead_low, overhead_high = TTFT_OVERHEAD_MS
            ttft = Band(
                expected=prompt / prefill.expected * 1000.0 + overhead,
                low=prompt / prefill.high * 1000.0 + overhead_low,
                high=prompt / prefill.low * 1000.0 + overhead_high,
                ceiling=roof.ttft_floor_ms,
            )
            derived.append("ttft from prefill")
        tails = {
            name: preds[name].band(reference(name, roof)) if name in preds else None
            for name in ("ttft_p99_ms", "itl_p99_ms")
        }
        heads = ", ".join(sorted(self.heads))
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
        )
