"""Roles and the public view of a token (never the token itself)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal, get_args

import msgspec

__all__ = ["ROLES", "Role", "TokenOut", "role_allows"]

Role = Literal["read", "submit", "admin"]
#: Ordered, weakest first: a role allows everything the roles before it allow.
ROLES: tuple[Role, ...] = get_args(Role)
_RANK: dict[str, int] = {role: rank for rank, role in enumerate(ROLES)}


def role_allows(held: str, needed: str) -> bool:
    """Whether a token with role ``held`` may do what needs ``needed``; unknown roles allow nothing."""
    return held in _RANK and _RANK[held] >= _RANK[needed]


class TokenOut(msgspec.Struct, kw_only=True):
    """A stored token as ``advisor tokens list`` shows it."""

    id: int
    name: str
    role: str
    status: Literal["active", "expired", "revoked"]
    created_at: datetime
    last_used_at: datetime | None
    expires_at: datetime | None
    revoked_at: datetime | None
