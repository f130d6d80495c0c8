"""What every rule must satisfy (sqlfluff's docstring_test, ruff's check_docs_formatted)."""

from __future__ import annotations

import inspect
import re
import tomllib
from pathlib import Path

import pytest

from advisor.rules import ACTIONS, GROUPS, Phase, Rule, Status, get_rules, limits, rule_classes, rules_data_dir
from advisor.rules.base import DOC_SECTIONS
from advisor.rules.config import COMMON_SECTION, LIMITS_SECTION, REFERENCE_PREFIX, ParamSpec, ThresholdSpec
from advisor.rules.damping import COMMON_SPECS
from advisor.rules.docs import DEFAULT_PATH, render
from tests.unit.rules.harness import load_cases

RULES = rule_classes()
IDS = [cls.id for cls in RULES]
DEFAULTS = tomllib.loads((rules_data_dir() / "thresholds.toml").read_text(encoding="utf-8"))


def test_there_is_a_rule_for_every_group() -> None:
    assert {cls.group() for cls in RULES} == set(GROUPS)


def test_ids_names_and_aliases_are_unique() -> None:
    keys = [k for cls in RULES for k in (cls.id, cls.name, *cls.aliases)]
    assert len(keys) == len(set(keys))


@pytest.mark.parametrize("cls", RULES, ids=IDS)
def test_identity_matches_file_and_group(cls: type[Rule]) -> None:
    module = cls.__module__.split(".")
    prefix, phase = GROUPS[module[-2]]
    assert module[-1] == cls.id
    assert re.fullmatch(rf"{prefix}\d{{3}}", cls.id)
    assert re.fullmatch(r"[a-z]+\.[a-z0-9_]+", cls.name), "dotted snake-case name of the problem"
    assert isinstance(cls.phase, Phase)
    assert isinstance(cls.rule_status, Status)
    # Rule.__init_subclass__ sets the group's phase; a class that sets its own must differ from it.
    if re.search(r"^    phase\b", inspect.getsource(cls), re.MULTILINE):
        assert cls.phase != phase, "the phase is the group's: drop the class attribute"
    else:
        assert cls.phase == phase


@pytest.mark.parametrize("cls", RULES, ids=IDS)
def test_docstring_has_summary_and_sections_in_order(cls: type[Rule]) -> None:
    docs = cls.docs()
    assert docs.summary and docs.summary.endswith("."), "a one-line summary ending with a full stop"
    assert list(docs.sections)[: len(DOC_SECTIONS)] == list(DOC_SECTIONS)
    for title in DOC_SECTIONS:
        assert len(docs.sections[title]) > 40, f"section {title!r} is too thin"


@pytest.mark.parametrize("cls", RULES, ids=IDS)
def test_actions_are_in_the_vocabulary(cls: type[Rule]) -> None:
    assert cls.action in ACTIONS
    assert all(a in ACTIONS for a in cls.actions)
    assert "investigate-regression" not in cls.actions or cls.action == "investigate-regression"


@pytest.mark.parametrize("cls", RULES, ids=IDS)
def test_supersedes_names_existing_rules(cls: type[Rule]) -> None:
    assert set(cls.supersedes) <= set(IDS) - {cls.id}


@pytest.mark.parametrize("cls", RULES, ids=IDS)
def test_thresholds_declared_in_toml_and_vice_versa(cls: type[Rule]) -> None:
    assert cls.id in DEFAULTS, f"rules/thresholds.toml has no [{cls.id}] section"
    declared = {s.key for s in cls.thresholds}
    assert set(DEFAULTS[cls.id]) == declared
    for spec in cls.thresholds:
        value = DEFAULTS[cls.id][spec.key]
        if isinstance(value, str):  # a shared limit
            assert value.startswith(REFERENCE_PREFIX)
            value = DEFAULTS[LIMITS_SECTION][value.removeprefix(REFERENCE_PREFIX)]
        if isinstance(spec, ThresholdSpec):
            assert isinstance(value, list) and len(value) == 4
        else:
            assert isinstance(spec, ParamSpec) and isinstance(value, int | float)
        assert spec.doc, f"{cls.id}.{spec.key} needs a doc line"


def test_toml_has_no_section_without_a_rule() -> None:
    assert set(DEFAULTS) == {COMMON_SECTION, LIMITS_SECTION, *IDS}
    assert set(DEFAULTS[COMMON_SECTION]) == {s.key for s in COMMON_SPECS}


def test_a_value_two_rules_share_is_written_once() -> None:
    """The same list (or number) under the same key in two rule sections is copy-paste: put it in
    ``[limits]`` and refer to it (or, when the two mean different things, name the keys apart)."""
    seen: dict[tuple[str, str], str] = {}
    for section, body in DEFAULTS.items():
        if section in (COMMON_SECTION, LIMITS_SECTION):
            continue
        for key, value in body.items():
            if isinstance(value, str):
                continue
            literal = (key, repr(value))
            assert literal not in seen, f"{section}.{key} repeats {seen[literal]}.{key}: share it in [limits]"
            seen[literal] = section


SHARED_SPECS = [
    getattr(limits, name) for name in limits.__all__ if isinstance(getattr(limits, name), ParamSpec | ThresholdSpec)
]


def test_shared_specs_are_referenced_not_copied() -> None:
    """A declaration equal to one in :mod:`advisor.rules.limits` (key, direction, unit, doc and
    bounds) is a copy: the rule references the shared spec instead. Each shared spec is used by at
    least two rules (one user is not shared)."""
    users: dict[str, list[str]] = {repr(spec): [] for spec in SHARED_SPECS}
    for cls in RULES:
        for spec in cls.thresholds:
            for shared in SHARED_SPECS:
                if spec == shared:
                    assert spec is shared, f"{cls.id} copies {shared!r}: reference advisor.rules.limits instead"
                    users[repr(shared)].append(cls.id)
    assert {k: v for k, v in users.items() if len(v) < 2} == {}


@pytest.mark.parametrize("cls", RULES, ids=IDS)
def test_every_rule_has_cases_that_fire_and_stay_silent(cls: type[Rule]) -> None:
    path = rules_data_dir() / "cases" / f"{cls.id}.yaml"
    assert path.exists(), f"missing {path}"
    severities = [c.expect["severity"] for c in load_cases(path)]
    assert "none" in severities, "at least one case where the rule stays silent"
    assert any(s != "none" for s in severities), "at least one case where the rule fires"


def test_no_case_file_without_a_rule() -> None:
    stems = {p.stem for p in (rules_data_dir() / "cases").glob("*.yaml")}
    assert stems == set(IDS)


def test_registry_instances_follow_the_classes() -> None:
    assert [r.id for r in get_rules(include_deprecated=True)] == IDS


def test_rule_docs_are_fresh() -> None:
    """docs/rules.md is generated; regenerate with ``python -m advisor.rules.docs --write``."""
    assert DEFAULT_PATH.read_text(encoding="utf-8") == render()


def test_docs_mention_every_rule() -> None:
    text = render()
    for cls in RULES:
        assert f"### {cls.id}" in text and f"`{cls.name}`" in text


def test_rules_data_dir_is_the_repository_folder_in_a_checkout() -> None:
    assert rules_data_dir() == Path(__file__).resolve().parents[3] / "rules"
