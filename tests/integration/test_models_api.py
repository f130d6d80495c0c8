"""Fitted-model versions over the API, on SQLite and Postgres: fit jobs, listing, activation without
restart, rollback, and falling back to physics when a version cannot be served."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import text, update
from sqlalchemy.ext.asyncio import create_async_engine

from advisor.db.models import FittedModel
from advisor.domain.models import provider

PREDICT = {
    "setup": {"hardware": "nvidia-a10g", "model": "llama-3.1-8b", "quantization": "bf16", "runtime": "vllm"},
    "workload": {"prompt_tokens_mean": 1000, "output_tokens_mean": 200, "concurrency": 1},
}


@pytest.fixture(autouse=True)
def fresh_worker() -> Iterator[None]:
    """Each test starts, and leaves, as a worker that has loaded nothing (the cache is per
    process, and other tests expect the physics prior)."""
    provider.reset()
    yield
    provider.reset()


def _execute(url: str, statement: Any) -> None:
    async def run() -> None:
        engine = create_async_engine(url)
        try:
            async with engine.begin() as conn:
                await conn.execute(statement)
        finally:
            await engine.dispose()

    asyncio.run(run())


def _fit(client: Any, **body: Any) -> dict[str, Any]:
    response = client.post("/api/v1/models/fit", json={"cv": False, **body})
    assert response.status_code == 202, response.text
    job = response.json()
    assert job["status"] == "queued" and job["kind"] == "model.fit"
    assert response.headers["location"] == f"/api/v1/models/jobs/{job['id']}"
    # the TestClient runs the background task before returning; a real client polls
    polled = client.get(f"/api/v1/models/jobs/{job['id']}").json()
    assert polled["status"] == "succeeded", polled
    return dict(polled)


def test_fit_list_activate_predict_rollback(client: Any) -> None:
    assert client.get("/api/v1/models").json() == []
    prior = client.post("/api/v1/predict", json=PREDICT).json()
    assert prior["model_version"] == "physics-prior-1"
    assert prior["ttft_p99_ms"] is None  # the physics prior predicts no tails

    job = _fit(client, notes="first")
    version = job["result"]["version"]
    assert job["result"]["n_train"] == 847 and job["result"]["fleet_runs"] == 0
    assert job["started_at"] and job["finished_at"] and job["error"] is None

    listed = client.get("/api/v1/models").json()
    assert [v["version"] for v in listed] == [version]
    assert listed[0]["is_active"] is False and listed[0]["loadable"] is True and listed[0]["notes"] == "first"
    assert 10_000 < listed[0]["artifact_bytes"] < 1_000_000
    assert len(listed[0]["artifact_sha256"]) == 64 and len(listed[0]["data_hash"]) == 64
    assert set(listed[0]["library_versions"]) == {"scikit-learn", "skops", "numpy"}
    # fitting does not change what is served
    assert client.get("/health").json()["model"]["source"] == "physics-prior"

    activated = client.post(f"/api/v1/models/{version}/activate")
    assert activated.status_code == 200, activated.text
    assert activated.json() == {"active": version, "previous": None}
    health = client.get("/health").json()["model"]
    assert health == {"source": "fitted", "active": version, "serving": version, "loaded": True, "error": None}
    predicted = client.post("/api/v1/predict", json=PREDICT).json()
    assert predicted["model_version"] == version
    decode = predicted["decode_tok_s"]
    assert decode["low"] <= decode["expected"] <= decode["high"]
    assert decode["expected"] != pytest.approx(decode["ceiling"] * 0.444)  # not the prior's server cell

    second = _fit(client, activate=True)["result"]["version"]
    assert client.get("/health").json()["model"]["active"] == second
    listed = client.get("/api/v1/models").json()
    assert [(v["version"], v["is_active"]) for v in listed] == [(second, True), (version, False)]

    back = client.post("/api/v1/models/rollback").json()
    assert back == {"active": version, "previous": second}
    assert client.post("/api/v1/predict", json=PREDICT).json()["model_version"] == version
    back = client.post("/api/v1/models/rollback").json()  # rolling back again undoes the rollback
    assert back == {"active": second, "previous": version}


def test_rollback_to_physics_and_nothing_to_roll_back(client: Any) -> None:
    refused = client.post("/api/v1/models/rollback")
    assert refused.status_code == 409
    assert "nothing to roll back" in refused.json()["detail"]
    version = _fit(client, activate=True)["result"]["version"]
    assert client.get("/health").json()["model"]["active"] == version
    assert client.post("/api/v1/models/rollback").json() == {"active": None, "previous": version}
    assert client.get("/health").json()["model"]["source"] == "physics-prior"
    assert client.post("/api/v1/predict", json=PREDICT).json()["model_version"] == "physics-prior-1"


def test_fit_with_cross_validation_reports_baselines(client: Any) -> None:
    job = _fit(client, cv=True)
    assert job["result"]["beats_baselines"]["hardware"] == {"decode_tok_s": True, "prefill_tok_s": True}
    version = job["result"]["version"]
    detail = client.get(f"/api/v1/models/{version}").json()
    hardware = detail["cv_metrics"]["targets"]["decode_tok_s"]["schemes"]["hardware"]
    assert hardware["mdape"]["model"] < min(hardware["mdape"]["roofline"], hardware["mdape"]["constant"])
    assert set(hardware["by_kind"]) == {"apple_soc", "cpu", "gpu"}
    assert detail["summary"]["prefill_tok_s"]["source"]["coverage"] is not None
    assert client.get("/api/v1/models").json()[0]["cv_metrics"] is None  # the listing stays small


def test_unknown_versions_and_jobs(client: Any) -> None:
    assert client.get("/api/v1/models/20990101-000000-deadbeef").status_code == 404
    missing = client.post("/api/v1/models/20990101-000000-deadbeef/activate")
    assert missing.status_code == 404 and missing.json()["field"] == "version"
    assert client.get("/api/v1/models/jobs/987654").status_code == 404
    assert client.post("/api/v1/models/fit", json={"cv": False, "bogus": 1}).status_code == 400


def test_a_second_fit_while_one_runs_is_refused(client: Any, clean_db: str) -> None:
    _execute(
        clean_db,
        text(
            "INSERT INTO job (kind, status, params, created_at, updated_at) "
            "VALUES ('model.fit', 'running', '{}', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"
        ),
    )
    refused = client.post("/api/v1/models/fit", json={"cv": False})
    assert refused.status_code == 409
    assert "already running" in refused.json()["detail"]


def test_a_fit_that_cannot_train_fails_its_job(client: Any) -> None:
    # Without the published runs and with no fleet runs there is nothing to learn from.
    response = client.post("/api/v1/models/fit", json={"cv": False, "include_public": False})
    assert response.status_code == 202
    job = client.get(f"/api/v1/models/jobs/{response.json()['id']}").json()
    assert job["status"] == "failed"
    assert "not enough decode_tok_s observations" in job["error"]
    assert client.get("/api/v1/models").json() == []


def test_another_worker_activating_is_picked_up_without_restart(
    client: Any, clean_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    version = _fit(client)["result"]["version"]
    assert client.post("/api/v1/predict", json=PREDICT).json()["model_version"] == "physics-prior-1"
    # Another worker (or host) activates it: only the database changes, nothing in this process.
    _execute(clean_db, update(FittedModel).where(FittedModel.version == version).values(is_active=True))
    monkeypatch.setattr(provider, "RECHECK_SECONDS", 0.0)  # instead of waiting out the 2 s re-check
    assert client.post("/api/v1/predict", json=PREDICT).json()["model_version"] == version
    _execute(clean_db, update(FittedModel).values(is_active=False))
    assert client.post("/api/v1/predict", json=PREDICT).json()["model_version"] == "physics-prior-1"


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        ({"artifact": b"PK\x03\x04 not really a zip"}, "corrupt"),
        ({"library_versions": {"scikit-learn": "0.24.2", "skops": "0.1", "numpy": "1.0"}}, "library-mismatch"),
    ],
    ids=["corrupt-artifact", "library-mismatch"],
)
def test_a_version_that_fails_to_load_falls_back_to_physics(
    client: Any, clean_db: str, damage: dict[str, Any], reason: str
) -> None:
    version = _fit(client, activate=True)["result"]["version"]
    assert client.get("/health").json()["model"]["loaded"] is True
    _execute(clean_db, update(FittedModel).where(FittedModel.version == version).values(**damage))
    provider.reset()  # a worker starting now, or one whose cached copy was evicted
    health = client.get("/health")
    assert health.status_code == 200  # degraded expectations, not a degraded service
    model = health.json()["model"]
    assert model["source"] == "physics-prior" and model["active"] == version and model["loaded"] is False
    assert model["serving"] == "physics-prior-1"
    assert reason in model["error"]
    assert client.post("/api/v1/predict", json=PREDICT).json()["model_version"] == "physics-prior-1"
    # and such a version cannot be activated again
    refused = client.post(f"/api/v1/models/{version}/activate")
    assert refused.status_code == 409 and reason in refused.json()["detail"]
    listed = client.get("/api/v1/models").json()[0]
    assert listed["loadable"] is (reason != "library-mismatch")


def test_automatic_refit_after_n_new_runs(clean_db: str) -> None:
    import hashlib
    from datetime import UTC, datetime

    from sqlalchemy import insert
    from sqlalchemy.ext.asyncio import async_sessionmaker

    from advisor.db.models import Run
    from advisor.domain.models.services import schedule_refit_if_due

    async def add_runs(engine: Any, count: int, start: int) -> None:
        rows = [
            {
                "content_hash": hashlib.sha256(f"auto-{i}".encode()).hexdigest(),
                "measured_at": datetime.now(UTC),
                "setup": {}, "workload": {}, "metrics": {}, "labels": {}, "source": {}, "analysis": {},
            }
            for i in range(start, start + count)
        ]  # fmt: skip
        async with engine.begin() as conn:
            await conn.execute(insert(Run), rows)

    async def scenario() -> None:
        engine = create_async_engine(clean_db)
        maker = async_sessionmaker(engine, expire_on_commit=False)
        try:
            await add_runs(engine, 3, 0)
            assert await schedule_refit_if_due(maker, 0) is None  # 0 disables it
            assert await schedule_refit_if_due(maker, 4) is None  # 3 of 4 runs
            task = await schedule_refit_if_due(maker, 3)
            assert task is not None
            job = await task
            assert job.status == "succeeded", job.error
            assert job.params["trigger"] == "auto" and job.result is not None
            assert await schedule_refit_if_due(maker, 3) is None  # counted from the last fit
            await add_runs(engine, 2, 3)
            assert await schedule_refit_if_due(maker, 3) is None
            await add_runs(engine, 1, 5)
            again = await schedule_refit_if_due(maker, 3)
            assert again is not None
            assert await schedule_refit_if_due(maker, 3) is None  # one is queued: never two
            await again
        finally:
            await engine.dispose()

    asyncio.run(scenario())


def test_ingestion_and_advice_use_the_active_fitted_model(client: Any) -> None:
    run = {
        "deployment": "chat-prod",
        "setup": {"runtime": "vllm", "hardware": "nvidia-a10g", "model": "llama-3.1-8b", "quantization": "bf16"},
        "workload": {"concurrency": 1, "prompt_tokens_mean": 512, "output_tokens_mean": 256},
        "metrics": {"decode_tok_s": 30.0, "ttft_ms": {"p50": 120, "p99": 200}},
    }
    before = client.post("/api/v1/advise", json=run).json()
    assert before["expectations"]["model_version"] == "physics-prior-1"

    version = _fit(client, activate=True)["result"]["version"]
    advised = client.post("/api/v1/advise", json=run).json()
    assert advised["expectations"]["model_version"] == version
    stored = client.post("/api/v1/runs", json=run)
    assert stored.status_code == 201, stored.text
    assert stored.json()["expectations"]["model_version"] == version


def test_a_version_that_loses_to_a_baseline_is_not_activated_unless_forced(
    client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from advisor.ml import train

    reason = "prefill_tok_s by source: model 52.0% vs roofline × constant 40.0%"
    monkeypatch.setattr(train, "losing_groupings", lambda _metrics: [reason])
    refused = _fit(client, activate=True)["result"]
    assert refused["activated"] is False
    assert refused["loses_to_baseline"] == [reason]
    assert refused["activation_refused"] == f"loses to a baseline: {reason} (--force activates it)"
    assert client.get("/health").json()["model"]["source"] == "physics-prior"
    assert [v["is_active"] for v in client.get("/api/v1/models").json()] == [False]  # stored, not served

    forced = _fit(client, activate=True, force=True)["result"]
    assert forced["activated"] is True and "activation_refused" not in forced
    assert client.get("/health").json()["model"]["active"] == forced["version"]
    predicted = client.post("/api/v1/predict", json=PREDICT).json()
    assert predicted["model_version"] == forced["version"] and predicted["carried_by"] == "model"
