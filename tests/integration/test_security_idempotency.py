"""Issue #18 item 2: requests sharing an Idempotency-Key with different bodies, sent at once to two
workers (two apps, two engines and write queues on one database), are one stored run and conflicts
(422); no request is told it succeeded unless its run is stored."""

from __future__ import annotations

import asyncio
import contextvars
import copy
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from advisor.server import create_app
from advisor.settings import DatabaseSettings, ServerSettings, Settings
from tests.integration.test_runs_api import CANONICAL, _counts


def _body(i: int) -> dict[str, Any]:
    body = copy.deepcopy(CANONICAL)
    body["labels"] = {"attempt": str(i)}
    return body


async def _race(url: str, n: int, same_body: bool) -> list[Any]:
    settings = Settings(db=DatabaseSettings(url=url), server=ServerSettings(log_level="warning"))  # type: ignore[arg-type]
    async with AsyncTestClient(app=create_app(settings)) as a, AsyncTestClient(app=create_app(settings)) as b:
        workers = (a, b)
        return list(
            await asyncio.gather(
                *(
                    workers[i % 2].post(
                        "/api/v1/runs", json=_body(0 if same_body else i), headers={"Idempotency-Key": "ci-42"}
                    )
                    for i in range(n)
                )
            )
        )


def test_conflicting_bodies_under_one_key_are_422_never_an_empty_success(clean_db: str) -> None:
    for attempt in range(3):  # the race is timing-dependent: a few rounds
        responses = asyncio.run(_race(clean_db, 8, same_body=False))
        statuses = sorted(r.status_code for r in responses)
        for response in responses:
            if response.status_code in (200, 201):
                assert len([response.json()["run"]]) == 1
            else:
                assert response.status_code == 422, response.text
                assert response.json()["field"] == "header.idempotency-key"
        expected_created = 1 if attempt == 0 else 0
        assert statuses.count(201) == expected_created, statuses
        assert statuses.count(422) == 8 - expected_created - statuses.count(200), statuses
        # a 200 is only ever the stored run answered again (same labels as the stored one)
        assert _counts(clean_db)["run"] == 1


def test_identical_bodies_under_one_key_are_one_run_and_all_acknowledged(clean_db: str) -> None:
    responses = asyncio.run(_race(clean_db, 8, same_body=True))
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200] * 7 + [201], [r.text for r in responses]
    ids = {r.json()["run"]["id"] for r in responses}
    assert len(ids) == 1
    assert _counts(clean_db)["run"] == 1


def test_a_writer_that_loses_the_key_race_is_a_conflict_not_an_empty_success(
    client: Any, clean_db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deterministic form of the race: the second writer read the keys before the first committed
    (its read finds nothing), so its insert hits the unique key and it falls back to the stored rows."""
    from advisor.domain.runs import pipeline
    from advisor.domain.runs.services import RunService

    first = client.post("/api/v1/runs", json=_body(1), headers={"Idempotency-Key": "ci-43"})
    assert first.status_code == 201, first.text

    real_write_batch = pipeline.RunPipeline.write_batch
    real_keys = RunService.by_idempotency_keys
    stale = contextvars.ContextVar("stale", default=False)

    async def write_batch(self: Any, jobs: Any) -> Any:
        token = stale.set(True)
        try:
            return await real_write_batch(self, jobs)
        finally:
            stale.reset(token)

    async def by_idempotency_keys(self: Any, keys: list[str]) -> Any:
        return [] if stale.get() else await real_keys(self, keys)

    monkeypatch.setattr(pipeline.RunPipeline, "write_batch", write_batch)
    monkeypatch.setattr(RunService, "by_idempotency_keys", by_idempotency_keys)
    second = client.post("/api/v1/runs", json=_body(2), headers={"Idempotency-Key": "ci-43"})
    assert second.status_code == 422, second.text
    assert second.json()["field"] == "header.idempotency-key"
    assert _counts(clean_db)["run"] == 1
