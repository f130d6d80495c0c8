from __future__ import annotations

from typing import ClassVar

from advisor.rules.base import Evidence, Finding, Gain, Rule
from advisor.rules.config import ParamSpec, Spec, ThresholdSpec
from advisor.rules.context import RunContext
from advisor.rules.helpers import fmt
from advisor.rules.severity import Severity, damp


class ColdStartInSample(Rule):
    """One request far slower than all others: a cold start was measured with the rest.

    ## Why is this bad?
    The first request after a start pays for lazy initialisation: loading the model (Ollama),
    compiling kernels, allocating caches, warming the tokenizer and the HTTP connection. Counted
    with the rest, it inflates the mean and, in small samples, the p99, so the run describes the
    warm-up rather than the server.

    ## Fix
    Send a few warm-up requests before measuring and leave them out: ``genai-perf
    --warmup-request-count 5``, guidellm's warm-up option, or a throw-away call before ``vllm
    bench serve``; the seed's method discards the cold first call.

    ## Example
    20 requests with TTFT p50 180 ms, p99 240 ms and max 4,900 ms: the first call loaded the
    model. Without it the mean falls from 416 ms to about 180.
    """

    id = "MEAS002"
    name = "measurement.cold_start_in_sample"
    action = "improve-measurement"
    thresholds: ClassVar[tuple[Spec, ...]] = (
        ThresholdSpec("max_over_p50", ascending=True, unit="ratio", doc="TTFT max ÷ p50"),
        ThresholdSpec(
            "requests",
            ascending=True,
            unit="requests",
            doc="sample size; the larger, the less one outlier matters (caps the severity)",
        ),
        ParamSpec(
            "isolation",
            unit="ratio",
            doc="max ÷ p99 (or p90) above which the outlier stands alone",
            minimum=1,
        ),
        ParamSpec("min_requests", unit="requests", doc="smaller samples cannot show an outlier", minimum=2),
    )

    def evaluate(self, ctx: RunContext) -> Finding | None:
        m = ctx.run.metrics
        t = m.ttft_ms
        n = ctx.measured.n_requests
        if not t.max or not t.p50 or n is None or n < self.p("min_requests"):
            return None
        if m.queue_waiting_max or m.queue_waiting_mean:
            return None  # a burst that queued explains a slow request without any cold start
        next_highest = t.p99 or t.p95 or t.p90
        if next_highest is None or t.max / next_highest < self.p("isolation"):
            return None
        ratio = t.max / t.p50
        # Larger samples dilute one outlier: 1,000 requests → at most low.
        dilution = max(Severity.LOW, Severity(Severity.CRITICAL - self.t("requests").severity_of(float(n))))
        severity = damp(self.t("max_over_p50").severity_of(ratio), dilution, Severity.MODERATE)
        gain: Gain | None = None
        if t.mean:
            cleaned = (t.mean * n - t.max + t.p50) / n
            gain = Gain("ttft_ms.mean", t.mean, max(cleaned, t.p50 * 0.5))
        return Finding(
            severity=severity,
            title=(
                f"One request took {fmt(t.max, 'ms')} to first token, {ratio:.0f}× the p50 of "
                f"{fmt(t.p50, 'ms')}: a cold start is in the sample"
            ),
            evidence=(
                Evidence("ttft_ms.max", t.max, f"<= {fmt(next_highest * self.p('isolation'))}", "run"),
                Evidence("ttft_ms.p50", t.p50, "", "run"),
                Evidence("requests_completed", float(n), "warm-up excluded", "run"),
            ),
            fix={
                "other": (
                    "Send a few warm-up requests first and leave them out of the measurement (genai-perf "
                    "--warmup-request-count 5, guidellm's warm-up option, or a throw-away call before "
                    "vllm bench serve)."
                ),
                "ollama": (
                    "Warm the model first (one request, then keep_alive) and discard the cold call; "
                    "load_duration shows it."
                ),
            },
            expected_gain=gain,
            confidence=0.7,
        )
