from __future__ import annotations

import pytest

from advisor.errors import NotFound
from advisor.rules import ACTIONS, catalogue, get_rule, get_rules


def test_lookup_by_id_and_dotted_name() -> None:
    assert get_rule("PRE002").name == "prefill.repeated_prefix_not_cached"
    assert get_rule("prefill.repeated_prefix_not_cached").id == "PRE002"


def test_unknown_rule_is_a_404() -> None:
    with pytest.raises(NotFound) as exc:
        get_rule("PRE999")
    assert exc.value.status == 404 and exc.value.field == "rule_id"


def test_select_by_group_id_or_name() -> None:
    assert {r.id for r in get_rules(select=["pre"])} == {r.id for r in get_rules() if r.id.startswith("PRE")}
    assert [r.id for r in get_rules(select=["DEC001", "capacity.preemptions"])] == ["CAP002", "DEC001"]


def test_instances_are_reused_for_the_same_table() -> None:
    assert get_rules()[0] is get_rules()[0]


def test_catalogue_entries() -> None:
    entries = {e["rule_id"]: e for e in catalogue()}
    assert len(entries) == len(get_rules(include_deprecated=True))
    pre2 = entries["PRE002"]
    assert pre2["action"] == "enable-prefix-caching" and pre2["phase"] == "prefill" and pre2["rule_status"] == "stable"
    assert pre2["why"] and pre2["fix"] and pre2["example"] and pre2["summary"]
    keys = {t["key"]: t for t in pre2["thresholds"]}
    assert keys["prefix_share"]["direction"] == "ascending" and len(keys["prefix_share"]["values"]) == 4
    assert entries["DEC003"]["actions"] == ["quantize-kv-cache", "reduce-context"]
    assert entries["DEC002"]["supersedes"] == ["REG001"]
    assert all(a in ACTIONS for e in entries.values() for a in e["actions"])
    assert entries["SCH003"]["rule_status"] == "preview"
