"""The ``advisor`` command line: one tool for the server side (serve, db, catalog) and the client
side (submit, advise, predict, measure...).

Exit codes are a contract (docs/cli.md):
0 success/pass · 1 the gate failed · 2 usage error · 3 server unreachable or 5xx · 4 input rejected (4xx).
"""

from __future__ import annotations

import sys

import click

from advisor import __version__
from advisor.cli.admin_commands import runs_reparse_command
from advisor.cli.model_commands import extend_model_group
from advisor.cli.server_commands import catalog_group, db_group, serve_command
from advisor.cli.token_commands import tokens_group
from advisor.client.commands import CLIENT_COMMANDS, model_group, runs_group
from advisor.settings import SettingsError

__all__ = ["EXIT_GATE", "EXIT_OK", "EXIT_REJECTED", "EXIT_UNREACHABLE", "EXIT_USAGE", "cli", "main"]

EXIT_OK = 0
EXIT_GATE = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_REJECTED = 4

_EPILOG = """\b
Exit codes:
  0  success / the gate passed
  1  the gate failed (--fail-on / --fail-on-verdict)
  2  usage error (bad option, bad setting, missing file)
  3  server unreachable, or it answered 5xx
  4  input rejected (the server answered 4xx)

\b
Client commands read ADVISOR_URL (default http://127.0.0.1:8000) and
ADVISOR_TOKEN, or --url/--token. See docs/cli.md.
"""


@click.group(epilog=_EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="advisor")
def cli() -> None:
    """advisor: LLM serving configuration advisor."""


cli.add_command(serve_command)
cli.add_command(db_group)
cli.add_command(catalog_group)
cli.add_command(tokens_group)
for _command in CLIENT_COMMANDS:
    cli.add_command(_command)
# `runs reparse` works on the database, beside the client's `runs list|show|raw`.
runs_group.add_command(runs_reparse_command)
# `model fit|list --db`, `model activate|rollback` work on the database beside the client's commands.
extend_model_group(model_group)


def main() -> None:
    try:
        cli.main(standalone_mode=True)
    except SettingsError as exc:
        click.echo(f"advisor: {exc}", err=True)
        sys.exit(EXIT_USAGE)
