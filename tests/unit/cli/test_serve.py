"""``advisor serve``: it refuses an open address without auth, and hands uvicorn its worker settings."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from click.testing import CliRunner

from advisor.cli.serve import is_loopback, serve_command
from advisor.settings import Settings


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.1", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.0.0.5", False),
        ("advisor.internal", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


@pytest.fixture
def uvicorn_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[str, Any]]]:
    """uvicorn.run recorded instead of serving; the settings read afresh from each test's environment."""
    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kwargs: calls.append({"app": app, **kwargs}))
    for name in ("ADVISOR_HOST", "ADVISOR_AUTH_MODE", "ADVISOR_INSECURE", "ADVISOR_WORKERS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("advisor.cli.serve.settings_or_exit", Settings)
    # Several workers set PROMETHEUS_MULTIPROC_DIR in this process: removed again at teardown.
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", "unset-at-teardown")
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR")
    yield calls


def test_open_address_without_auth_is_refused(uvicorn_calls: list[dict[str, Any]]) -> None:
    result = CliRunner().invoke(serve_command, ["--host", "0.0.0.0"])
    assert result.exit_code == 2
    assert "refusing to serve on 0.0.0.0 with ADVISOR_AUTH_MODE=none" in result.output
    assert uvicorn_calls == []


def test_open_address_from_the_environment_is_refused_too(uvicorn_calls: list[dict[str, Any]]) -> None:
    result = CliRunner().invoke(serve_command, [], env={"ADVISOR_HOST": "0.0.0.0"})
    assert result.exit_code == 2
    assert uvicorn_calls == []


def test_insecure_or_token_mode_serves_the_open_address(uvicorn_calls: list[dict[str, Any]]) -> None:
    assert CliRunner().invoke(serve_command, ["--host", "0.0.0.0", "--insecure"]).exit_code == 0
    assert CliRunner().invoke(serve_command, ["--host", "0.0.0.0"], env={"ADVISOR_INSECURE": "1"}).exit_code == 0
    token = CliRunner().invoke(serve_command, ["--host", "0.0.0.0"], env={"ADVISOR_AUTH_MODE": "token"})
    assert token.exit_code == 0, token.output
    assert [c["host"] for c in uvicorn_calls] == ["0.0.0.0", "0.0.0.0", "0.0.0.0"]


def test_workers_and_their_timeouts_reach_uvicorn(uvicorn_calls: list[dict[str, Any]]) -> None:
    result = CliRunner().invoke(
        serve_command, ["--workers", "3", "--timeout-worker-healthcheck", "45", "--timeout-graceful-shutdown", "12"]
    )
    assert result.exit_code == 0, result.output
    (call,) = uvicorn_calls
    assert call["app"] == "advisor.server.asgi:app"
    assert call["host"] == "127.0.0.1"
    assert call["workers"] == 3
    assert call["timeout_worker_healthcheck"] == 45
    assert call["timeout_graceful_shutdown"] == 12


def test_default_timeouts_leave_room_for_a_loaded_host(uvicorn_calls: list[dict[str, Any]]) -> None:
    assert CliRunner().invoke(serve_command, []).exit_code == 0
    (call,) = uvicorn_calls
    assert call["workers"] == 1
    assert call["timeout_worker_healthcheck"] == 30
    assert call["timeout_graceful_shutdown"] == 30


def test_several_workers_share_their_metrics_directory(
    uvicorn_calls: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert CliRunner().invoke(serve_command, ["--workers", "1"]).exit_code == 0
    assert "PROMETHEUS_MULTIPROC_DIR" not in os.environ  # one worker: the process's own registry
    seen: list[tuple[str, bool]] = []
    monkeypatch.setattr(
        uvicorn, "run", lambda app, **kw: seen.append((d := os.environ["PROMETHEUS_MULTIPROC_DIR"], Path(d).is_dir()))
    )
    assert CliRunner().invoke(serve_command, ["--workers", "2"]).exit_code == 0
    ((shared, existed),) = seen
    assert existed  # the workers had it while they ran
    assert Path(shared).name.startswith("advisor-metrics-")
    assert not Path(shared).exists()  # and it is gone once the server has stopped
    del os.environ["PROMETHEUS_MULTIPROC_DIR"]
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))  # a configured one is kept
    assert CliRunner().invoke(serve_command, ["--workers", "2"]).exit_code == 0
    assert os.environ["PROMETHEUS_MULTIPROC_DIR"] == str(tmp_path)


def test_json_logs_give_uvicorn_the_json_formatter(uvicorn_calls: list[dict[str, Any]]) -> None:
    assert CliRunner().invoke(serve_command, [], env={"ADVISOR_LOG_FORMAT": "json"}).exit_code == 0
    assert CliRunner().invoke(serve_command, [], env={"ADVISOR_LOG_FORMAT": "console"}).exit_code == 0
    json_call, console_call = uvicorn_calls
    config = json_call["log_config"]
    assert config["formatters"]["json"] == {"()": "advisor.server.logs.JsonFormatter"}
    assert config["loggers"]["uvicorn"]["handlers"] == ["json"]
    assert "log_config" not in console_call  # uvicorn's own default


def test_json_formatter_renders_one_object_per_record() -> None:
    import json
    import logging

    from advisor.server.logs import JsonFormatter

    record = logging.LogRecord("uvicorn.error", logging.WARNING, __file__, 1, "worker %s gone", ("12",), None)
    line = json.loads(JsonFormatter().format(record))
    assert line["event"] == "worker 12 gone"
    assert line["level"] == "warning"
    assert line["logger"] == "uvicorn.error"
    assert line["timestamp"].endswith("Z")
