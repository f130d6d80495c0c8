from __future__ import annotations

from typing import Any


def test_put_then_get_deployment_with_slo(client: Any) -> None:
    response = client.put(
        "/api/v1/deployments/chat-prod",
        json={"team": "search", "runtime": "vllm", "slo": {"ttft_p99_ms": 800, "itl_p99_ms": 60}},
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["slo"] == {"ttft_p99_ms": 800.0, "itl_p99_ms": 60.0}
    assert body["run_count"] == 0

    got = client.get("/api/v1/deployments/chat-prod").json()
    assert got["team"] == "search"
    # a second PUT replaces the SLO, keeps the team
    client.put("/api/v1/deployments/chat-prod", json={"slo": {"decode_tok_s_min": 30}})
    got = client.get("/api/v1/deployments/chat-prod").json()
    assert got["slo"] == {"decode_tok_s_min": 30.0}
    assert got["team"] == "search"
    assert [d["name"] for d in client.get("/api/v1/deployments").json()] == ["chat-prod"]


def test_unknown_deployment_is_404_problem(client: Any) -> None:
    response = client.get("/api/v1/deployments/nope")
    assert response.status_code == 404
    assert response.json()["field"] == "name"


def test_bad_slo_names_the_field(client: Any) -> None:
    response = client.put("/api/v1/deployments/x", json={"slo": {"ttft_p99_ms": "fast"}})
    assert response.status_code == 400
    body = response.json()
    assert "slo.ttft_p99_ms" in body["field"]
    assert response.headers["content-type"].startswith("application/problem+json")

    response = client.put("/api/v1/deployments/x", json={"slo": {"ttft_p99_ms": -5}})
    assert response.status_code == 422
    assert response.json()["field"] == "slo.ttft_p99_ms"

    response = client.put("/api/v1/deployments/x", json={"runtime": "excel"})
    assert response.status_code == 422
    assert response.json()["field"] == "runtime"
