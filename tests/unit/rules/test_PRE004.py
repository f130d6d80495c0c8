"""PRE004 beyond its cases: what the "cannot meet both" answer names."""

from __future__ import annotations

from tests.unit.rules.harness import RuleCase, cases_dir, load_cases, run_case


def _case(name: str) -> RuleCase:
    return next(c for c in load_cases(cases_dir() / "PRE004.yaml") if c.name == name)


def test_the_conflict_does_not_ask_to_enable_prefix_caching_that_is_on() -> None:
    # vLLM 0.11 caches prefixes by default: the alternatives name caching the prefix, not the switch.
    _ctx, rec = run_case(_case("says_the_dial_cannot_meet_both_objectives"))
    assert rec is not None and rec.fix_for_runtime is not None
    assert "--enable-prefix-caching" not in rec.fix_for_runtime, rec.fix_for_runtime
    assert "prefix caching is off" not in rec.fix_for_runtime


def test_the_conflict_names_the_switch_where_caching_is_off() -> None:
    _ctx, rec = run_case(_case("the_conflict_names_the_prefix_switch_where_it_is_off"))
    assert rec is not None and rec.fix_for_runtime is not None
    assert "(prefix caching is off)" in rec.fix_for_runtime
    assert "--enable-prefix-caching" in rec.fix_for_runtime
