from __future__ import annotations

from typing import ClassVar

from advisor.rules.base import Evidence, Finding, Rule
from advisor.rules.config import Spec, ThresholdSpec
from advisor.rules.context import RunContext
from advisor.rules.helpers import dropped, fmt
from advisor.rules.severity import Severity, damp

_TAILS = ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")
_P99_OBJECTIVES = ("ttft_p99_ms", "itl_p99_ms", "tpot_p99_ms", "e2e_p99_ms")


class TooFewRequestsForP99(Rule):
    """The run reports a p99 from too few requests for it to mean anything.

    ## Why is this bad?
    A p99 is the value only 1 % of requests exceed. From 100 requests it is the single slowest one;
    from 20 it is an extrapolation. Such a tail moves by a large factor between identical runs, so
    decisions, SLO verdicts and regressions based on it are noise. Tail-based findings from such a
    run are capped at low.

    ## Fix
    Measure at least 200 requests, 1,000 for a stable p99: ``vllm bench serve --num-prompts 1000``,
    ``guidellm --max-requests 1000``, ``genai-perf --request-count 1000``,
    ``python -m sglang.bench_serving --num-prompts 1000``.

    ## Example
    A CI smoke benchmark of 20 requests reports ITL p99 310 ms; the next identical run says 140 ms.
    """

    id = "MEAS001"
    name = "measurement.too_few_requests_for_p99"
    action = "improve-measurement"
    thresholds: ClassVar[tuple[Spec, ...]] = (
        ThresholdSpec("requests", ascending=False, unit="requests", doc="completed requests behind the reported p99"),
    )

    def evaluate(self, ctx: RunContext) -> Finding | None:
        n = ctx.measured.n_requests
        m = ctx.run.metrics
        tails = [name for name in _TAILS if getattr(m, name).p99 is not None]
        if n is None or not tails:
            return None
        judged = ctx.slo is not None and any(getattr(ctx.slo, o) is not None for o in _P99_OBJECTIVES)
        # A measurement problem is never critical by itself; it matters more when a p99 SLO
        # (and so the verdict) rests on it.
        severity = damp(self.t("requests").severity_of(float(n)), Severity.SEVERE if judged else Severity.MODERATE)
        if (bare := dropped(self, severity, None)) is not None:
            return bare
        return Finding(
            severity=severity,
            title=(
                f"p99 latencies ({', '.join(t.removesuffix('_ms').upper() for t in tails)}) come from only "
                f"{fmt(float(n))} requests"
            ),
            evidence=(Evidence("requests_completed", float(n), f"> {fmt(self.t('requests').low)}", "run"),),
            fix={
                "other": (
                    "Measure at least 200 requests (1,000 for a stable p99): vllm bench serve "
                    "--num-prompts 1000, guidellm "
                    "--max-requests 1000, genai-perf --request-count 1000, python -m "
                    "sglang.bench_serving --num-prompts 1000."
                )
            },
            expected_gain=None,
            confidence=0.9,
        )
