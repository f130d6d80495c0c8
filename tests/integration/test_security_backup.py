"""Issue #18 item 6: ``advisor db backup`` / ``advisor db restore`` round trip on SQLite (online
backup API), and a clear pointer to pg_dump / pg_restore on Postgres."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from litestar.testing import TestClient

from advisor.cli import cli
from advisor.db import migrate
from advisor.server import create_app
from advisor.settings import DatabaseSettings, ServerSettings, Settings, get_settings
from tests.integration.test_runs_api import CANONICAL, _counts


@pytest.fixture
def runner() -> Iterator[CliRunner]:
    get_settings.cache_clear()
    yield CliRunner()
    get_settings.cache_clear()


def _submit(url: str, label: str) -> None:
    body = copy.deepcopy(CANONICAL)
    body["labels"] = {"attempt": label}
    settings = Settings(db=DatabaseSettings(url=url), server=ServerSettings(log_level="warning"))  # type: ignore[arg-type]
    with TestClient(app=create_app(settings)) as client:
        assert client.post("/api/v1/runs", json=body).status_code == 201


def test_backup_and_restore_round_trip(tmp_path: Path, runner: CliRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'advisor.db'}"
    migrate.upgrade(DatabaseSettings(url=url))
    monkeypatch.setenv("ADVISOR_DATABASE_URL", url)
    _submit(url, "before-backup")
    backup = tmp_path / "backup.db"
    done = runner.invoke(cli, ["db", "backup", str(backup)])
    assert done.exit_code == 0, done.output
    assert f"to {backup}" in done.output
    assert runner.invoke(cli, ["db", "backup", str(backup)]).exit_code == 2  # never overwrites

    _submit(url, "after-backup")
    assert _counts(url)["run"] == 2
    restored = runner.invoke(cli, ["db", "restore", str(backup), "--yes"])
    assert restored.exit_code == 0, restored.output
    assert _counts(url) == {
        "run": 1,
        "raw_payload": 1,
        "recommendation": _counts(f"sqlite+aiosqlite:///{backup}")["recommendation"],
        "deployment": 1,
    }
    _submit(url, "after-restore")  # the restored database takes writes
    assert _counts(url)["run"] == 2


def test_restore_refuses_a_file_that_is_not_a_backup(
    tmp_path: Path, runner: CliRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'advisor.db'}"
    migrate.upgrade(DatabaseSettings(url=url))
    monkeypatch.setenv("ADVISOR_DATABASE_URL", url)
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database" * 100)
    refused = runner.invoke(cli, ["db", "restore", str(junk), "--yes"])
    assert refused.exit_code == 4, refused.output
    assert "is not an advisor SQLite backup" in refused.output


def test_postgres_points_to_pg_dump(runner: CliRunner, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ADVISOR_DATABASE_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/advisor")
    result = runner.invoke(cli, ["db", "backup", str(tmp_path / "x.db")])
    assert result.exit_code == 2
    assert "pg_dump --format=custom" in result.output
