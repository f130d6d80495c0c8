from __future__ import annotations

from typing import ClassVar

from advisor.rules.base import Evidence, Finding, Rule
from advisor.rules.config import Spec, ThresholdSpec
from advisor.rules.context import RunContext
from advisor.rules.helpers import fmt
from advisor.rules.severity import Severity


class RequestsFailed(Rule):
    """Requests failed during the benchmark; when most or all did, it measured nothing.

    ## Why is this bad?
    Latency and throughput are computed over the requests that succeeded. When some fail, the
    survivors are a biased sample (often the short ones, or the ones before the server fell over);
    when all fail, every other number is empty or meaningless. Under heavy load, failures are
    usually timeouts or rejections: the server is overloaded, which is itself the finding.

    ## Fix
    Read the benchmark's error list and the server log. Timeouts or HTTP 503 under load mean
    overload: lower the request rate, raise the queue limit or add capacity. HTTP 4xx means a wrong
    model name, a prompt over the context limit or a wrong endpoint. A run with every request
    failed fails the verdict.

    ## Example
    ``vllm bench serve`` at 1,000 req/s against a single MI300X serving a 405B model: 97 of 1,000
    requests completed.
    """

    id = "MEAS005"
    name = "measurement.requests_failed"
    action = "improve-measurement"
    actions: ClassVar[tuple[str, ...]] = ("add-capacity",)
    fails_verdict_at = Severity.CRITICAL
    thresholds: ClassVar[tuple[Spec, ...]] = (
        ThresholdSpec("failed_share", ascending=True, unit="ratio", doc="failed ÷ (failed + completed) requests"),
    )

    def evaluate(self, ctx: RunContext) -> Finding | None:
        m, w = ctx.run.metrics, ctx.run.workload
        failed = m.requests_failed
        completed = m.requests_completed
        if failed is None and completed == 0 and w.num_requests:
            failed = w.num_requests
        if not failed:
            return None
        total = failed + (completed or 0)
        share = failed / total if total else 1.0
        all_failed = not completed
        loaded = (w.request_rate or 0) > 0 or (w.concurrency or 0) > 1
        title = (
            f"All {fmt(float(failed))} requests failed: the benchmark measured nothing"
            if all_failed
            else (
                f"{fmt(float(failed))} of {fmt(float(total))} requests failed ({share:.0%}): the other "
                "numbers describe a biased sample"
            )
        )
        return Finding(
            severity=Severity.CRITICAL if all_failed else self.t("failed_share").severity_of(share),
            title=title,
            evidence=(
                Evidence("requests_failed", float(failed), "0", "run"),
                Evidence("requests_completed", float(completed or 0), f"{fmt(float(total))}", "run"),
            ),
            fix={
                "other": (
                    "Read the benchmark's error list and the server log: timeouts or HTTP 503 under "
                    "load mean overload (lower the "
                    "request rate, raise the queue limit or add capacity); HTTP 4xx means a wrong "
                    "model name, a prompt over the "
                    "context limit or a wrong endpoint."
                )
            },
            expected_gain=None,
            confidence=0.9,
            action="add-capacity" if loaded and not all_failed and share >= 0.2 else "improve-measurement",
        )
