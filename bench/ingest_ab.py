"""Before/after for ``POST /api/v1/runs`` on a busy machine: two trees served side by side.

The reference (``bench/_echo_app.py``), a ``before`` tree and this tree are each one uvicorn
process on their own new database; wrk rounds alternate between the three (echo, before, after), so
that the machine's load falls on all of them alike, and each round records the rate and the
server's CPU time per request (``/proc``), the figure a loaded machine disturbs least.

    .venv/bin/python -m bench.ingest_ab --before DIR [--backend sqlite|postgres] [--rounds 4] [--seconds 10]

``DIR`` is a copy of the tree as it was (e.g. ``git worktree add /tmp/before HEAD``); the same
virtual environment serves both. Needs wrk.

``--in-process N``: no HTTP; each tree's ``RunPipeline.submit`` (parse, resolution, the group
committer, analysis, the store, the answer's encoding) for N distinct canonical runs from 16
concurrent submitters, in a process of its own, on a new database; the trees alternate for
``--rounds`` rounds and each round records the process's CPU time per run (all threads: the SQLite
writer's too). ``--no-analysis`` answers every run of a setup with the analysis of its first run,
so that what is left is the request path outside the analysis.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench._common import HTTP_PROTOCOL, PYTHON, ROOT, free_port, wait_until_up
from bench.ingest import database, wrk

__all__ = ["main"]

_QUIET = ("--no-access-log", "--log-level", "warning")


@contextlib.contextmanager
def _serve(code: Path, app: str, env: dict[str, str]) -> Iterator[tuple[str, int]]:
    """``uvicorn app`` run from ``code`` (whose ``advisor`` package it imports); (URL, pid)."""
    port = free_port()
    # Each advisor tree with `advisor serve`'s HTTP protocol (bench._common.server does the same).
    protocol = [] if app.endswith("_echo_app:app") else ["--http", HTTP_PROTOCOL]
    proc = subprocess.Popen(
        [PYTHON, "-m", "uvicorn", app, "--host", "127.0.0.1", "--port", str(port), *_QUIET, *protocol],
        cwd=code,
        env={**os.environ, **env},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(proc, url + "/health", what=f"{app} in {code}", tries=600, accept=lambda _status: True)
        yield url, proc.pid
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def _env(code: Path, url: str) -> dict[str, str]:
    env = {"ADVISOR_DATABASE_URL": url, "ADVISOR_LOG_LEVEL": "warning", "ADVISOR_AUTH_RATE_LIMIT_PER_SECOND": "0"}
    subprocess.run(
        [PYTHON, "-m", "advisor", "db", "upgrade"], cwd=code, env={**os.environ, **env}, check=True, capture_output=True
    )
    return env


# Run in each tree's own directory (its ``advisor`` package), from this tree's text: the submit
# path of bench/ingest.lua's shape without HTTP. argv: runs, database URL, "analysis" or not.
_IN_PROCESS = """
import asyncio, json, os, random, sys, time, uuid
n, url, analysis = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "analysis"
os.environ["ADVISOR_DATABASE_URL"] = url
from advisor.server.asgi import app
from advisor.domain.runs import pipeline as runs_pipeline
from advisor.domain.runs.controllers import _stored
from advisor.domain.runs.submission import SubmissionRequest
from advisor.ingest.submission import SubmissionContext
from bench._common import canonical_run
if not analysis:
    real, first = runs_pipeline.analyse_run, {}
    def once_per_setup(resolved, **kwargs):
        key = (resolved.run.setup.hardware, resolved.run.workload.prompt_tokens_mean)
        if key not in first:
            first[key] = real(resolved, **kwargs)
        return first[key]
    runs_pipeline.analyse_run = once_per_setup
rng, tag = random.Random(7), uuid.uuid4().hex
bodies = []
for i in range(n):
    run = canonical_run(i, rng)
    run["labels"]["tag"] = tag
    bodies.append(json.dumps(run).encode())
