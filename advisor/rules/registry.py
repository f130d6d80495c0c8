"""Rule discovery, lookup and the catalogue (GET /api/v1/rules).

Rules are found by walking the group packages (``advisor/rules/<group>/``): adding a rule is adding
a file, with no list to edit (the three-place registration is what not to copy from Dr. Elephant).
Discovery checks what a registry must guarantee: one rule class per module, named by its ID, IDs
and aliases unique, the ID prefix matching the group.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from advisor.errors import NotFound
from advisor.rules.base import GROUPS, Rule
from advisor.rules.config import (
    COMMON_SECTION,
    Spec,
    ThresholdSpec,
    ThresholdTable,
    load_table,
)
from advisor.rules.damping import COMMON_SPECS
from advisor.settings import get_settings

__all__ = [
    "DOCS_BASE_URL",
    "catalogue",
    "docs_url",
    "get_rule",
    "get_rules",
    "rule_classes",
    "rule_specs",
    "thresholds_table",
]

#: Where each rule's page lives; the id is appended (``…/rules/PRE002``).
DOCS_BASE_URL = "https://llm-advisor.dev/rules/"


def docs_url(rule_id: str) -> str:
    return f"{DOCS_BASE_URL}{rule_id}"


@lru_cache(maxsize=1)
def rule_classes() -> tuple[type[Rule], ...]:
    """Every rule class, sorted by ID. Raises ``RuntimeError`` on a malformed rule module."""
    found: list[type[Rule]] = []
    for group, (prefix, _phase) in GROUPS.items():
        package = importlib.import_module(f"advisor.rules.{group}")
        for info in pkgutil.iter_modules(package.__path__):
            module = importlib.import_module(f"{package.__name__}.{info.name}")
            classes = [
                obj
                for obj in vars(module).values()
                if isinstance(obj, type)
                and issubclass(obj, Rule)
                and obj is not Rule
                and obj.__module__ == module.__name__
            ]
            if len(classes) != 1:
                raise RuntimeError(f"{module.__name__} must define exactly one Rule subclass, found {len(classes)}")
            cls = classes[0]
            if cls.id != info.name:
                raise RuntimeError(f"{module.__name__}: rule id {cls.id!r} must match the file name {info.name!r}")
            if not cls.id.startswith(prefix) or not cls.id[len(prefix) :].isdigit():
                raise RuntimeError(
                    f"{module.__name__}: rule id {cls.id!r} must be {prefix} + digits in group {group!r}"
                )
            found.append(cls)
    seen: dict[str, str] = {}
    for cls in found:
        for key in (cls.id, cls.name, *cls.aliases):
            if key in seen and seen[key] != cls.id:
                raise RuntimeError(f"rule identifier {key!r} is used by both {seen[key]} and {cls.id}")
            seen[key] = cls.id
    return tuple(sorted(found, key=lambda c: c.id))


def rule_specs() -> dict[str, tuple[Spec, ...]]:
    """Every section of thresholds.toml and what it declares."""
    specs: dict[str, tuple[Spec, ...]] = {COMMON_SECTION: COMMON_SPECS}
    for cls in rule_classes():
        specs[cls.id] = tuple(cls.thresholds)
    return specs


@lru_cache(maxsize=4)
def _table_for(override_file: Path | None) -> ThresholdTable:
    return load_table(rule_specs(), override_file=override_file)


def thresholds_table() -> ThresholdTable:
    """The defaults merged with the ``rules.thresholds_file`` setting
    (``ADVISOR_RULES_THRESHOLDS_FILE``), cached per file."""
    return _table_for(get_settings().rules.thresholds_file)


@lru_cache(maxsize=8)
def _instances(table: ThresholdTable) -> tuple[Rule, ...]:
    common = table.common
    return tuple(cls(table.for_section(cls.id), common) for cls in rule_classes())


@lru_cache(maxsize=8)
def _active(table: ThresholdTable) -> tuple[Rule, ...]:
    """:func:`_instances` without the deprecated rules: what every analysis runs (built once)."""
    return tuple(r for r in _instances(table) if r.rule_status != "deprecated")


def get_rules(
    *,
    table: ThresholdTable | None = None,
    select: Iterable[str] | None = None,
    include_deprecated: bool = False,
) -> tuple[Rule, ...]:
    """Rule instances bound to ``table`` (default: :func:`thresholds_table`), sorted by ID.

    ``select`` keeps the rules whose ID, name, alias or group (``pre``) is listed.
    """
    table = table if table is not None else thresholds_table()
    rules = _instances(table) if include_deprecated else _active(table)
    if select is not None:
        wanted = {s.strip() for s in select}
        rules = tuple(r for r in rules if wanted & {r.id, r.name, r.group(), *r.aliases})
    return rules


def get_rule(key: str, *, table: ThresholdTable | None = None) -> Rule:
    """A rule by ID, dotted name or alias (renamed rules keep answering to their old IDs)."""
    for rule in get_rules(table=table, include_deprecated=True):
        if key in (rule.id, rule.name, *rule.aliases):
            return rule
    raise NotFound(f"no rule {key!r}", field="rule_id")


def _spec_dict(spec: Spec, config: Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(spec, ThresholdSpec):
        return {
            "key": spec.key,
            "kind": "thresholds",
            "direction": "ascending" if spec.ascending else "descending",
            "values": config[spec.key]["values"],
            "unit": spec.unit,
            "doc": spec.doc,
        }
    return {
        "key": spec.key,
        "kind": "parameter",
        "value": config[spec.key],
        "unit": spec.unit,
        "doc": spec.doc,
    }


def catalogue(*, table: ThresholdTable | None = None, rules: Sequence[Rule] | None = None) -> list[dict[str, Any]]:
    """One entry per rule: identity, lifecycle, docs and effective thresholds."""
    out: list[dict[str, Any]] = []
    for rule in rules if rules is not None else get_rules(table=table, include_deprecated=True):
        docs = rule.docs()
        config = rule.config.to_dict()
        out.append(
            {
                "rule_id": rule.id,
                "name": rule.name,
                "group": rule.group(),
                "phase": str(rule.phase),
                "action": rule.action,
                "actions": list(rule.all_actions),
                "rule_status": str(rule.rule_status),
                "aliases": list(rule.aliases),
                "supersedes": list(rule.supersedes),
                "summary": docs.summary,
                "why": docs.sections.get("Why is this bad?", ""),
                "fix": docs.sections.get("Fix", ""),
                "example": docs.sections.get("Example", ""),
                "thresholds": [_spec_dict(s, config) for s in rule.thresholds],
                "docs": docs_url(rule.id),
            }
        )
    return out
