"""The client commands start at once: they import neither the server stack (Litestar, SQLAlchemy,
advanced-alchemy, pydantic-settings) nor the ML stack (scikit-learn, SciPy, pandas, skops).

Each check runs in a fresh interpreter, since this test process has long imported everything.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import click
import pytest

from advisor.cli import COMMANDS, cli
from advisor.client.exit_codes import DESCRIPTIONS, ExitCode

#: Top-level packages a client command must not load.
HEAVY = ("litestar", "sqlalchemy", "advanced_alchemy", "pydantic_settings", "sklearn", "scipy", "pandas", "skops")
#: advisor packages that belong to the server side.
SERVER_SIDE = ("advisor.server", "advisor.db", "advisor.domain", "advisor.settings", "advisor.ml")

CLIENT_COMMANDS = ("submit", "advise", "predict", "compare", "runs", "rules", "measure", "model", "catalog")

# Runs the CLI in-process with standalone_mode=False, then prints what it imported.
_PROBE = textwrap.dedent(
    """
    import json, sys
    from advisor.cli import cli
    try:
        cli.main(sys.argv[1:], prog_name="advisor", standalone_mode=False)
    except SystemExit:
        pass
    print(json.dumps(sorted(sys.modules)))
    """
)


def _loaded_by(*args: str, code: str = _PROBE) -> list[str]:
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    modules: list[str] = json.loads(done.stdout.splitlines()[-1])
    return modules


def _offenders(modules: list[str]) -> list[str]:
    return sorted(
        m for m in modules if m.split(".")[0] in HEAVY or any(m == s or m.startswith(s + ".") for s in SERVER_SIDE)
    )


@pytest.mark.parametrize(
    "args",
    [[name, "--help"] for name in CLIENT_COMMANDS]
    + [["runs", "list", "--help"], ["model", "fit", "--help"], ["catalog", "list", "--help"]],
    ids=" ".join,
)
def test_client_commands_import_neither_the_server_nor_the_ml_stack(args: list[str]) -> None:
    modules = _loaded_by(*args)
    assert f"advisor.cli.{COMMANDS[args[0]].split(':')[0].rsplit('.', 1)[1]}" in modules  # the command ran
    assert _offenders(modules) == []


def test_the_help_of_one_command_imports_only_its_module() -> None:
    loaded = {m for m in _loaded_by("submit", "--help") if m.startswith("advisor.cli.")}
    assert loaded == {"advisor.cli.submit", "advisor.cli.client", "advisor.cli.options"}


def test_python_m_advisor_cli_submit_help_under_importtime() -> None:
    """The real entry path, ``python -X importtime -m advisor.cli``: no heavy import on stderr."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "advisor.cli", "submit", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Usage: python -m advisor.cli submit" in done.stdout
    imported = [line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")]
    # importlib.import_module (the lazy group) is not logged, the imports the module makes are.
    assert "advisor.cli.options" in imported
    assert _offenders(imported) == []


def test_running_submit_stays_light(tmp_path: Path) -> None:
    """Not only the help: a submission with K=V options (parsed by advisor.canonical) and the
    rendering of the answer load nothing heavy either."""
    from tests.unit.client.fakes import RESULT

    result = tmp_path / "result.json"
    result.write_text(json.dumps({"metrics": {"decode_tok_s": 20.8}}))
    code = textwrap.dedent(
        f"""
        import json, sys
        import httpx
        from click.testing import CliRunner
        from advisor.cli import cli
        from advisor.client import Injected

        answer = {json.dumps(RESULT)!r}
        http = httpx.Client(
            transport=httpx.MockTransport(lambda request: httpx.Response(201, text=answer)),
            base_url="http://advisor.test",
        )
        args = ["submit", {str(result)!r}, "--label", "git_sha=abc", "--engine-arg", "max_num_seqs=64", "-o", "md"]
        out = CliRunner().invoke(cli, args, obj=Injected(advisor=http), catch_exceptions=False)
        assert out.exit_code == 0, out.output
        assert "PRE002" in out.output
        print(json.dumps(sorted(sys.modules)))
        """
    )
    modules = _loaded_by(code=code)
    assert "advisor.canonical" in modules
    assert _offenders(modules) == []


def test_the_command_table_names_every_command() -> None:
    ctx = click.Context(cli)
    for name in COMMANDS:
        command = cli.get_command(ctx, name)
        assert command is not None and command.name == name
    assert cli.get_command(ctx, "no-such-command") is None
    assert set(cli.list_commands(ctx)) == set(COMMANDS)


def test_the_exit_code_table_in_the_docs_is_the_definition() -> None:
    """docs/cli.md's table rows are ``| code | description |`` from advisor.client.exit_codes."""
    docs = (Path(__file__).resolve().parents[3] / "docs" / "cli.md").read_text(encoding="utf-8")
    section = docs.split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert rows == [f"| {code.value} | {DESCRIPTIONS[code]} |" for code in ExitCode]
