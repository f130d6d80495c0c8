"""The advisor client: :class:`AdvisorClient` over an injected ``httpx.Client``, the rendering, the
comparison and the gate the commands use, the exit codes, and the probes of ``advisor measure``.
It speaks HTTP only: nothing here imports the server, the database or the domain layer (a test
enforces it). The click commands themselves live in :mod:`advisor.cli`."""

from __future__ import annotations

from advisor.client.compare import Comparison, compare_runs
from advisor.client.exit_codes import ExitCode
from advisor.client.gate import GateResult, evaluate_gate, results_of
from advisor.client.http import DEFAULT_URL, AdvisorClient, ApiError, Rejected, ServerError, Unreachable
from advisor.client.injected import Injected

__all__ = [
    "DEFAULT_URL",
    "AdvisorClient",
    "ApiError",
    "Comparison",
    "ExitCode",
    "GateResult",
    "Injected",
    "Rejected",
    "ServerError",
    "Unreachable",
    "compare_runs",
    "evaluate_gate",
    "results_of",
]
