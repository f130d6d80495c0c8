"""GET /metrics on both databases: the domain's counters move by what a submission stored, the
gauges come from the database, request latency is labelled by route template."""

from __future__ import annotations

import asyncio
import copy
from collections import Counter
from datetime import UTC, datetime
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests.integration.test_runs_api import CANONICAL


def _samples(client: Any) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    response = client.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


def _value(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def test_a_submission_moves_the_domain_counters_by_what_it_stored(client: Any) -> None:
    before = _samples(client)
    run = copy.deepcopy(CANONICAL)
    run["labels"] = {"git_sha": "metrics-1"}
    response = client.post("/api/v1/runs", json=run)
    assert response.status_code == 201, response.text
    body = response.json()
    after = _samples(client)

    ingested = "advisor_runs_ingested_total"
    assert (
        _value(after, ingested, format="canonical", runtime="vllm")
        - _value(before, ingested, format="canonical", runtime="vllm")
        == 1
    )
    verdicts = "advisor_verdicts_total"
    assert _value(after, verdicts, verdict=body["verdict"]) - _value(before, verdicts, verdict=body["verdict"]) == 1
    expected = Counter((r["action"], r["severity"]) for r in body["recommendations"])
    assert expected, "the canonical run has findings"
    for (action, severity), n in expected.items():
        name = "advisor_recommendations_total"
        delta = _value(after, name, action=action, severity=severity) - _value(
            before, name, action=action, severity=severity
        )
        assert delta == n

    # A resubmission stores nothing: the counters stay.
    assert client.post("/api/v1/runs", json=run).status_code == 200
    again = _samples(client)
    assert _value(again, ingested, format="canonical", runtime="vllm") == _value(
        after, ingested, format="canonical", runtime="vllm"
    )


def test_bulk_counts_its_runs(client: Any) -> None:
    before = _samples(client)
    runs = []
    for i in range(3):
        run = copy.deepcopy(CANONICAL)
        run["labels"] = {"git_sha": f"bulk-{i}"}
        runs.append(run)
    response = client.post("/api/v1/runs/bulk", json=runs)
    assert response.status_code == 200, response.text
    assert response.json()["created"] == 3
    after = _samples(client)
    assert (
        _value(after, "advisor_runs_ingested_total", format="bulk", runtime="vllm")
        - _value(before, "advisor_runs_ingested_total", format="bulk", runtime="vllm")
        == 3
    )


def test_latency_is_labelled_by_route_template(client: Any) -> None:
    run = copy.deepcopy(CANONICAL)
    run["labels"] = {"git_sha": "metrics-template"}
    run_id = client.post("/api/v1/runs", json=run).json()["run"]["id"]
    assert client.get(f"/api/v1/runs/{run_id}").status_code == 200
    paths = {dict(labels).get("path") for name, labels in _samples(client) if name.startswith("advisor_request")}
    assert "/api/v1/runs/{run_id}" in paths
    assert f"/api/v1/runs/{run_id}" not in paths


def test_model_gauges_come_from_the_database(client: Any, clean_db: str) -> None:
    from advisor.ml.prior import PRIOR_MODEL_VERSION

    samples = _samples(client)
    assert _value(samples, "advisor_model_info", version=PRIOR_MODEL_VERSION) == 1
    assert not any(name == "advisor_fit_duration_seconds" for name, _ in samples)

    asyncio.run(_store_fit(clean_db, version="m-test-1", seconds=12.5))
    samples = _samples(client)
    assert _value(samples, "advisor_model_info", version="m-test-1") == 1
    assert _value(samples, "advisor_model_info", version=PRIOR_MODEL_VERSION) == 0
    assert _value(samples, "advisor_fit_duration_seconds") == 12.5


async def _store_fit(url: str, *, version: str, seconds: float) -> None:
    """What a finished fit leaves: an active model row and a succeeded fit job (another process's)."""
    from sqlalchemy.ext.asyncio import async_sessionmaker

    from advisor.db.config import create_engine
    from advisor.db.models import FittedModel, Job
    from advisor.domain.models.services import FIT_JOB
    from advisor.settings import DatabaseSettings

    engine = create_engine(DatabaseSettings(url=url))
    try:
        async with async_sessionmaker(engine)() as session:
            now = datetime.now(UTC)
            session.add(
                FittedModel(
                    version=version,
                    is_active=True,
                    artifact=b"x",
                    artifact_sha256="0" * 64,
                    data_hash="0" * 64,
                    n_train=1,
                )
            )
            session.add(
                Job(kind=FIT_JOB, status="succeeded", result={"seconds": seconds}, started_at=now, finished_at=now)
            )
            await session.commit()
    finally:
        await engine.dispose()
