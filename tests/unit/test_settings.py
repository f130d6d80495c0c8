from __future__ import annotations

import subprocess
import sys

import pytest

from advisor.settings import DatabaseSettings, ServerSettings, SettingsError, get_settings


def test_defaults_are_embedded_sqlite() -> None:
    assert DatabaseSettings(url="sqlite:///./x.db").url == "sqlite+aiosqlite:///./x.db"
    assert DatabaseSettings(url="postgresql://u@h/db").url == "postgresql+asyncpg://u@h/db"


def test_bad_database_url_rejected() -> None:
    with pytest.raises(ValueError, match="sqlite"):
        DatabaseSettings(url="mysql://root@localhost/x")


def test_malformed_setting_is_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ADVISOR_PORT", "eighty")
    get_settings.cache_clear()
    try:
        with pytest.raises(SettingsError, match=r"ADVISOR_PORT='eighty'"):
            get_settings()
    finally:
        get_settings.cache_clear()


def test_cli_exits_2_with_one_line_on_bad_setting() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "advisor", "db", "current"],
        env={"ADVISOR_WORKERS": "0", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "ADVISOR_WORKERS" in lines[0]


def test_server_settings_bounds() -> None:
    assert ServerSettings(port=8080).port == 8080
    with pytest.raises(ValueError):
        ServerSettings(port=0)
