"""A server worker imports what serving needs, not the CLI or the ML stack."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("advisor.cli", "sklearn", "scipy", "pandas", "skops", "playwright")


def test_the_worker_entry_point_imports_neither_the_cli_nor_the_ml_stack() -> None:
    code = (
        "import json, sys; import advisor.server.asgi; "
        f"print(json.dumps([m for m in {list(HEAVY)!r} if m in sys.modules]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        env={"ADVISOR_DATABASE_URL": "sqlite+aiosqlite:///:memory:", "ADVISOR_LOG_LEVEL": "warning", "PATH": ""},
    )
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
