"""Analysis: a resolved run → physics, expectations and the ranked findings of the rules engine.

Pure given its inputs: the SLO and the baseline are read by the caller, and the run's names arrive
already resolved to catalog specs (:mod:`advisor.domain.runs.resolution`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from advisor.canonical import SLO, CanonicalRun
from advisor.catalog import Catalog
from advisor.domain.runs.resolution import ResolvedRun
from advisor.rules.base import fast_frozen_init
from advisor.rules.context import BaselinePoint, ExpectationsFn, build_context
from advisor.rules.engine import Recommendation as RankedFinding
from advisor.rules.engine import advise

__all__ = ["RunAnalysis", "analyse_run", "answer_fields"]

#: Keys of the stored analysis the answer carries at its top level rather than under ``analysis``.
_TOP_LEVEL = ("verdict", "expectations", "verdict_reasons")


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class RunAnalysis:
    verdict: str
    recommendations: tuple[RankedFinding, ...]
    expectations: dict[str, Any]
    efficiency: dict[str, float | None]
    details: dict[str, Any] = field(default_factory=dict)

    def stored(self) -> dict[str, Any]:
        """What the run row keeps in its ``analysis`` column (recommendations have their own table)."""
        return {
            "verdict": self.verdict,
            "expectations": self.expectations,
            "efficiency": self.efficiency,
            **self.details,
        }


def analyse_run(
    resolved: ResolvedRun,
    *,
    slo: SLO | None,
    baseline: Sequence[CanonicalRun | BaselinePoint],
    catalog: Catalog,
    expectations_fn: ExpectationsFn | None = None,
) -> RunAnalysis:
    ctx = build_context(
        resolved.run,
        catalog=catalog,
        slo=slo,
        baseline_runs=baseline,
        expectations_fn=expectations_fn,
        resolved=resolved.specs,
        sweep=resolved.sweep,
    )
    advice = advise(ctx)
    roofline = ctx.roofline
    measured = ctx.measured
    efficiency: dict[str, float | None] = {"decode": None, "prefill": None}
    expectations = advice.expectations.to_dict() if advice.expectations is not None else {}
    if roofline is not None:
        decode = measured.decode_tok_s
        prefill = measured.prefill_tok_s
        ceiling = roofline.decode_ceiling_batch_tok_s or roofline.decode_ceiling_tok_s
        if decode and ceiling:
            efficiency["decode"] = round(decode / ceiling, 4)
        if prefill and roofline.prefill_ceiling_tok_s:
            efficiency["prefill"] = round(prefill / roofline.prefill_ceiling_tok_s, 4)
        expectations.setdefault(
            "physics",
            {
                "decode_ceiling_tok_s": roofline.decode_ceiling_tok_s,
                "decode_ceiling_batch_tok_s": roofline.decode_ceiling_batch_tok_s,
                "prefill_ceiling_tok_s": roofline.prefill_ceiling_tok_s,
                "ttft_floor_ms": roofline.ttft_floor_ms,
                "decode_bound": roofline.decode_bound,
                "kv_pool_tokens": roofline.kv_pool_tokens,
                "max_concurrent_sequences": roofline.max_concurrent_sequences,
                "weight_bytes": roofline.weight_bytes,
                "kv_bytes_per_token": roofline.kv_bytes_per_token,
            },
        )
    return RunAnalysis(
        verdict=advice.verdict,
        recommendations=advice.recommendations,
        expectations=expectations,
        efficiency=efficiency,
        details={
            "verdict_reasons": [r.to_dict() for r in advice.verdict_reasons],
            "slo": [s.to_dict() for s in advice.slo],
            "missing": [m.to_dict() for m in advice.missing],
            "ttft_breakdown": ctx.ttft.to_dict() if ctx.ttft is not None else None,
            "notes": list(ctx.notes),
            **({"sweep": ctx.sweep.to_dict()} if ctx.sweep is not None else {}),
        },
    )


def _reason(item: Any) -> dict[str, Any]:
    """A stored verdict reason; runs analysed before reasons were structured kept a sentence."""
    if isinstance(item, dict):
        return item
    text = str(item)
    words = text.partition(":")[0].split()
    if text.startswith("SLO ") and len(words) > 1:
        return {"kind": "slo", "name": words[1], "limit": None, "found": None, "text": text}
    return {"kind": "finding", "name": words[0] if words else "", "limit": None, "found": None, "text": text}


def answer_fields(stored: dict[str, Any]) -> dict[str, Any]:
    """``verdict_reasons`` and ``analysis`` of a run's answer (:class:`RunResult`), from what the
    run row keeps (:meth:`RunAnalysis.stored`)."""
    return {
        "verdict_reasons": [_reason(r) for r in stored.get("verdict_reasons") or []],
        "analysis": {k: v for k, v in stored.items() if k not in _TOP_LEVEL},
    }
