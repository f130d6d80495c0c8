"""Response shapes of the system endpoints (health probes, formats)."""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["DatabaseHealth", "FormatOut", "Health", "Probe"]


class DatabaseHealth(msgspec.Struct):
    reachable: bool
    backend: str
    revision: str | None
    head: str | None
    up_to_date: bool
    error: str | None = None
    #: A write would succeed (not locked beyond a short bound, not read-only).
    writable: bool | None = None


class Health(msgspec.Struct, omit_defaults=True):
    """``status`` for everyone; the details only in auth mode ``none`` or for a valid token."""

    status: str
    database: DatabaseHealth | None = None
    versions: dict[str, str] | None = None
    model: dict[str, Any] | None = None


class Probe(msgspec.Struct, omit_defaults=True):
    status: str
    reason: str | None = None


class FormatOut(msgspec.Struct):
    format_id: str
    description: str
