"""The requested output length in MEAS007 and DEC002 (issue 12 item 6): supporting evidence only,
named where it is a real shortfall and absent where it is not."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.rules.harness import RuleCase, cases_dir, load_cases, run_case


def _case(rule: str, name: str) -> RuleCase:
    cases = {c.name: c for c in load_cases(Path(cases_dir()) / f"{rule}.yaml")}
    return cases[name]


def test_a_near_complete_count_names_no_shortfall() -> None:
    """243 of 250 counted: MEAS007 still fires on the reasoning model, with nothing about the request."""
    _ctx, rec = run_case(_case("MEAS007", "boundary_counted_near_the_request_adds_nothing"))
    assert rec is not None
    assert "requested" not in rec.title
    assert "output_tokens_mean" not in {e.metric for e in rec.evidence}


def test_the_shortfall_is_named_with_both_numbers() -> None:
    _ctx, rec = run_case(_case("MEAS007", "names_the_requested_and_counted_output"))
    assert rec is not None
    row = next(e for e in rec.evidence if e.metric == "output_tokens_mean")
    assert (row.found, row.expected) == (124.0, "400 requested")


@pytest.mark.parametrize(
    ("name", "hedged"),
    [
        ("far_fewer_counted_than_requested_lowers_the_confidence", True),
        ("a_reasoning_model_lowers_the_confidence", True),
        ("boundary_a_small_shortfall_keeps_the_confidence", False),
        ("no_visible_cause_lowers_confidence", False),
    ],
)
def test_dec002_hedges_only_on_hidden_token_signs(name: str, hedged: bool) -> None:
    _ctx, rec = run_case(_case("DEC002", name))
    assert rec is not None
    assert ("may also miss hidden reasoning tokens" in rec.title) is hedged
    assert (rec.confidence < 0.3) is hedged
