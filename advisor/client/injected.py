"""What tests and embedding programs inject into the client commands instead of the real thing,
through the click context object: ``CliRunner().invoke(cli, args, obj=Injected(advisor=test_client))``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx

    from advisor.client.clock import Clock

__all__ = ["Injected"]


@dataclass
class Injected:
    """HTTP clients to use instead of building them from ``--url`` (the advisor) and ``URL`` (the
    server ``measure`` probes), the retries' sleep, and the clock ``measure`` times requests with."""

    advisor: httpx.Client | None = None
    target: httpx.Client | None = None
    sleep: Callable[[float], None] | None = None
    clock: Clock | None = None
