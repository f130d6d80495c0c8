"""Compare two runs: what changed in the setup and workload, and which metrics moved beyond noise.

The seed's rule is "change one thing at a time": when several setup fields differ, a metric that
moved cannot be credited to any one of them, and the comparison says so.

Noise is a relative band around A. Central statistics (mean, p50, rates) use ``noise``; upper
tails are noisier with the same number of requests, so p90/p95 use twice it and p99 and beyond
three times. A change also has to exceed a small absolute floor (0.5 ms, 0.5 tok/s), so a move from
0.2 ms to 0.4 ms is not reported as +100%.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Change", "Comparison", "MetricMove", "compare_runs", "flatten"]

_TAIL_FACTOR = {"p90": 2.0, "p95": 2.0, "p99": 3.0, "p99_9": 3.0, "max": 3.0}
#: Metric families where a higher value is better; every other metric is a latency or a pressure.
_HIGHER_IS_BETTER = (
    "decode_tok_s",
    "prefill_tok_s",
    "output_throughput_tok_s",
    "input_throughput_tok_s",
    "total_throughput_tok_s",
    "request_throughput_rps",
    "prefix_cache_hit_rate",
    "requests_completed",
)
#: Counts and bookkeeping that say how the benchmark ran, not how fast the server was.
_NOT_PERFORMANCE = ("requests_completed", "requests_failed", "duration_s", "std", "min")
_ABS_FLOOR = 0.5
_RATIO_FLOOR = 0.01


@dataclass(frozen=True)
class Change:
    path: str
    a: Any
    b: Any


@dataclass(frozen=True)
class MetricMove:
    metric: str
    a: float
    b: float
    relative: float | None
    noise: float
    moved: bool
    better: bool | None

    @property
    def verdict(self) -> str:
        if not self.moved:
            return "noise"
        return "better" if self.better else "worse"


@dataclass
class Comparison:
    run_a: int | None
    run_b: int | None
    setup_changes: list[Change] = field(default_factory=list)
    workload_changes: list[Change] = field(default_factory=list)
    moves: list[MetricMove] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def moved(self) -> list[MetricMove]:
        return [m for m in self.moves if m.moved]

    @property
    def regressions(self) -> list[MetricMove]:
        return [m for m in self.moves if m.moved and m.better is False]

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_a": self.run_a,
            "run_b": self.run_b,
            "setup_changes": [c.__dict__ for c in self.setup_changes],
            "workload_changes": [c.__dict__ for c in self.workload_changes],
            "metrics": [{**m.__dict__, "verdict": m.verdict} for m in self.moves],
            "notes": list(self.notes),
        }


def flatten(doc: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts as dotted paths; empty dicts vanish, lists stay values."""
    out: dict[str, Any] = {}
    for key, value in doc.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, path + "."))
        elif value is not None:
            out[path] = value
    return out


def _diff(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[Change]:
    fa, fb = flatten(a), flatten(b)
    return [Change(k, fa.get(k), fb.get(k)) for k in sorted(set(fa) | set(fb)) if fa.get(k) != fb.get(k)]


def _noise_for(path: str, noise: float) -> float:
    stat = path.rsplit(".", 1)[-1]
    return noise * _TAIL_FACTOR.get(stat, 1.0)


def compare_runs(a: Mapping[str, Any], b: Mapping[str, Any], *, noise: float = 0.05) -> Comparison:
    """Compare stored runs ``a`` (before) and ``b`` (after), as ``GET /runs/{id}`` returns them."""
    comparison = Comparison(run_a=a.get("id"), run_b=b.get("id"))
    comparison.setup_changes = _diff(a.get("setup") or {}, b.get("setup") or {})
    comparison.workload_changes = _diff(a.get("workload") or {}, b.get("workload") or {})
    ma, mb = flatten(a.get("metrics") or {}), flatten(b.get("metrics") or {})
    for path in sorted(set(ma) & set(mb)):
        va, vb = ma[path], mb[path]
        if isinstance(va, bool) or isinstance(vb, bool):
            continue
        if not isinstance(va, int | float) or not isinstance(vb, int | float):
            continue
        if any(part in _NOT_PERFORMANCE for part in path.split(".")):
            continue
        band = _noise_for(path, noise)
        relative = (vb - va) / va if va else None
        is_ratio = path.endswith(("kv_cache_usage_mean", "kv_cache_usage_max", "prefix_cache_hit_rate"))
        floor = _RATIO_FLOOR if is_ratio else _ABS_FLOOR
        beyond = abs(vb - va) > floor and (relative is None or abs(relative) > band)
        family = path.split(".", 1)[0]
        better = (vb > va) == (family in _HIGHER_IS_BETTER) if beyond else None
        comparison.moves.append(MetricMove(path, float(va), float(vb), relative, band, beyond, better))

    setup_paths = {c.path.split(".", 1)[0] for c in comparison.setup_changes}
    if len(comparison.setup_changes) > 1:
        comparison.notes.append(
            f"{len(comparison.setup_changes)} setup fields changed ({', '.join(sorted(setup_paths))}): "
            "a metric that moved cannot be credited to one of them; change one thing at a time"
        )
    if comparison.workload_changes:
        comparison.notes.append(
            "the workload changed too ("
            + ", ".join(c.path for c in comparison.workload_changes)
            + "): part of any move is the traffic, not the server"
        )
    if not comparison.setup_changes and not comparison.workload_changes and comparison.moved:
        comparison.notes.append(
            "same setup and workload, yet metrics moved beyond noise: check the benchmark's stability "
            "(request count, warm-up) or the host"
        )
    return comparison