layers = (SubmissionContext(), SubmissionContext())
async def main():
    pipe = runs_pipeline.RunPipeline(engine=app.state.sqlalchemy_config.get_engine())
    async def submitter(queue):
        for body in queue:
            _stored(await pipe.submit(SubmissionRequest(body, "application/json", "auto", layers)))
    warm, timed = bodies[: n // 5], bodies[n // 5 :]
    for part, label in ((warm, None), (timed, "timed")):
        queue = iter(part)
        cpu = time.process_time()
        await asyncio.gather(*(submitter(queue) for _ in range(16)))
        if label:
            print(json.dumps({"cpu_us": 1e6 * (time.process_time() - cpu) / len(part)}))
    await app.state.sqlalchemy_config.get_engine().dispose()
import uvloop
uvloop.run(main())
"""


def _in_process(code: Path, runs: int, url: str, env: dict[str, str], analysis: bool) -> float:
    """CPU time per run of ``code``'s submit path in a process of its own (see the docstring)."""
    done = subprocess.run(
        [PYTHON, "-c", _IN_PROCESS, str(runs), url, "analysis" if analysis else "none"],
        cwd=code,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return float(json.loads(done.stdout.strip().splitlines()[-1])["cpu_us"])


def main_in_process(args: argparse.Namespace) -> None:
    results: dict[str, list[float]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.rounds):
            load = os.getloadavg()[0]
            for name, code in (("before", args.before), ("after", ROOT)):
                with database(args.backend, Path(tmp)) as url:
                    env = _env(code, url)
                    results[name].append(_in_process(code, args.in_process, url, env, not args.no_analysis))
            line = ", ".join(f"{n} {r[-1]:.0f} us" for n, r in results.items())
            print(f"[{args.backend}, in process] round {i + 1}, load {load:.1f}: CPU per run {line}", flush=True)
    before, after = (statistics.median(results[n]) for n in ("before", "after"))
    print(
        f"[{args.backend}, in process{', no analysis' if args.no_analysis else ''}] CPU per run: "
        f"before {before:.0f} us, after {after:.0f} us, after/before x{after / before:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="the tree to compare with")
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--in-process", type=int, default=0, metavar="N", help="N runs per round, no HTTP")
    parser.add_argument("--no-analysis", action="store_true", help="in process: one analysis per setup")
    args = parser.parse_args()
    if args.in_process:
        main_in_process(args)
        return
    timing = {"seconds": args.seconds, "connections": args.connections}
    print(
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores"
    )
    with (
        tempfile.TemporaryDirectory() as tmp,
        database(args.backend, Path(tmp)) as url_before,
        database(args.backend, Path(tmp)) as url_after,
    ):
        env_before, env_after = _env(args.before, url_before), _env(ROOT, url_after)
        with (
            _serve(ROOT, "bench._echo_app:app", {}) as (echo, echo_pid),
            _serve(args.before, "advisor.server.asgi:app", env_before) as (before, before_pid),
            _serve(ROOT, "advisor.server.asgi:app", env_after) as (after, after_pid),
        ):
            sides = {
                "echo": (echo + "/echo", echo_pid),
                "before": (before + "/api/v1/runs", before_pid),
                "after": (after + "/api/v1/runs", after_pid),
            }
            for url, _ in sides.values():  # warm-up: routes, caches, pools
                wrk(url, seconds=2, connections=args.connections)
            results: dict[str, list[dict[str, Any]]] = {name: [] for name in sides}
            for i in range(args.rounds):
                load = os.getloadavg()[0]
                for name, (url, pid) in sides.items():
                    results[name].append(wrk(url, pid=pid, **timing))
                line = ", ".join(f"{n} {r[-1]['rps']:.0f} req/s {r[-1]['cpu_ms']:.3f} ms" for n, r in results.items())
                print(f"[{args.backend}] round {i + 1}, load {load:.1f}: {line}", flush=True)
    rps = {n: statistics.median(r["rps"] for r in rs) for n, rs in results.items()}
    cpu = {n: statistics.median(r["cpu_ms"] for r in rs) for n, rs in results.items()}
    for name in ("before", "after"):
        print(
            f"[{args.backend}] {name}: {rps[name]:.0f} req/s, {cpu[name]:.3f} ms CPU per request; "
            f"ratio to the reference {rps[name] / rps['echo']:.3f} (rate), {cpu['echo'] / cpu[name]:.3f} (CPU)"
        )
    print(
        f"[{args.backend}] after/before: rate x{rps['after'] / rps['before']:.2f}, "
        f"CPU per request x{cpu['after'] / cpu['before']:.2f} (reference {rps['echo']:.0f} req/s, {cpu['echo']:.3f} ms)"
    )


if __name__ == "__main__":
    main()
