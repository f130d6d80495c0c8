"""The ``advisor`` command line: one tool for the server side (serve, db, catalog load, tokens) and
the client side (submit, advise, predict, measure...), one module per command or group.

The root group loads a command's module only when that command runs (click's documented "lazy
loading of subcommands" pattern): ``advisor submit --help`` imports the submit module and the
client package, never the server stack (Litestar, SQLAlchemy) or the ML stack (scikit-learn).
Exit codes are :class:`advisor.client.exit_codes.ExitCode`.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from typing import Any

import click

from advisor import __version__
from advisor.client.exit_codes import ExitCode, exit_codes_help

__all__ = ["COMMANDS", "LazyGroup", "cli", "main"]

#: Every top-level command: name -> "module:attribute", imported on first use.
COMMANDS: dict[str, str] = {
    # client side: over HTTP, to a running advisor
    "submit": "advisor.cli.submit:submit_command",
    "advise": "advisor.cli.submit:advise_command",
    "predict": "advisor.cli.predict:predict_command",
    "compare": "advisor.cli.compare:compare_command",
    "runs": "advisor.cli.runs:runs_group",  # and `runs reparse`, on the database
    "rules": "advisor.cli.rules:rules_group",
    "model": "advisor.cli.model:model_group",  # and `--db`, `activate`, `rollback`, on the database
    "catalog": "advisor.cli.catalog:catalog_group",  # and `catalog load`, on the database
    "measure": "advisor.cli.measure:measure_command",
    "report": "advisor.cli.report:report_group",  # and `--db`, on the database
    # server side: on the database, on the host that runs the server
    "serve": "advisor.cli.serve:serve_command",
    "db": "advisor.cli.db:db_group",
    "tokens": "advisor.cli.tokens:tokens_group",
}


class LazyGroup(click.Group):
    """A group whose subcommands are ``"module:attribute"`` strings, imported when asked for."""

    def __init__(self, *args: Any, lazy_commands: Mapping[str, str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy_commands and cmd_name not in self.commands:
            self.add_command(self._load(cmd_name), cmd_name)
        return super().get_command(ctx, cmd_name)

    def _load(self, name: str) -> click.Command:
        module_name, _, attribute = self.lazy_commands[name].partition(":")
        command = getattr(importlib.import_module(module_name), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{self.lazy_commands[name]} is not a click command")
        return command


_EPILOG = f"""{exit_codes_help()}

\b
Client commands read ADVISOR_URL (default http://127.0.0.1:8000) and
ADVISOR_TOKEN, or --url/--token. See docs/cli.md.
"""


@click.group(
    cls=LazyGroup,
    lazy_commands=COMMANDS,
    epilog=_EPILOG,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(__version__, prog_name="advisor")
def cli() -> None:
    """advisor: LLM serving configuration advisor."""


def main() -> None:
    try:
        cli.main(standalone_mode=True)
    except Exception as exc:
        # A bad setting read outside a command's own check (the app `serve` starts) is a usage
        # error too. advisor.settings is the server stack: only consult it when it is loaded.
        settings = sys.modules.get("advisor.settings")
        if settings is None or not isinstance(exc, settings.SettingsError):
            raise
        click.echo(f"advisor: {exc}", err=True)
        sys.exit(ExitCode.USAGE)
