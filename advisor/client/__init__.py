"""The advisor client: :class:`AdvisorClient` over an injected ``httpx.Client``, the client-side
CLI commands, and ``advisor measure``. It speaks HTTP only: nothing here imports the server, the
database or the domain layer (a test enforces it)."""

from __future__ import annotations

from advisor.client.compare import Comparison, compare_runs
from advisor.client.gate import GateResult, evaluate_gate, results_of
from advisor.client.http import DEFAULT_URL, AdvisorClient, ApiError, Rejected, ServerError, Unreachable
from advisor.client.options import CommandFailed, Injected

__all__ = [
    "DEFAULT_URL",
    "AdvisorClient",
    "ApiError",
    "CommandFailed",
    "Comparison",
    "GateResult",
    "Injected",
    "Rejected",
    "ServerError",
    "Unreachable",
    "compare_runs",
    "evaluate_gate",
    "results_of",
]
