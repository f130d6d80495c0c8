"""The listings the mixed load reads most take shortcuts (one grouped query for every deployment's
counts, Core columns instead of ORM entities for runs); they must answer exactly what the
one-at-a-time routes answer."""

from __future__ import annotations

import json
import random
from typing import Any

from bench._common import canonical_run


def _load(client: Any, n: int) -> None:
    rng = random.Random(1)
    runs = [canonical_run(i, rng) for i in range(n)]
    for run in runs[::4]:
        run["deployment"] = "reads-odd"  # a deployment of its own, with a quarter of the runs
    response = client.post("/api/v1/runs/bulk", content=json.dumps(runs).encode())
    assert response.status_code == 200, response.text
    assert client.put("/api/v1/deployments/reads-empty", json={"team": "t"}).status_code in (200, 201)


def test_the_deployments_listing_answers_what_each_deployment_answers(client: Any) -> None:
    _load(client, 60)
    listed = client.get("/api/v1/deployments").json()
    assert {d["name"] for d in listed} >= {"reads-odd", "reads-empty", "bench-1"}
    for item in listed:
        one = client.get(f"/api/v1/deployments/{item['name']}").json()
        assert item == one
    counts = {d["name"]: d["run_count"] for d in listed}
    assert counts["reads-empty"] == 0 and counts["reads-odd"] == 15
    assert sum(counts.values()) == 60


def test_the_runs_listing_answers_what_each_run_answers(client: Any) -> None:
    _load(client, 30)
    for params in ({"limit": 50}, {"limit": 7, "deployment": "reads-odd"}):
        page = client.get("/api/v1/runs", params=params).json()
        assert page["items"]
        for item in page["items"]:
            one = client.get(f"/api/v1/runs/{item['id']}").json()  # analyses it first when pending
            same = {k: v for k, v in one.items() if k not in ("verdict", "efficiency")}
            assert {k: v for k, v in item.items() if k not in ("verdict", "efficiency")} == same
    # Pagination still walks every run once, newest first.
    seen: list[int] = []
    cursor = None
    while True:
        query: dict[str, Any] = {"limit": 8}
        if cursor:
            query["cursor"] = cursor
        page = client.get("/api/v1/runs", params=query).json()
        assert page["total"] == 30
        seen += [r["id"] for r in page["items"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert len(seen) == len(set(seen)) == 30
