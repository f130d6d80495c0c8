"""What a setup is expected to do: a central value with an uncertainty band per metric.

The physics-only prior (:mod:`advisor.ml.prior`) and, later, the fitted model both return
:class:`Expectations`, so rules and the API do not care which produced them (``model_version`` and
``source`` say which).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = ["CARRIERS", "Band", "Expectations", "physical_band"]

#: What carried a prediction: the fitted model, a baseline (roofline × constant, where the model
#: has not seen the kind of device) or the physics prior.
CARRIERS: tuple[str, ...] = ("model", "baseline", "prior")


@dataclass(frozen=True, slots=True)
class Band:
    """An expected value with a plausible range (``low ≤ expected ≤ high``).

    For rates (tok/s) ``ceiling`` is the physics upper bound; for latencies (ms) it is the physics
    floor. None when the physics cannot give one.
    """

    expected: float
    low: float
    high: float
    ceiling: float | None = None

    def __post_init__(self) -> None:
        if not self.low <= self.expected <= self.high:
            raise ValueError(f"band must satisfy low <= expected <= high, got {self.low}, {self.expected}, {self.high}")

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high

    def to_dict(self) -> dict[str, float | None]:
        return {"ceiling": self.ceiling, "expected": self.expected, "low": self.low, "high": self.high}


def physical_band(expected: float, low: float, high: float, bound: float | None, *, rate: bool) -> Band:
    """A Band made physical: for a rate ``low ≤ expected ≤ high ≤ ceiling``, for a latency
    ``floor ≤ low ≤ expected ≤ high``. A value past the bound is moved onto it (a fitted model or
    a calibrated efficiency above 1 can claim more than the physics allows); the order is then
    restored without widening the band."""
    if bound is not None and math.isfinite(bound) and bound > 0:
        if rate:
            high = min(high, bound)
            expected = min(expected, high)
            low = min(low, expected)
        else:
            low = max(low, bound)
            expected = max(expected, low)
            high = max(high, expected)
    low, high = min(low, expected), max(high, expected)
    return Band(expected=expected, low=low, high=high, ceiling=bound)


@dataclass(frozen=True, slots=True)
class Expectations:
    """Expected per-sequence decode and prefill rates, TTFT and ITL for one setup and workload.

    ``ttft_ms`` is the typical (p50) TTFT and ``itl_ms`` the typical ITL (1000 / decode). A fitted
    model trained on runs that report tails adds ``ttft_p99_ms`` and ``itl_p99_ms``; they are None
    otherwise and :meth:`to_dict` leaves them out then.
    """

    decode_tok_s: Band | None
    prefill_tok_s: Band | None
    ttft_ms: Band | None
    itl_ms: Band | None
    model_version: str
    source: str
    ttft_p99_ms: Band | None = None
    itl_p99_ms: Band | None = None
    #: One of :data:`CARRIERS` (None: not stated, as before this field existed).
    carried_by: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "decode_tok_s": self.decode_tok_s.to_dict() if self.decode_tok_s else None,
            "prefill_tok_s": self.prefill_tok_s.to_dict() if self.prefill_tok_s else None,
            "ttft_ms": self.ttft_ms.to_dict() if self.ttft_ms else None,
            "itl_ms": self.itl_ms.to_dict() if self.itl_ms else None,
            "model_version": self.model_version,
            "source": self.source,
        }
        if self.carried_by is not None:
            out["carried_by"] = self.carried_by
        for name in ("ttft_p99_ms", "itl_p99_ms"):
            band: Band | None = getattr(self, name)
            if band is not None:
                out[name] = band.to_dict()
        return out
