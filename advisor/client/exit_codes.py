"""The exit codes of every ``advisor`` command, defined once: client and server-side commands
import them from here; the root help's epilog and the table in docs/cli.md are derived from them
(a test keeps the table in step).

A light module (the standard library only), so importing it keeps a client command fast.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["DESCRIPTIONS", "ExitCode", "exit_codes_help"]


class ExitCode(IntEnum):
    """The exit-code contract: CI scripts branch on it, so a code never changes meaning."""

    OK = 0
    GATE = 1
    USAGE = 2
    UNREACHABLE = 3
    REJECTED = 4


DESCRIPTIONS: dict[ExitCode, str] = {
    ExitCode.OK: "success / the gate passed",
    ExitCode.GATE: "the gate failed: --fail-on, --fail-on-verdict, --fail-on-regression (or a fit failed)",
    ExitCode.USAGE: "usage error (bad option, bad setting, missing file)",
    ExitCode.UNREACHABLE: "server unreachable, or it answered 5xx",
    ExitCode.REJECTED: "input rejected (the server answered 4xx, or the database refused)",
}


def exit_codes_help() -> str:
    """The exit codes as click help text (``\\b`` keeps click from rewrapping the lines)."""
    return "\b\nExit codes:\n" + "\n".join(f"  {code.value}  {DESCRIPTIONS[code]}" for code in ExitCode)
