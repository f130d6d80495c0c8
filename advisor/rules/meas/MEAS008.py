from __future__ import annotations

from typing import ClassVar

from advisor.rules.base import Evidence, Finding, Rule
from advisor.rules.config import Spec, ThresholdSpec
from advisor.rules.context import IMPLAUSIBLE_ITL_MS, RunContext
from advisor.rules.helpers import dropped, fmt


class ImplausibleItl(Rule):
    """The inter-token latency is too short to be real: the client timed chunks, not tokens.

    ## Why is this bad?
    No engine emits a token in under 0.1 ms: that is over 10,000 tokens per second for one
    stream. An ITL p50 that small means the client timed the arrival of network chunks that
    carry several tokens each (or buffered the stream), so the gaps inside a chunk read as zero.
    Decode speed derived from it is wrong, and every decode finding built on it would be too;
    advisor leaves it out of them.

    ## Fix
    Measure with streaming on and one token per chunk (vLLM and SGLang stream token by token;
    check proxies that buffer), or report TPOT (decode time ÷ output tokens per request), which
    does not depend on chunking.

    ## Example
    A client behind a buffering proxy reports ITL p50 0.02 ms and p99 40 ms: tokens arrive in
    bursts of about 16; the TPOT of the same run is 25 ms.
    """

    id = "MEAS008"
    name = "measurement.implausible_itl"
    action = "improve-measurement"
    # The stall rule compares the ITL tail with its median; a median of chunk arrivals makes that
    # ratio meaningless, so its finding would rest on the implausible number.
    supersedes: ClassVar[tuple[str, ...]] = ("SCH001",)
    thresholds: ClassVar[tuple[Spec, ...]] = (
        ThresholdSpec(
            "itl_ms",
            ascending=False,
            unit="ms",
            doc="ITL p50 (smaller is less plausible); below 0.1 ms no engine produces tokens",
        ),
    )

    def evaluate(self, ctx: RunContext) -> Finding | None:
        itl = ctx.run.metrics.itl_ms
        found = next(((f"itl_ms.{k}", v) for k in ("p50", "mean") if (v := getattr(itl, k)) is not None), None)
        if found is None:
            return None
        path, value = found
        severity = self.t("itl_ms").severity_of(value)
        if (bare := dropped(self, severity, None)) is not None:
            return bare
        tpot = ctx.run.metrics.tpot_ms.p50 or ctx.run.metrics.tpot_ms.mean
        evidence = [Evidence(path, value, f">= {fmt(IMPLAUSIBLE_ITL_MS)} (10,000 tok/s per stream)", "physics")]
        if tpot:
            evidence.append(Evidence("tpot_ms", tpot, "≈ the ITL when each chunk is one token", "run"))
        return Finding(
            severity=severity,
            title=(
                f"ITL {path.split('.')[1]} of {fmt(value, 'ms')} is not a token gap: the client timed chunk "
                "arrival; decode findings use TPOT or leave it out"
            ),
            evidence=tuple(evidence),
            fix={
                "other": (
                    "Stream one token per chunk (no buffering proxy between client and server), or report "
                    "TPOT per request instead of ITL."
                )
            },
            expected_gain=None,
            confidence=0.9,
        )
