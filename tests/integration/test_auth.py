"""Bearer-token auth (ADVISOR_AUTH_MODE=token) on SQLite and Postgres: 401/403 as problem details,
roles per endpoint group, revocation after the cache, expiry, open system endpoints, the
``advisor tokens`` commands, and the token never showing up in logs or responses."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from click.testing import CliRunner
from litestar.testing import TestClient
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

from advisor.cli import cli
from advisor.db.models import ApiToken
from advisor.domain.auth import ApiTokenService, TokenAuthPlugin, hash_token
from advisor.domain.auth import guards as auth_guards
from advisor.domain.models import provider
from advisor.server import create_app
from advisor.settings import AuthSettings, DatabaseSettings, ServerSettings, Settings, get_settings
from tests.integration.test_runs_api import CANONICAL

PREDICT = {
    "setup": {"hardware": "nvidia-a10g", "model": "llama-3.1-8b", "quantization": "bf16", "runtime": "vllm"},
    "workload": {"prompt_tokens_mean": 1000, "output_tokens_mean": 200, "concurrency": 1},
}


def _token_settings(url: str, log_level: str = "warning") -> Settings:
    return Settings(
        db=DatabaseSettings(url=url),
        server=ServerSettings(log_level=log_level),  # type: ignore[arg-type]
        auth=AuthSettings(mode="token"),
    )


@pytest.fixture
def token_client(clean_db: str) -> Iterator[TestClient[Any]]:
    with TestClient(app=create_app(_token_settings(clean_db))) as tc:
        yield tc


@pytest.fixture(autouse=True)
def fresh_worker() -> Iterator[None]:
    provider.reset()
    yield
    provider.reset()


async def _session_work(url: str, work: Any) -> Any:
    engine = create_async_engine(url)
    try:
        async with async_sessionmaker(engine, expire_on_commit=False)() as session:
            return await work(session)
    finally:
        await engine.dispose()


def _create(url: str, name: str, role: str, expires_days: int | None = None) -> str:
    async def work(session: Any) -> str:
        _, token = await ApiTokenService(session=session).create_token(name, role, expires_days=expires_days)  # type: ignore[arg-type]
        return token

    return str(asyncio.run(_session_work(url, work)))


def _row(url: str, name: str) -> ApiToken:
    async def work(session: Any) -> ApiToken:
        return (await session.execute(select(ApiToken).where(ApiToken.name == name))).scalar_one()  # type: ignore[no-any-return]

    return asyncio.run(_session_work(url, work))  # type: ignore[no-any-return]


def _set(url: str, name: str, **values: Any) -> None:
    async def work(session: Any) -> None:
        await session.execute(update(ApiToken).where(ApiToken.name == name).values(**values))
        await session.commit()

    asyncio.run(_session_work(url, work))


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _assert_401(response: Any, token: str | None = None) -> None:
    assert response.status_code == 401, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert response.headers["www-authenticate"].startswith("Bearer")
    problem = response.json()
    assert problem["status"] == 401 and problem["type"].endswith("/unauthorized") and problem["detail"]
    if token:
        assert token not in response.text and token not in str(response.headers)


def test_none_mode_is_open(client: Any) -> None:
    assert client.get("/api/v1/runs").status_code == 200
    assert client.post("/api/v1/runs", json=CANONICAL).status_code == 201
    assert client.post("/api/v1/predict", json=PREDICT).status_code == 200
    assert not any(isinstance(p, TokenAuthPlugin) for p in client.app.plugins)


def test_no_token_or_a_garbage_one_is_401(token_client: Any) -> None:
    _assert_401(token_client.get("/api/v1/runs"))
    assert "error" not in token_client.get("/api/v1/runs").headers["www-authenticate"]
    garbage = "adv_not-a-real-token"
    _assert_401(token_client.get("/api/v1/runs", headers=_auth(garbage)), garbage)
    assert (
        'error="invalid_token"' in token_client.get("/api/v1/runs", headers=_auth(garbage)).headers["www-authenticate"]
    )
    _assert_401(token_client.get("/api/v1/runs", headers={"Authorization": "Basic dXNlcjpwYXNz"}))
    _assert_401(token_client.post("/api/v1/runs", json=CANONICAL))


def test_system_endpoints_stay_open(token_client: Any) -> None:
    assert token_client.get("/health").status_code == 200
    assert token_client.get("/metrics").status_code == 401  # issue #18: metrics need a read token
    assert token_client.get("/schema/openapi.json").status_code == 200


def test_read_token_reads_but_cannot_submit(clean_db: str, token_client: Any) -> None:
    token = _create(clean_db, "dashboard", "read")
    assert token_client.get("/api/v1/runs", headers=_auth(token)).status_code == 200
    assert token_client.get("/api/v1/rules", headers=_auth(token)).status_code == 200
    # advise and predict store nothing: a reader may call them
    assert token_client.post("/api/v1/advise", json=CANONICAL, headers=_auth(token)).status_code == 200
    assert token_client.post("/api/v1/predict", json=PREDICT, headers=_auth(token)).status_code == 200

    denied = token_client.post("/api/v1/runs", json=CANONICAL, headers=_auth(token))
    assert denied.status_code == 403
    assert denied.headers["content-type"].startswith("application/problem+json")
    problem = denied.json()
    assert problem["required_role"] == "submit" and problem["token_role"] == "read"
    assert "needs the submit role" in problem["detail"]
    assert token not in denied.text
    slo = {"slo": {"ttft_p99_ms": 800}}
    assert token_client.put("/api/v1/deployments/chat-prod", json=slo, headers=_auth(token)).status_code == 403


def test_submit_token_submits_but_cannot_fit(clean_db: str, token_client: Any) -> None:
    token = _create(clean_db, "ci-runner", "submit")
    created = token_client.post("/api/v1/runs", json=CANONICAL, headers=_auth(token))
    assert created.status_code == 201, created.text
    assert token_client.get("/api/v1/runs", headers=_auth(token)).json()["total"] == 1

    for path in ("/api/v1/models/fit", "/api/v1/models/rollback", "/api/v1/models/20990101-000000-x/activate"):
        denied = token_client.post(path, json={"cv": False}, headers=_auth(token))
        assert denied.status_code == 403, path
        assert denied.json()["required_role"] == "admin"
    catalog = {"id": "my-gpu", "mem_bandwidth_gb_s": 900, "memory_gb": 48}
    assert token_client.post("/api/v1/catalog/hardware", json=catalog, headers=_auth(token)).status_code == 403


def test_a_run_records_the_token_it_came_with(token_client: Any, clean_db: str) -> None:
    token = _create(clean_db, "nightly-ci", "submit")
    created = token_client.post("/api/v1/runs", json=CANONICAL, headers=_auth(token))
    assert created.status_code == 201, created.text
    assert created.json()["run"]["submitted_by"] == "nightly-ci"
    wrapper = {
        "context": {"submitted_by": "alice"},
        "files": [{"name": "run.json", "content": dict(CANONICAL, labels={"other": "run"})}],
    }
    explicit = token_client.post("/api/v1/runs", json=wrapper, headers=_auth(token))
    assert explicit.status_code == 201, explicit.text
    assert explicit.json()["run"]["submitted_by"] == "alice"  # what the request says wins


def test_token_mode_schema_declares_the_bearer_scheme(token_client: Any, client: Any) -> None:
    schema = token_client.get("/schema/openapi.json").json()
    assert schema["components"]["securitySchemes"]["bearer"] == {"type": "http", "scheme": "bearer"}
    assert schema["security"] == [{"bearer": []}]
    assert "securitySchemes" not in client.get("/schema/openapi.json").json().get("components", {})


def test_admin_token_fits(clean_db: str, token_client: Any) -> None:
    token = _create(clean_db, "ops", "admin")
    response = token_client.post("/api/v1/models/fit", json={"cv": False}, headers=_auth(token))
    assert response.status_code == 202, response.text
    # an admin may do what the weaker roles may
    assert token_client.get(response.headers["location"], headers=_auth(token)).status_code == 200
    assert token_client.post("/api/v1/runs", json=CANONICAL, headers=_auth(token)).status_code == 201


def test_revoked_token_fails_once_the_cache_expires(
    clean_db: str, token_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(auth_guards, "CACHE_TTL_SECONDS", 3600.0)
    token = _create(clean_db, "laptop", "read")
    assert token_client.get("/api/v1/runs", headers=_auth(token)).status_code == 200
    _set(clean_db, "laptop", revoked_at=datetime.now(UTC))
    # still trusted from the per-process cache: revocation takes effect within CACHE_TTL_SECONDS
    assert token_client.get("/api/v1/runs", headers=_auth(token)).status_code == 200
    monkeypatch.setattr(auth_guards, "CACHE_TTL_SECONDS", 0.0)
    _assert_401(token_client.get("/api/v1/runs", headers=_auth(token)), token)


def test_expired_token_is_401(clean_db: str, token_client: Any) -> None:
    token = _create(clean_db, "temp", "submit", expires_days=1)
    assert token_client.get("/api/v1/runs", headers=_auth(token)).status_code == 200
    other = _create(clean_db, "old", "submit", expires_days=1)
    _set(clean_db, "old", expires_at=datetime.now(UTC) - timedelta(minutes=1))
    _assert_401(token_client.get("/api/v1/runs", headers=_auth(other)), other)


def test_expiry_is_checked_on_cached_tokens(clean_db: str, token_client: Any) -> None:
    token = _create(clean_db, "short", "read", expires_days=1)
    assert token_client.get("/api/v1/runs", headers=_auth(token)).status_code == 200
    plugin = next(p for p in token_client.app.plugins if isinstance(p, TokenAuthPlugin))
    ((verified_at, principal),) = plugin._verified.values()
    past = datetime.now(UTC) - timedelta(seconds=1)
    plugin._verified[hash_token(token)] = (verified_at, type(principal)(principal.token_id, "short", "read", past))
    _assert_401(token_client.get("/api/v1/runs", headers=_auth(token)), token)


def test_last_used_is_recorded_at_most_once_a_minute(clean_db: str) -> None:
    token = _create(clean_db, "ci", "submit")
    assert _row(clean_db, "ci").last_used_at is None
    with TestClient(app=create_app(_token_settings(clean_db))) as tc:
        assert tc.get("/api/v1/runs", headers=_auth(token)).status_code == 200
    first = _row(clean_db, "ci").last_used_at
    assert first is not None and datetime.now(UTC) - first < timedelta(minutes=1)
    with TestClient(app=create_app(_token_settings(clean_db))) as tc:  # a fresh worker
        for _ in range(3):
            assert tc.get("/api/v1/runs", headers=_auth(token)).status_code == 200
    assert _row(clean_db, "ci").last_used_at == first


def test_the_token_never_reaches_logs_or_responses(
    clean_db: str, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    reader = _create(clean_db, "reader", "read")
    submitter = _create(clean_db, "submitter", "submit")
    garbage = "adv_garbage-token-value"
    with TestClient(app=create_app(_token_settings(clean_db, log_level="debug"))) as tc:
        responses = [
            tc.get("/api/v1/runs", headers=_auth(reader)),
            tc.post("/api/v1/runs", json=CANONICAL, headers=_auth(reader)),
            tc.post("/api/v1/runs", json=CANONICAL, headers=_auth(submitter)),
            tc.get("/api/v1/runs", headers=_auth(garbage)),
            tc.get("/api/v1/runs/999", headers=_auth(submitter)),
        ]
    assert [r.status_code for r in responses] == [200, 403, 201, 401, 404]
    out, err = capfd.readouterr()
    assert "auth.forbidden" in out + err + caplog.text  # the logs were captured at all
    for secret in (reader, submitter, garbage):
        assert secret not in out + err + caplog.text
        assert secret.removeprefix("adv_") not in out + err + caplog.text
        assert all(secret not in r.text and secret not in str(r.headers) for r in responses)


@pytest.fixture
def runner(clean_db: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[CliRunner]:
    monkeypatch.setenv("ADVISOR_DATABASE_URL", clean_db)
    get_settings.cache_clear()
    yield CliRunner()
    get_settings.cache_clear()


def test_cli_create_list_revoke(clean_db: str, runner: CliRunner) -> None:
    created = runner.invoke(cli, ["tokens", "create", "ci-runner", "--role", "submit"])
    assert created.exit_code == 0, created.output
    token = created.stdout.strip()
    assert token.startswith("adv_") and len(token) > 40 and "\n" not in token
    assert "not shown again" in created.stderr
    assert _row(clean_db, "ci-runner").token_hash == hash_token(token)

    as_json = runner.invoke(cli, ["tokens", "create", "ops", "--role", "admin", "--expires-days", "30", "--json"])
    assert as_json.exit_code == 0, as_json.output
    record = json.loads(as_json.stdout)
    assert record["role"] == "admin" and record["status"] == "active" and record["token"].startswith("adv_")
    assert record["expires_at"] is not None

    with TestClient(app=create_app(_token_settings(clean_db))) as tc:
        assert tc.post("/api/v1/runs", json=CANONICAL, headers=_auth(token)).status_code == 201

    listed = runner.invoke(cli, ["tokens", "list", "--json"])
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.stdout)
    assert [(r["name"], r["role"], r["status"]) for r in rows] == [
        ("ci-runner", "submit", "active"),
        ("ops", "admin", "active"),
    ]
    assert rows[0]["last_used_at"] is not None
    for secret in (token, record["token"], hash_token(token)):
        assert secret not in listed.output
    table = runner.invoke(cli, ["tokens", "list"])
    assert table.exit_code == 0 and "ci-runner" in table.output and token not in table.output

    revoked = runner.invoke(cli, ["tokens", "revoke", "ci-runner"])
    assert revoked.exit_code == 0, revoked.output
    assert "revoked token" in revoked.output
    by_id = runner.invoke(cli, ["tokens", "revoke", str(record["id"])])
    assert by_id.exit_code == 0, by_id.output
    statuses = [r["status"] for r in json.loads(runner.invoke(cli, ["tokens", "list", "--json"]).stdout)]
    assert statuses == ["revoked", "revoked"]

    with TestClient(app=create_app(_token_settings(clean_db))) as tc:
        _assert_401(tc.get("/api/v1/runs", headers=_auth(token)), token)

    # a revoked name may be reused
    again = runner.invoke(cli, ["tokens", "create", "ci-runner", "--role", "read"])
    assert again.exit_code == 0, again.output


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["tokens", "create", "x", "--role", "root"], 2, "Invalid value for '--role'"),
        (["tokens", "create", "x", "--expires-days", "0"], 2, "--expires-days"),
        (["tokens", "create", "bad name!"], 4, "a token name is"),
        (["tokens", "revoke", "nobody"], 4, "no token 'nobody'"),
        (["tokens", "revoke", "42"], 4, "no token '42'"),
    ],
)
def test_cli_refusals(runner: CliRunner, args: list[str], code: int, message: str) -> None:
    result = runner.invoke(cli, args)
    assert result.exit_code == code, result.output
    assert message in result.output


def test_cli_refuses_a_second_active_token_of_a_name_and_a_double_revoke(runner: CliRunner) -> None:
    assert runner.invoke(cli, ["tokens", "create", "ci"]).exit_code == 0
    duplicate = runner.invoke(cli, ["tokens", "create", "ci"])
    assert duplicate.exit_code == 4 and "an active token named 'ci' exists" in duplicate.output
    assert runner.invoke(cli, ["tokens", "revoke", "1"]).exit_code == 0
    twice = runner.invoke(cli, ["tokens", "revoke", "1"])
    assert twice.exit_code == 4 and "already revoked" in twice.output
    assert runner.invoke(cli, ["tokens", "list"]).output.count("revoked") == 1


def test_the_client_cli_reports_401_and_403_with_exit_4(clean_db: str, token_client: Any, tmp_path: Any) -> None:
    from tests.integration.test_cli_client import run_cli

    run_file = tmp_path / "run.json"
    run_file.write_text(json.dumps(CANONICAL))
    anonymous = run_cli(token_client, "runs", "list", "-o", "json")
    assert anonymous.exit_code == 4 and "401" in anonymous.output

    token = _create(clean_db, "viewer", "read")
    token_client.headers["Authorization"] = f"Bearer {token}"
    assert run_cli(token_client, "runs", "list", "-o", "json").exit_code == 0
    denied = run_cli(token_client, "submit", str(run_file), "-o", "json")
    assert denied.exit_code == 4
    assert "403" in denied.output and "needs the submit role" in denied.output and token not in denied.output
