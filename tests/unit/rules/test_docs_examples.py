"""Every rule's docs ``## Example`` is an executable case that fires (issue 13, item 8).

A case whose description starts with "the docs example" is that example; it must expect a finding
and get one. Rules listed in ``NOT_YET`` have not had their example reconciled with a case yet.
"""

from __future__ import annotations

import yaml

from advisor.rules.registry import get_rules
from tests.unit.rules.harness import all_cases, cases_dir, run_case

GROUPS = ("dec", "cap", "cfg", "sch")
EXTRA = ("PRE004",)
NOT_YET = ("DEC003", "CAP002", "CFG002", "CFG003", "CFG004", "SCH002", "SCH003", "SCH004")


def _docs_example_names(rule_id: str) -> set[str]:
    data = yaml.safe_load((cases_dir() / f"{rule_id}.yaml").read_text(encoding="utf-8"))
    return {
        name for name, body in data["cases"].items() if str(body.get("description", "")).startswith("the docs example")
    }


def test_each_rule_has_a_docs_example_case_that_fires() -> None:
    ids = sorted(r.id for r in get_rules() if r.group() in GROUPS or r.id in EXTRA)
    examples = {rid: _docs_example_names(rid) for rid in ids}
    assert [rid for rid in ids if not examples[rid] and rid not in NOT_YET] == []
    for case in all_cases():
        if case.name in examples.get(case.rule_id, set()):
            assert case.expect["severity"] != "none", case.test_id
            _ctx, rec = run_case(case)
            assert rec is not None, case.test_id
