"""The server-side ``advisor model`` commands on SQLite and Postgres (ADVISOR_DATABASE_URL)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from click.testing import CliRunner

from advisor.cli import cli
from advisor.domain.models import provider
from advisor.settings import get_settings


@pytest.fixture
def runner(clean_db: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[CliRunner]:
    monkeypatch.setenv("ADVISOR_DATABASE_URL", clean_db)
    get_settings.cache_clear()
    provider.reset()
    yield CliRunner()
    get_settings.cache_clear()
    provider.reset()


def test_fit_list_activate_rollback_on_the_database(runner: CliRunner) -> None:
    fitted = runner.invoke(cli, ["model", "fit", "--db", "--no-cv", "--notes", "from the cli", "--json"])
    assert fitted.exit_code == 0, fitted.output
    job = json.loads(fitted.stdout)
    assert job["status"] == "succeeded" and job["params"]["trigger"] == "cli"
    version = job["result"]["version"]
    assert job["result"]["activated"] is False

    listed = runner.invoke(cli, ["model", "list", "--db", "--json"])
    assert listed.exit_code == 0, listed.output
    versions = json.loads(listed.stdout)
    assert [(v["version"], v["is_active"], v["notes"]) for v in versions] == [(version, False, "from the cli")]

    activated = runner.invoke(cli, ["model", "activate", version])
    assert activated.exit_code == 0, activated.output
    assert f"active: {version}" in activated.output
    assert json.loads(runner.invoke(cli, ["model", "list", "--db", "--json"]).stdout)[0]["is_active"] is True

    rolled = runner.invoke(cli, ["model", "rollback"])
    assert rolled.exit_code == 0 and "active: the physics prior" in rolled.output


def test_fit_shows_the_cross_validated_table(runner: CliRunner) -> None:
    fitted = runner.invoke(cli, ["model", "fit", "--db", "--activate"])
    assert fitted.exit_code == 0, fitted.output
    out = fitted.stdout
    assert "fitted version" in out and "— active" in out
    assert "hardware" in out and "source" in out and "roofline" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["model", "activate", "20990101-000000-deadbeef"], "no fitted model version"),
        (["model", "rollback"], "nothing to roll back"),
    ],
)
def test_refusals_exit_4(runner: CliRunner, args: list[str], message: str) -> None:
    result = runner.invoke(cli, args)
    assert result.exit_code == 4
    assert message in result.output


def test_a_failed_fit_exits_1(runner: CliRunner) -> None:
    result = runner.invoke(cli, ["model", "fit", "--db", "--no-cv", "--no-public"])
    assert result.exit_code == 1
    assert "not enough decode_tok_s observations" in result.output


def test_without_db_the_client_command_runs(runner: CliRunner) -> None:
    # no server listens there: the client's exit code for an unreachable server
    result = runner.invoke(cli, ["model", "list", "--url", "http://127.0.0.1:9", "--retries", "0"])
    assert result.exit_code == 3
