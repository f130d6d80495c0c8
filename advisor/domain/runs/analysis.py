"""The analysis of one run: physics, expectations and the rules engine, around a frozen RunContext.

Pure given its inputs (the database work — SLOs and the baseline — happens in the caller).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from advisor.canonical import SLO, CanonicalRun
from advisor.rules.context import BaselinePoint, ExpectationsFn, build_context
from advisor.rules.engine import advise

__all__ = ["Analysis", "analyse"]


@dataclass(frozen=True)
class Analysis:
    verdict: str
    recommendations: list[dict[str, Any]]
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


def analyse(
    run: CanonicalRun,
    *,
    slo: SLO | None,
    baseline: Sequence[CanonicalRun | BaselinePoint],
    catalog: Any,
    expectations_fn: ExpectationsFn | None = None,
) -> Analysis:
    ctx = build_context(run, catalog=catalog, slo=slo, baseline_runs=baseline, expectations_fn=expectations_fn)
    advice = advise(ctx).to_dict()
    roofline = ctx.roofline
    measured = ctx.measured
    efficiency: dict[str, float | None] = {"decode": None, "prefill": None}
    physics: dict[str, Any] = {}
    if roofline is not None:
        decode = getattr(measured, "decode_tok_s", None)
        prefill = getattr(measured, "prefill_tok_s", None)
        ceiling = roofline.decode_ceiling_batch_tok_s or roofline.decode_ceiling_tok_s
        if decode and ceiling:
            efficiency["decode"] = round(decode / ceiling, 4)
        if prefill and roofline.prefill_ceiling_tok_s:
            efficiency["prefill"] = round(prefill / roofline.prefill_ceiling_tok_s, 4)
        physics = {
            "decode_ceiling_tok_s": roofline.decode_ceiling_tok_s,
            "decode_ceiling_batch_tok_s": roofline.decode_ceiling_batch_tok_s,
            "prefill_ceiling_tok_s": roofline.prefill_ceiling_tok_s,
            "ttft_floor_ms": roofline.ttft_floor_ms,
            "decode_bound": roofline.decode_bound,
            "kv_pool_tokens": roofline.kv_pool_tokens,
            "max_concurrent_sequences": roofline.max_concurrent_sequences,
            "weight_bytes": roofline.weight_bytes,
            "kv_bytes_per_token": roofline.kv_bytes_per_token,
        }
    expectations = dict(advice.get("expectations") or {})
    if physics:
        expectations.setdefault("physics", physics)
    return Analysis(
        verdict=str(advice["verdict"]),
        recommendations=list(advice["recommendations"]),
        expectations=expectations,
        efficiency=efficiency,
        details={
            "verdict_reasons": advice.get("verdict_reasons", []),
            "slo": advice.get("slo", []),
            "missing": advice.get("missing", []),
        },
    )
