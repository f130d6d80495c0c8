"""Benchmark: the analysis of one resolved run, in process (issue #19: the CPU of ``POST /api/v1/runs``).

What a submission pays after resolution and before the store: :func:`advisor.domain.runs.analysis.analyse_run`
(the rule context: physics, engine config, expectations, baseline; every rule; ranking; the stored
analysis). Runs are distinct, drawn from six setups (four runtimes, five GPUs, dense and MoE, bf16,
fp8 and GGUF) in the shape ``bench/ingest.lua`` posts, with a varying set of optional metrics so that
rules fire and pass; each run's baseline is the up to 20 earlier points of its cell, as the server's
baseline cache gives them (:class:`BaselinePoint` newest first).

Timing is CPU time (``time.process_time``) per pass over the runs, so that other work on the shared
cores disturbs it little; the first pass is separate (cold caches), the rest are warm. ``--digest``
prints a SHA-256 of every run's full analysis (verdict, recommendations, stored analysis), the same
for two trees exactly when their analyses are; ``--profile`` prints cProfile's top functions.

``--ab DIR`` compares this tree with the tree in ``DIR`` on a busy machine: one worker process per
tree (each imports its own tree's ``advisor``, with these same runs), their warm passes alternating
one by one (which tree goes first alternates too), so that the machine's load falls on both alike;
it prints each tree's passes and the after ÷ before ratio of each adjacent pair.

    .venv/bin/python -m bench.analysis [--runs 5000] [--passes 5] [--digest] [--profile N]
    .venv/bin/python -m bench.analysis --ab /tmp/before [--runs 5000] [--shape ingest] [--passes 10]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import hashlib
import json
import pstats
import random
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from advisor.canonical import SLO, CanonicalRun, decode_run
from advisor.catalog import Catalog
from advisor.domain.runs.analysis import RunAnalysis, analyse_run
from advisor.domain.runs.resolution import ResolvedRun, resolve_run
from advisor.ingest.submission import SubmissionContext
from advisor.ml.prior import prior_expectations
from advisor.rules import get_rules
from advisor.rules.context import BaselinePoint, baseline_point
from bench._common import canonical_run

__all__ = ["SETUPS", "analyse_all", "digest", "main", "make_inputs"]

#: Six setups a fleet might post thousands of runs of: (setup, decode tok/s range per stream).
SETUPS: tuple[tuple[dict[str, Any], tuple[float, float]], ...] = (
    (
        {
            "runtime": "vllm",
            "hardware": "nvidia-a10g",
            "model": "llama-3.1-8b",
            "quantization": "bf16",
            "engine_args": {"enable_prefix_caching": True, "max_num_batched_tokens": 2048},
        },
        (20.0, 34.0),
    ),
    (
        {
            "runtime": "vllm",
            "hardware": "nvidia-l40s",
            "model": "llama-3.1-8b",
            "quantization": "bf16",
            "engine_args": {"enable_prefix_caching": True, "max_num_batched_tokens": 2048},
        },
        (30.0, 50.0),
    ),
    (
        {
            "runtime": "sglang",
            "hardware": "nvidia-h100-sxm",
            "model": "llama-3.1-70b",
            "quantization": "fp8",
            "gpu_count": 4,
            "tensor_parallel": 4,
            "engine_args": {"mem_fraction_static": 0.85, "chunked_prefill_size": 8192},
        },
        (25.0, 60.0),
    ),
    (
        {
            "runtime": "tgi",
            "hardware": "nvidia-a100-80gb-sxm",
            "model": "qwen2.5-7b",
            "quantization": "bf16",
            "engine_args": {"max_batch_prefill_tokens": 4096, "cuda_memory_fraction": 0.9},
        },
        (40.0, 90.0),
    ),
    (
        {
            "runtime": "llamacpp",
            "hardware": "nvidia-rtx-4090",
            "model": "llama-3.1-8b",
            "quantization": "gguf-q4_k_m",
            "engine_args": {"n_gpu_layers": 99, "ctx_size": 8192},
        },
        (60.0, 140.0),
    ),
    (
        {
            "runtime": "vllm",
            "runtime_version": "0.8.5",
            "hardware": "nvidia-h100-sxm",
            "model": "mixtral-8x7b",
            "quantization": "fp8",
            "gpu_count": 2,
            "tensor_parallel": 2,
            "engine_args": {"gpu_memory_utilization": 0.92, "max_num_seqs": 128},
        },
        (30.0, 80.0),
    ),
)

_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)
#: The server's baseline cache hands a run at most this many earlier points of its cell.
_BASELINE_RUNS = 20


def _run(i: int, rng: random.Random) -> dict[str, Any]:
    """A distinct canonical run of setup ``i % 6``; optional metrics vary so rules fire and pass."""
    setup, (lo, hi) = SETUPS[i % len(SETUPS)]
    decode = rng.uniform(lo, hi)
    ttft = rng.uniform(80, 2400)
    itl = 1000 / decode
    concurrency = rng.choice([1, 4, 4, 16, 64])
    metrics: dict[str, Any] = {
        "ttft_ms": {"mean": ttft, "p50": ttft * 0.9, "p90": ttft * 1.3, "p99": ttft * rng.uniform(1.4, 6.0)},
        "itl_ms": {"mean": itl, "p50": itl, "p90": itl * 1.2, "p99": itl * rng.uniform(1.3, 4.0)},
        "output_throughput_tok_s": decode * concurrency * rng.uniform(0.5, 0.95),
        "requests_completed": 200,
    }
    if rng.random() < 0.7:
        metrics["decode_tok_s"] = decode
    if rng.random() < 0.5:
        metrics["queue_waiting_mean"] = rng.choice([0.0, 0.0, 1.5, 12.0])
    if rng.random() < 0.5:
        metrics["kv_cache_usage_mean"] = rng.uniform(0.05, 0.99)
    if rng.random() < 0.3:
        metrics["prefix_cache_hit_rate"] = rng.uniform(0.0, 0.9)
    if rng.random() < 0.2:
        metrics["preemptions"] = rng.choice([0.0, 3.0, 40.0])
    if rng.random() < 0.2:
        metrics["requests_failed"] = rng.choice([0, 0, 5])
    if rng.random() < 0.3:
        e2e = ttft + itl * 256
        metrics["e2e_ms"] = {"mean": e2e, "p50": e2e, "p99": e2e * 1.5}
    if rng.random() < 0.3:
        metrics["request_throughput_rps"] = concurrency / max(0.1, (ttft + itl * 256) / 1000.0)
    workload: dict[str, Any] = {
        "num_requests": 200,
        "concurrency": concurrency,
        "prompt_tokens_mean": rng.choice([256, 1024, 2048, 8000]),
        "output_tokens_mean": rng.choice([128, 256, 256, 1024]),
    }
    if rng.random() < 0.2:
        workload["shared_prefix_tokens"] = rng.choice([500, 3000])
    run: dict[str, Any] = {
        "deployment": f"bench-{i % 12}",
        "measured_at": (_EPOCH + timedelta(minutes=i)).isoformat().replace("+00:00", "Z"),
        "labels": {"bench": "analysis", "i": str(i)},
        "setup": json.loads(json.dumps(setup)),
        "workload": workload,
        "metrics": metrics,
    }
    if rng.random() < 0.15:
        run["slo"] = {"ttft_p99_ms": rng.choice([500.0, 2000.0]), "decode_tok_s_min": lo}
    return run


def make_inputs(
    n: int, *, seed: int = 19, catalog: Catalog | None = None, shape: str = "mixed"
) -> list[tuple[ResolvedRun, SLO | None, list[BaselinePoint]]]:
    """``n`` resolved runs with their SLO and baseline (the earlier points of their cell, newest
    first). ``shape``: ``mixed`` (the six :data:`SETUPS`) or ``ingest`` (``bench/ingest.lua``'s
    runs: :func:`bench._common.canonical_run`, two setups)."""
    catalog = catalog or Catalog.default()
    rng = random.Random(seed)
    make = _run if shape == "mixed" else canonical_run
    cells: dict[tuple[Any, ...], list[BaselinePoint]] = defaultdict(list)
    out: list[tuple[ResolvedRun, SLO | None, list[BaselinePoint]]] = []
    for i in range(n):
        run = decode_run(json.dumps(make(i, rng)).encode())
        resolved = resolve_run(run, SubmissionContext(), catalog, from_file=False, index=0)
        point = baseline_point(resolved.run)
        cell = cells[point.setup_key]
        out.append((resolved, None, list(reversed(cell[-_BASELINE_RUNS:]))))
        cell.append(point)
    return out


def _analyse(item: tuple[ResolvedRun, SLO | None, list[BaselinePoint]], catalog: Catalog) -> RunAnalysis:
    resolved, slo, baseline = item
    return analyse_run(resolved, slo=slo, baseline=baseline, catalog=catalog, expectations_fn=prior_expectations)


def analyse_all(
    items: list[tuple[ResolvedRun, SLO | None, list[BaselinePoint]]], catalog: Catalog
) -> list[RunAnalysis]:
    return [_analyse(item, catalog) for item in items]


def _jsonable(analysis: RunAnalysis) -> dict[str, Any]:
    return {
        "verdict": analysis.verdict,
        "recommendations": [r.to_dict() for r in analysis.recommendations],
        "stored": analysis.stored(),
    }


def digest(analyses: list[RunAnalysis]) -> str:
    """SHA-256 over every analysis, in order (equal for two trees exactly when their outputs are)."""
    h = hashlib.sha256()
    for a in analyses:
        h.update(json.dumps(_jsonable(a), sort_keys=True, default=repr).encode())
        h.update(b"\n")
    return h.hexdigest()


def _run_of(item: tuple[ResolvedRun, SLO | None, list[BaselinePoint]]) -> CanonicalRun:
    return item[0].run


#: One tree's side of ``--ab``, run with that tree as the working directory (``-c`` puts it first
#: on ``sys.path``): the cold pass and its digest, then one warm pass per line read. Only the names
#: every tree's ``bench.analysis`` has (``make_inputs``, ``analyse_all``, ``digest``).
_WORKER = """
import gc, sys, time
from advisor.catalog import Catalog
from advisor.rules import get_rules
from bench.analysis import analyse_all, digest, make_inputs
n, shape = int(sys.argv[1]), sys.argv[2]
catalog = Catalog.default()
get_rules()
items = make_inputs(n, catalog=catalog, shape=shape)
gc.collect()
gc.freeze()
gc.set_threshold(10_000, 10, 10)
print(digest(analyse_all(items, catalog)), flush=True)
for _ in sys.stdin:
    start = time.process_time()
    analyse_all(items, catalog)
    print((time.process_time() - start) / len(items) * 1e6, flush=True)
