"""The client side of ``advisor report weekly`` stays free of the server and science stacks."""

from __future__ import annotations

import subprocess
import sys


def test_the_report_command_imports_no_server_stack() -> None:
    code = (
        "import sys, advisor.cli.report; "
        "print(sorted(m for m in ('litestar', 'sqlalchemy', 'sklearn', 'scipy', 'pandas', 'numpy') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
