"""Every rule's executable examples (rules/cases/<ID>.yaml). Run one rule with ``-k PRE002``."""

from __future__ import annotations

from tests.unit.rules.harness import RuleCase, check


def test_rule_case(rule_case: RuleCase) -> None:
    check(rule_case)