"""


def _ab(before: Path, runs: int, shape: str, passes: int) -> int:
    """``--ab``: the passes of ``before`` and of this tree alternating (see the module docstring)."""
    trees = {"before": before.resolve(), "after": Path(__file__).resolve().parents[1]}
    workers = {
        name: subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(runs), shape],
            cwd=tree,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for name, tree in trees.items()
    }
    digests = {name: (w.stdout.readline().strip() if w.stdout else "") for name, w in workers.items()}
    times: dict[str, list[float]] = {name: [] for name in workers}
    load = Path("/proc/loadavg").read_text().split()[0]
    for i in range(passes):
        for name in ("before", "after") if i % 2 == 0 else ("after", "before"):
            worker = workers[name]
            assert worker.stdin is not None and worker.stdout is not None
            worker.stdin.write("\n")
            worker.stdin.flush()
            times[name].append(float(worker.stdout.readline()))
    end_load = Path("/proc/loadavg").read_text().split()[0]
    for worker in workers.values():
        if worker.stdin is not None:
            worker.stdin.close()
        worker.wait()
    ratios = [a / b for a, b in zip(times["after"], times["before"], strict=True)]
    for name in workers:
        t = times[name]
        print(
            f"{name}: {trees[name]}: median {statistics.median(t):.1f} µs/run (min {min(t):.1f}, "
            f"max {max(t):.1f}); passes {', '.join(f'{x:.0f}' for x in t)}; digest {digests[name]}"
        )
    print(
        f"after ÷ before, pass by pass: median ×{statistics.median(ratios):.2f} (range ×{min(ratios):.2f}–"
        f"×{max(ratios):.2f}); {runs} {shape} runs, {passes} passes each; load {load}–{end_load}; "
        f"digests {'equal' if digests['before'] == digests['after'] else 'DIFFERENT'}"
    )
    return 0 if digests["before"] == digests["after"] else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5000)
    parser.add_argument("--shape", choices=("mixed", "ingest"), default="mixed", help="which runs (see make_inputs)")
    parser.add_argument("--passes", type=int, default=5, help="warm passes after the cold one")
    parser.add_argument("--digest", action="store_true", help="print the SHA-256 of all analyses")
    parser.add_argument("--dump", type=Path, help="write every analysis as JSON lines here")
    parser.add_argument("--profile", type=int, default=0, help="print cProfile's top N (one warm pass)")
    parser.add_argument("--gc-default", action="store_true", help="keep CPython's GC thresholds (not the server's)")
    parser.add_argument("--ab", type=Path, metavar="DIR", help="alternate passes with the tree in DIR (see above)")
    args = parser.parse_args()
    if args.ab is not None:
        return _ab(args.ab, args.runs, args.shape, args.passes)

    catalog = Catalog.default()
    get_rules()  # discovery and thresholds load once, as in a long-running server
    items = make_inputs(args.runs, catalog=catalog, shape=args.shape)
    if not args.gc_default:
        # As a server worker runs (advisor.server.asgi.tune_gc: freeze what exists, young
        # collections every 10,000 allocations): else collections dominate the profile.
        gc.collect()
        gc.freeze()
        gc.set_threshold(10_000, 10, 10)
    load = Path("/proc/loadavg").read_text().split()[0]

    start = time.process_time()
    cold = analyse_all(items, catalog)
    cold_us = (time.process_time() - start) / len(items) * 1e6
    warm_us: list[float] = []
    warm: list[RunAnalysis] = cold
    for _ in range(args.passes):
        start = time.process_time()
        warm = analyse_all(items, catalog)
        warm_us.append((time.process_time() - start) / len(items) * 1e6)
    end_load = Path("/proc/loadavg").read_text().split()[0]
    fired = sum(len(a.recommendations) for a in cold) / len(cold)
    verdicts = {v: sum(1 for a in cold if a.verdict == v) for v in ("pass", "warn", "fail")}
    print(
        f"runs: {len(items)} ({args.shape}), {len({str(i[0].run.setup.hardware) for i in items})} devices, "
        f"{len(get_rules())} rules, "
        f"{fired:.2f} recommendations a run, verdicts {verdicts}"
    )
    warm_text = (
        f"; warm passes median {statistics.median(warm_us):.1f} µs/run (min {min(warm_us):.1f}, max {max(warm_us):.1f})"
        if warm_us
        else ""
    )
    print(f"analyse_run CPU: cold pass {cold_us:.1f} µs/run{warm_text}; load {load}–{end_load}")
    if args.digest:
        cold_digest, warm_digest = digest(cold), digest(warm)
        same = cold_digest == warm_digest
        print(f"digest: {cold_digest}" + ("" if same else f" (warm pass: {warm_digest}: DIFFERENT)"))
    if args.dump:
        with args.dump.open("w") as f:
            for a in cold:
                f.write(json.dumps(_jsonable(a), sort_keys=True, default=repr) + "\n")
    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        analyse_all(items, catalog)
        profiler.disable()
        stats = pstats.Stats(profiler)
        stats.sort_stats("cumulative").print_stats(args.profile)
        stats.sort_stats("tottime").print_stats(args.profile)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
