"""Server-side ``advisor tokens`` commands: create, list and revoke API tokens directly on the
database (ADVISOR_DATABASE_URL), on the host that runs the server. Tokens matter when the server
runs with ``ADVISOR_AUTH_MODE=token``.

Exit codes (ExitCode): 2 usage or settings, 4 refused (a bad name, an active token of that name,
an unknown or already revoked token).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

import click

from advisor.cli.database import run_on_database

if TYPE_CHECKING:
    from advisor.domain.auth import ApiTokenService, TokenOut

__all__ = ["tokens_group"]

T = TypeVar("T")


def _with_service(work: Callable[[ApiTokenService], Awaitable[T]]) -> T:
    """Run ``work(service)`` on the configured database; refusals exit 4 with the message."""
    from advisor.domain.auth import ApiTokenService

    async def with_session(sessions: Any) -> T:
        async with sessions() as session:
            return await work(ApiTokenService(session=session))

    return run_on_database(with_session)


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M") if value is not None else "-"


def _as_json(record: TokenOut, **extra: Any) -> dict[str, Any]:
    import msgspec

    return {**msgspec.to_builtins(record), **extra}


@click.group("tokens")
def tokens_group() -> None:
    """API tokens for ADVISOR_AUTH_MODE=token (on the database; only hashes are stored)."""


@tokens_group.command("create")
@click.argument("name")
@click.option(
    "--role",
    type=click.Choice(["read", "submit", "admin"]),
    default="submit",
    show_default=True,
    help="read: GET, advise, predict; submit: also store runs and SLOs; admin: also catalog and model fit.",
)
@click.option("--expires-days", type=click.IntRange(min=1), default=None, help="Expire after N days (default never).")
@click.option("--json", "as_json", is_flag=True, help="Print the token and its record as JSON.")
def create_command(name: str, role: str, expires_days: int | None, as_json: bool) -> None:
    """Create a token called NAME and print it once: it cannot be shown again.

    The token alone goes to stdout (TOKEN=$(advisor tokens create ci --role submit)); the rest to stderr.
    """

    async def work(service: ApiTokenService) -> tuple[TokenOut, str]:
        return await service.create_token(name, role, expires_days=expires_days)  # type: ignore[arg-type]

    record, token = _with_service(work)
    if as_json:
        click.echo(json.dumps(_as_json(record, token=token), indent=2, default=str))
        return
    click.echo(token)
    expiry = f", expires {_when(record.expires_at)} UTC" if record.expires_at else ""
    click.echo(
        f"created token {record.id} {record.name!r} (role {record.role}{expiry}); store it now, "
        "it is not shown again. Clients send it as ADVISOR_TOKEN or --token.",
        err=True,
    )


@tokens_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the tokens as JSON.")
def list_command(as_json: bool) -> None:
    """Every token with its role and status (never the token: only its hash is stored)."""

    async def work(service: ApiTokenService) -> list[TokenOut]:
        return await service.tokens()

    tokens = _with_service(work)
    if as_json:
        click.echo(json.dumps([_as_json(t) for t in tokens], indent=2, default=str))
        return
    if not tokens:
        click.echo("no tokens (create one with: advisor tokens create NAME --role submit)")
        return
    header = ("id", "name", "role", "status", "created", "last used", "expires")
    rows = [
        (str(t.id), t.name, t.role, t.status, _when(t.created_at), _when(t.last_used_at), _when(t.expires_at))
        for t in tokens
    ]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        click.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


@tokens_group.command("revoke")
@click.argument("name_or_id")
def revoke_command(name_or_id: str) -> None:
    """Revoke a token by id or by name. Servers stop accepting it within a few seconds (their cache)."""

    async def work(service: ApiTokenService) -> TokenOut:
        return await service.revoke(name_or_id)

    record = _with_service(work)
    click.echo(f"revoked token {record.id} {record.name!r} (role {record.role})")
