from __future__ import annotations

from typing import Any


def test_rule_catalogue(client: Any) -> None:
    rules = client.get("/api/v1/rules").json()
    ids = [r["rule_id"] for r in rules]
    assert len(ids) == len(set(ids)) >= 25
    for group in ("PRE", "DEC", "SCH", "CAP", "CFG", "REG", "MEAS"):
        assert any(i.startswith(group) for i in ids), group
    first = client.get(f"/api/v1/rules/{ids[0].lower()}")
    assert first.status_code == 200
    assert first.json()["rule_id"] == ids[0]
    assert first.json()["why"] and first.json()["fix"]
    missing = client.get("/api/v1/rules/XYZ999")
    assert missing.status_code == 404
    assert missing.json()["field"] == "rule_id"
