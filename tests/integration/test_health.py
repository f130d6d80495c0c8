from __future__ import annotations

from typing import Any


def test_health_reports_database_and_versions(client: Any) -> None:
    response = client.get("/health")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "ok"
    assert body["database"]["reachable"] is True
    assert body["database"]["up_to_date"] is True
    assert body["database"]["revision"] == body["database"]["head"]
    assert body["versions"]["advisor"]
    assert response.headers["x-request-id"]


def test_request_id_is_echoed(client: Any) -> None:
    response = client.get("/health", headers={"X-Request-ID": "ci-run-42"})
    assert response.headers["x-request-id"] == "ci-run-42"
    # an unsafe id is replaced, never reflected
    response = client.get("/health", headers={"X-Request-ID": "bad id\r\nx"})
    assert response.headers["x-request-id"] != "bad id\r\nx"


def test_openapi_schema_served(client: Any) -> None:
    response = client.get("/schema/openapi.json")
    assert response.status_code == 200
    spec = response.json()
    assert spec["info"]["title"] == "advisor"
    assert "/health" in spec["paths"]


def test_unknown_path_is_problem_details(client: Any) -> None:
    response = client.get("/api/v1/does-not-exist")
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    assert body["status"] == 404
    assert body["title"]


def test_openapi_documents_the_raw_body_endpoints(client: Any) -> None:
    spec = client.get("/schema/openapi.json").json()
    submit = spec["paths"]["/api/v1/runs"]["post"]
    assert {"application/json", "text/plain", "application/octet-stream"} <= set(submit["requestBody"]["content"])
    assert submit["responses"]["201"]["content"]["application/json"]["schema"]["$ref"].endswith("RunResult")
    assert "application/x-ndjson" in spec["paths"]["/api/v1/runs/bulk"]["post"]["requestBody"]["content"]
    assert "requestBody" in spec["paths"]["/api/v1/advise"]["post"]


def test_liveness_and_readiness(client: Any) -> None:
    live = client.get("/health/live")
    assert (live.status_code, live.json()) == (200, {"status": "ok"})
    ready = client.get("/health/ready")
    assert (ready.status_code, ready.json()) == (200, {"status": "ready"})
    assert client.get("/health").json()["database"]["writable"] is True


def _token_app(url: str) -> Any:
    from advisor.server import create_app
    from advisor.settings import AuthSettings, DatabaseSettings, ServerSettings, Settings

    return create_app(
        Settings(
            db=DatabaseSettings(url=url),
            server=ServerSettings(log_level="warning"),  # type: ignore[arg-type]
            auth=AuthSettings(mode="token"),
        )
    )


def test_health_says_little_to_anonymous_callers_in_token_mode(clean_db: str) -> None:
    from litestar.testing import TestClient

    from tests.integration.test_auth import _create

    token = _create(clean_db, "ops", "read")
    with TestClient(app=_token_app(clean_db)) as client:
        anonymous = client.get("/health")
        assert (anonymous.status_code, anonymous.json()) == (200, {"status": "ok"})
        invalid = client.get("/health", headers={"Authorization": "Bearer not-a-token"})
        assert invalid.json() == {"status": "ok"}
        trusted = client.get("/health", headers={"Authorization": f"Bearer {token}"}).json()
        assert trusted["database"]["writable"] is True
        assert trusted["versions"]["advisor"]
        assert client.get("/health/ready").json() == {"status": "ready"}


def test_metrics_need_a_read_token_in_token_mode(clean_db: str) -> None:
    from litestar.testing import TestClient

    from tests.integration.test_auth import _create

    token = _create(clean_db, "prometheus", "read")
    with TestClient(app=_token_app(clean_db)) as client:
        assert client.get("/metrics").status_code == 401
        scraped = client.get("/metrics", headers={"Authorization": f"Bearer {token}"})
        assert scraped.status_code == 200, scraped.text
        assert "advisor_requests_total" in scraped.text
