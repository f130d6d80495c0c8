"""Every rule's docs ``## Example`` is an executable case that fires (issue 13, item 8).

A case whose description starts with "the docs example" is that example; it must expect a finding
and get one, at the severity the case states. Every registered rule has one; ``NOT_YET`` lists the
rules whose example has not been reconciled with a case yet (it only shrinks).
"""

from __future__ import annotations

import yaml

from advisor.rules.registry import get_rules
from tests.unit.rules.harness import all_cases, cases_dir, run_case

NOT_YET: tuple[str, ...] = ()


def _docs_example_names(rule_id: str) -> set[str]:
    data = yaml.safe_load((cases_dir() / f"{rule_id}.yaml").read_text(encoding="utf-8"))
    return {
        name for name, body in data["cases"].items() if str(body.get("description", "")).startswith("the docs example")
    }


def test_each_rule_has_a_docs_example_case_that_fires() -> None:
    ids = sorted(r.id for r in get_rules())
    examples = {rid: _docs_example_names(rid) for rid in ids}
    assert [rid for rid in ids if not examples[rid] and rid not in NOT_YET] == []
    assert [rid for rid in NOT_YET if examples.get(rid)] == [], "reconciled: drop them from NOT_YET"
    for case in all_cases():
        if case.name in examples.get(case.rule_id, set()):
            assert case.expect["severity"] != "none", case.test_id
            _ctx, rec = run_case(case)
            assert rec is not None, case.test_id
            assert rec.severity.label == case.expect["severity"], case.test_id


def test_every_rule_has_a_case_file() -> None:
    """A rule without cases cannot have its example executed."""
    assert [r.id for r in get_rules() if not (cases_dir() / f"{r.id}.yaml").is_file()] == []
