"""An installed wheel carries what the source tree has beside the package: migrations and rule data."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_wheel_ships_migrations_rules_and_catalog_data(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", str(tmp_path)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("llm_advisor-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "advisor/_migrations/env.py" in names
    assert any(n.startswith("advisor/_migrations/versions/") and n.endswith(".py") for n in names)
    assert "advisor/_rules_data/thresholds.toml" in names
    assert any(n.startswith("advisor/_rules_data/cases/") for n in names)
    assert "advisor/catalog/data/hardware.csv" in names
    # The web pages' templates and vendored assets.
    assert {"advisor/templates/base.html", "advisor/templates/web/run.html", "advisor/static/advisor.css"} <= names
    # Test tooling (the ingest golden-file tool reads the repository's fixtures) stays out.
    assert not any("golden" in n or n.startswith("tests/") for n in names)
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "advisor = advisor.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()
