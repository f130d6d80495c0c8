"""Ranking at equal severity: an actionable fix before a "cannot judge, add X" finding (issue 12).

A rule that asks for missing context (``asks_for_context``, MEAS004) tells the user what to add;
a finding that changes the setup tells them what to do. At the same severity the second comes
first, even when the request for context scores higher (it has confidence 1 and no gain).
"""

from __future__ import annotations

from typing import Any

import pytest

from advisor.canonical import decode_run
from advisor.rules import Evidence, Finding, Gain, Phase, Rule, RunContext, Severity, advise, build_context
from advisor.rules.config import RuleConfig
from advisor.rules.engine import score
from advisor.rules.registry import thresholds_table

RUN: dict[str, Any] = {
    "setup": {"runtime": "vllm", "hardware": "nvidia-a10g", "model": "meta-llama/Llama-3.1-8B-Instruct"},
    "workload": {"num_requests": 500, "concurrency": 1, "prompt_tokens_mean": 500, "output_tokens_mean": 200},
    "metrics": {"decode_tok_s": 33.0, "ttft_ms": {"p50": 250, "p99": 300}},
}


def _rule(rule_id: str, severity: Severity, *, asks: bool, confidence: float, gain: Gain | None) -> Rule:
    class Fixed(Rule):
        """Fixed."""

        id = rule_id
        name = f"test.{rule_id.lower()}"
        phase = Phase.MEASUREMENT if asks else Phase.PREFILL
        action = "improve-measurement" if asks else "shorten-prompt"
        asks_for_context = asks
        damp_by_gain = False

        def evaluate(self, ctx: RunContext) -> Finding | None:
            return Finding(
                severity=severity,
                title=f"{rule_id} finding",
                evidence=(Evidence("x", 1.0, "< 1", "run"),),
                fix={"other": "do it"},
                expected_gain=gain,
                confidence=confidence,
            )

    return Fixed(RuleConfig(rule_id), thresholds_table().common)


@pytest.fixture(scope="module")
def ctx() -> RunContext:
    return build_context(decode_run(RUN))


SMALL = Gain("ttft_ms.p50", 250.0, 230.0)  # a small gain: the actionable finding scores low


def test_an_actionable_fix_ranks_above_a_request_for_context_at_equal_severity(ctx: RunContext) -> None:
    ask = _rule("MEAS904", Severity.MODERATE, asks=True, confidence=1.0, gain=None)
    act = _rule("PRE904", Severity.MODERATE, asks=False, confidence=0.5, gain=SMALL)
    # The premise: by score alone the request for context would come first.
    assert score(Severity.MODERATE, None, 1.0) > score(Severity.MODERATE, SMALL, 0.5)
    for order in ([ask, act], [act, ask]):
        recs = advise(ctx, rules=order).recommendations
        assert [(r.rule_id, r.severity) for r in recs] == [
            ("PRE904", Severity.MODERATE),
            ("MEAS904", Severity.MODERATE),
        ]
        assert [r.asks_for_context for r in recs] == [False, True]


def test_severity_still_ranks_first(ctx: RunContext) -> None:
    """A low actionable finding stays below a moderate request for context."""
    ask = _rule("MEAS904", Severity.MODERATE, asks=True, confidence=1.0, gain=None)
    act = _rule("PRE904", Severity.LOW, asks=False, confidence=0.9, gain=SMALL)
    assert [r.rule_id for r in advise(ctx, rules=[act, ask]).recommendations] == ["MEAS904", "PRE904"]


def test_a_capped_request_for_context_yields_to_an_actionable_moderate(ctx: RunContext) -> None:
    """A critical request for context is capped at moderate, then ranks behind a moderate fix."""
    ask = _rule("MEAS904", Severity.CRITICAL, asks=True, confidence=1.0, gain=None)
    act = _rule("PRE904", Severity.MODERATE, asks=False, confidence=0.3, gain=SMALL)
    recs = advise(ctx, rules=[ask, act]).recommendations
    assert [(r.rule_id, r.severity) for r in recs] == [("PRE904", Severity.MODERATE), ("MEAS904", Severity.MODERATE)]


def test_the_public_shape_does_not_carry_the_flag(ctx: RunContext) -> None:
    ask = _rule("MEAS904", Severity.MODERATE, asks=True, confidence=1.0, gain=None)
    out = advise(ctx, rules=[ask]).recommendations[0].to_dict()
    assert "asks_for_context" not in out
