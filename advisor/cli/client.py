"""What every client command does around its own work: the :class:`AdvisorClient` (built from
``--url`` or injected), API errors mapped onto the exit codes, output, and the CI gate.

API errors become :class:`CommandFailed` with exit code 3 (unreachable or 5xx) or
:class:`InputRejected` with 4 (rejected, 4xx); click's own usage errors exit 2; a failed gate exits 1.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

from advisor.client.clock import SYSTEM_CLOCK, Clock
from advisor.client.exit_codes import ExitCode
from advisor.client.gate import evaluate_gate
from advisor.client.http import AdvisorClient, ApiError, Rejected
from advisor.client.injected import Injected

if TYPE_CHECKING:
    import httpx

__all__ = [
    "CommandFailed",
    "InputRejected",
    "emit",
    "exit_on_gate",
    "handle_errors",
    "injected_clock",
    "injected_target",
    "make_client",
    "write_step_summary",
]

F = TypeVar("F", bound=Callable[..., Any])


class CommandFailed(click.ClickException):
    """The server could not be reached or failed (exit 3); printed as ``advisor: <message>``."""

    exit_code = ExitCode.UNREACHABLE

    def show(self, file: Any = None) -> None:
        click.echo(f"advisor: {self.format_message()}", err=True)


class InputRejected(CommandFailed):
    """The server rejected the input with a 4xx (exit 4)."""

    exit_code = ExitCode.REJECTED


def handle_errors(func: F) -> F:
    """Map client exceptions onto the exit-code contract."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except Rejected as exc:
            raise InputRejected(_describe(exc)) from exc
        except ApiError as exc:
            raise CommandFailed(_describe(exc)) from exc

    return cast(F, wrapper)


def _describe(exc: ApiError) -> str:
    text = exc.message
    problem = exc.problem
    if problem.get("field") and str(problem["field"]) not in text:
        text += f" (field: {problem['field']})"
    matches = problem.get("matches")
    if matches and "did you mean" not in text:
        text += f"; did you mean {', '.join(map(str, matches))}?"
    return text


def _injected(ctx: click.Context) -> Injected:
    obj = ctx.find_object(Injected)
    return obj if obj is not None else Injected()


def make_client(ctx: click.Context, url: str | None, token: str | None, timeout: float, retries: int) -> AdvisorClient:
    injected = _injected(ctx)
    if injected.advisor is not None:
        client = AdvisorClient(injected.advisor, retries=retries)
        if injected.sleep is not None:
            client.sleep = injected.sleep
        return client
    return AdvisorClient.connect(url, token, timeout=timeout, retries=retries)


def injected_target(ctx: click.Context) -> httpx.Client | None:
    return _injected(ctx).target


def injected_clock(ctx: click.Context) -> Clock:
    """The clock ``measure`` reads: the injected one, else the real one."""
    clock = _injected(ctx).clock
    return clock if clock is not None else SYSTEM_CLOCK


def emit(text: str) -> None:
    if text:
        click.echo(text)


def write_step_summary(markdown: str) -> None:
    """GitHub shows ``$GITHUB_STEP_SUMMARY`` on the run page: the Markdown report goes there."""
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if path:
        with Path(path).open("a", encoding="utf-8") as fh:
            fh.write(markdown + "\n\n")


def exit_on_gate(
    ctx: click.Context, /, results: Sequence[Mapping[str, Any]], fail_on: str | None, verdict: str | None
) -> None:
    """Exit 1 with the reasons on stderr when the results fail ``--fail-on``/``--fail-on-verdict``."""
    gate = evaluate_gate(results, fail_on=fail_on, fail_on_verdict=verdict)
    if gate.failed:
        for reason in gate.reasons:
            click.echo(f"advisor: gate failed: {reason}", err=True)
        ctx.exit(ExitCode.GATE)
