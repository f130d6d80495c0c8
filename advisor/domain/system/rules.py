"""GET /api/v1/rules: the rule catalogue (docs, thresholds in force, actions), from the rules engine."""

from __future__ import annotations

from typing import Any

from litestar import Controller, get
from litestar.params import FromPath

from advisor.errors import NotFound


class RulesController(Controller):
    path = "/rules"
    tags = ("rules",)

    @get("/", summary="The rule catalogue: ids, names, actions, docs and the thresholds in force")
    async def list_rules(self) -> list[dict[str, Any]]:
        from advisor.rules.registry import catalogue

        return catalogue()

    @get("/{rule_id:str}", summary="One rule by id (or alias)")
    async def get_rule(self, rule_id: FromPath[str]) -> dict[str, Any]:
        from advisor.rules.registry import catalogue

        key = rule_id.upper()
        for entry in catalogue():
            if entry.get("rule_id") == key or key in {a.upper() for a in entry.get("aliases", [])}:
                return entry
        raise NotFound(f"no rule {rule_id!r}; GET /api/v1/rules lists them", field="rule_id")
