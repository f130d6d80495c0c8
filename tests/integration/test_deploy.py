"""What the Docker image does, without Docker: docker/entrypoint.sh migrates (or not), then serves
with several uvicorn workers on Postgres; the workers share their metrics, SIGTERM drains the
in-flight requests. The static parts (compose, Dockerfile) are checked against the app they ship."""

from __future__ import annotations

import asyncio
import copy
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import inspect
from sqlalchemy.ext.asyncio import create_async_engine

from tests.conftest import fresh_database
from tests.integration.test_runs_api import CANONICAL

ROOT = Path(__file__).resolve().parents[2]
ENTRYPOINT = ROOT / "docker" / "entrypoint.sh"
BIN = Path(sys.executable).parent


def _env(url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ADVISOR_", "PROMETHEUS_"))}
    env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", ADVISOR_DATABASE_URL=url, ADVISOR_LOG_LEVEL="warning")
    env.update(extra)
    return env


async def _tables(url: str) -> set[str]:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            return set(await conn.run_sync(lambda c: inspect(c).get_table_names()))
    finally:
        await engine.dispose()


@pytest.fixture(params=["sqlite", "postgres"])
def empty_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with fresh_database(request.param, tmp_path) as url:
        yield url


def test_entrypoint_migrates_then_runs_the_command(empty_db: str) -> None:
    done = subprocess.run(
        ["sh", str(ENTRYPOINT), "sh", "-c", "echo ran >&2"],
        env=_env(empty_db),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.index("advisor-entrypoint: advisor db upgrade") < done.stderr.index("ran")
    tables = asyncio.run(_tables(empty_db))
    assert {"alembic_version", "run", "deployment"} <= tables


@pytest.mark.parametrize("how", ["flag", "env"])
def test_entrypoint_can_skip_migrations(empty_db: str, how: str) -> None:
    args = ["--skip-migrations", "true"] if how == "flag" else ["true"]
    extra = {"ADVISOR_SKIP_MIGRATIONS": "1"} if how == "env" else {}
    done = subprocess.run(
        ["sh", str(ENTRYPOINT), *args],
        env=_env(empty_db, **extra),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "migrations skipped" in done.stderr
    assert asyncio.run(_tables(empty_db)) == set()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_ready(url: str, proc: subprocess.Popen[bytes], seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the server exited before it was ready"
        try:
            if httpx.get(url + "/health/ready", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise AssertionError("not ready in time")


def _children(pid: int) -> list[int]:
    children = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(p) for p in children.read_text().split()] if children.exists() else []


def _ingested(url: str) -> float:
    text = httpx.get(url + "/metrics", timeout=10).text
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "advisor_runs_ingested_total"
    )


def _run(i: int) -> dict[str, Any]:
    run = copy.deepcopy(CANONICAL)
    run["labels"] = {"deploy_test": str(i)}
    return run


def test_migrate_then_serve_on_postgres_with_two_workers(tmp_path: Path) -> None:
    with fresh_database("postgres", tmp_path) as db:
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        proc = subprocess.Popen(
            ["sh", str(ENTRYPOINT), "advisor", "serve", "--port", str(port), "--workers", "2"],
            env=_env(db),
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        try:
            _wait_ready(url, proc)
            # exec: the entry point's shell is replaced by the supervisor, which runs two workers.
            assert len(_children(proc.pid)) >= 2  # the two workers (and uvicorn's resource tracker)

            with httpx.Client(base_url=url, timeout=30) as client:
                for i in range(12):
                    assert client.post("/api/v1/runs", json=_run(i)).status_code == 201
            # Whichever worker answers the scrape, it reports both workers' counts.
            assert {_ingested(url) for _ in range(6)} == {12.0}

            # SIGTERM while a bulk load is in flight: the request is answered and stored, then the
            # server exits cleanly.
            bulk = "\n".join(json.dumps(_run(1000 + i)) for i in range(3000)).encode()
            answer: dict[str, Any] = {}

            def post_bulk() -> None:
                response = httpx.post(url + "/api/v1/runs/bulk", content=bulk, timeout=120)
                answer.update(status=response.status_code, body=response.json())

            sender = threading.Thread(target=post_bulk)
            sender.start()
            time.sleep(0.3)
            proc.send_signal(signal.SIGTERM)
            sender.join(timeout=120)
            assert answer["status"] == 200, answer
            assert answer["body"]["created"] == 3000
            assert proc.wait(timeout=60) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            output = proc.stdout.read().decode() if proc.stdout else ""
            print(output)


def test_the_images_health_check_and_compose_match_the_app() -> None:
    from advisor.server import create_app
    from advisor.settings import DatabaseSettings, Settings

    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    compose = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())
    paths = set(create_app(Settings(db=DatabaseSettings(url="sqlite+aiosqlite:///:memory:"))).route_handler_method_map)
    assert "/health/ready" in dockerfile
    assert "/health/ready" in paths
    assert "\nUSER advisor\n" in dockerfile
    assert "ADVISOR_AUTH_MODE=token" in dockerfile
    assert "uv sync --frozen --no-dev" in dockerfile
    app = compose["services"]["app"]
    assert app["command"] == ["advisor", "serve", "--workers", "2"]
    assert app["environment"]["ADVISOR_SKIP_MIGRATIONS"] == "1"
    assert app["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}
    assert compose["services"]["migrate"]["entrypoint"] == ["advisor", "db", "upgrade"]
    assert "healthcheck" in compose["services"]["postgres"]
    assert all(p.startswith("127.0.0.1:") for p in app["ports"])


def test_json_logs_carry_the_request_id(tmp_path: Path) -> None:
    db = f"sqlite+aiosqlite:///{tmp_path / 'logs.db'}"
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = _env(db, ADVISOR_LOG_FORMAT="json", ADVISOR_LOG_LEVEL="info")
    proc = subprocess.Popen(
        ["sh", str(ENTRYPOINT), "advisor", "serve", "--port", str(port)],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        _wait_ready(url, proc)
        response = httpx.get(url + "/api/v1/runs?limit=1", headers={"X-Request-ID": "trace-42"}, timeout=10)
        assert response.headers["x-request-id"] == "trace-42"
    finally:
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=60)
    # From the server's first line on (the migration before it is the CLI's), every line is JSON:
    # the app's, and uvicorn's own (start-up, shutdown).
    served = output[output.index("\n{") + 1 :]
    lines = [json.loads(line) for line in served.splitlines() if line.strip()]
    assert any(
        line.get("logger", "").startswith("uvicorn") and "Application startup" in line["event"] for line in lines
    )
    mine = [line for line in lines if line.get("request_id") == "trace-42"]
    assert mine, output[-2000:]
    assert {line["level"] for line in mine} == {"info"}
    assert all("timestamp" in line and "event" in line for line in mine)
