"""Benchmark: advise in-process (DESIGN §8: ≤ 2 ms per run).

Builds a context for each of a set of realistic runs (the scenario runs: real catalog, physics and
the physics prior in place), then times ``advise`` over them, and separately ``build_context`` +
``advise`` (the full pure path after ingest). Prints µs/run and exits 1 when advise exceeds the bar.

    .venv/bin/python bench/advise.py [--seconds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from advisor.canonical import SLO, decode_run
from advisor.rules import advise, build_context, get_rules
from tests.scenarios.test_scenarios import SCENARIOS

BAR_US = 2000.0


def _time(fn: Callable[[Any], object], items: Sequence[Any], seconds: float) -> list[float]:
    """µs per item for repeated passes over ``items`` until ``seconds`` have elapsed."""
    samples: list[float] = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        start = time.perf_counter()
        for item in items:
            fn(item)
        samples.append((time.perf_counter() - start) / len(items) * 1e6)
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=3.0, help="time budget per measurement")
    args = parser.parse_args()

    get_rules()  # discovery and thresholds load once, as in a long-running server
    inputs = [
        (decode_run(s.run), SLO(**s.slo) if s.slo else None, [decode_run(b) for b in s.baseline]) for s in SCENARIOS
    ]
    contexts = [build_context(run, slo=slo, baseline_runs=base) for run, slo, base in inputs]
    assert all(c.expectations is not None for c in contexts if c.roofline is not None)

    advise_us = _time(advise, list(contexts), args.seconds)
    full_us = _time(lambda i: advise(build_context(i[0], slo=i[1], baseline_runs=i[2])), list(inputs), args.seconds)

    print(f"runs: {len(contexts)} scenarios, {len(get_rules())} rules")
    print(f"advise(ctx):            median {statistics.median(advise_us):8.1f} µs/run  (best {min(advise_us):.1f})")
    print(f"build_context + advise: median {statistics.median(full_us):8.1f} µs/run  (best {min(full_us):.1f})")
    ok = statistics.median(advise_us) <= BAR_US
    print(f"bar ≤ {BAR_US:.0f} µs/run: {'ok' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
