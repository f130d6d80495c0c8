"""Mixed load (issue #18 item 8): 80% reads and 20% writes of distinct runs for 60 s against
``advisor serve --workers 2``, on SQLite and on Postgres. Goal on the 2-core machine: at least 200
requests/s, p99 at most 100 ms, zero errors, and every acknowledged (201) run stored, counted in the
database afterwards.

wrk (C, closed loop) drives it with bench/load.lua, so the load generator itself is not the limit.
Needs wrk (``apt-get install -y wrk``).

    .venv/bin/python -m bench.load [--seconds 60] [--connections 16] [--backend sqlite|postgres|both]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from bench._common import PYTHON, ROOT, free_port, wait_until_up
from bench.ingest import _prepare_db, database

__all__ = ["main", "run_load"]

LUA = ROOT / "bench" / "load.lua"
GOAL_RPS = 200.0
GOAL_P99_MS = 100.0


@contextlib.contextmanager
def serve(env: dict[str, str], workers: int) -> Iterator[str]:
    """``advisor serve --workers N`` in a subprocess; its base URL once /health/ready answers."""
    port = free_port()
    proc = subprocess.Popen(
        [PYTHON, "-m", "advisor", "serve", "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers)],
        cwd=ROOT,
        env={**os.environ, **env, "ADVISOR_LOG_LEVEL": "warning"},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(proc, url + "/health/ready", what="advisor serve", tries=300, accept=lambda s: s == 200)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _stored_runs(url: str) -> int:
    async def count() -> int:
        engine = create_async_engine(url)
        try:
            async with engine.connect() as conn:
                return int((await conn.execute(text("SELECT count(*) FROM run"))).scalar_one())
        finally:
            await engine.dispose()

    return asyncio.run(count())


def _wrk_rps(base: str, connections: int, seconds: int) -> float:
    done = subprocess.run(
        ["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "-s", str(LUA), base],
        capture_output=True,
        text=True,
        check=True,
        timeout=seconds + 60,
    )
    line = next(x for x in done.stdout.splitlines() if x.startswith("JSON "))
    result = json.loads(line[5:])
    return float(result["requests"]) / float(result["seconds"])


def _warm_up(base: str, connections: int, rounds: int = 8) -> None:
    """Warm-up rounds until the rate stops rising: /health/ready answers as soon as one worker is
    up, and on a loaded host the next may still be importing the app for tens of seconds, during
    which the measure would see one worker."""
    previous = 0.0
    for _ in range(rounds):
        rate = _wrk_rps(base, connections, 3)
        if previous and rate < previous * 1.15:
            return
        previous = rate


def run_load(backend: str, *, seconds: int, connections: int, workers: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, database(backend, Path(tmp)) as url:
        env = _prepare_db(url)
        with serve(env, workers) as base:
            _warm_up(base, connections)
            before = _stored_runs(url)
            done = subprocess.run(
                ["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--latency", "-s", str(LUA), base],
                capture_output=True,
                text=True,
                check=True,
                timeout=seconds + 120,
            )
        line = next(x for x in done.stdout.splitlines() if x.startswith("JSON "))
        result: dict[str, Any] = json.loads(line[5:])
        result["stored"] = _stored_runs(url) - before
        result["errors_sample"] = done.stderr[:300]
    result["rps"] = result["requests"] / result["seconds"]
    result["backend"] = backend
    result["workers"] = workers
    result["ok"] = (
        result["rps"] >= GOAL_RPS
        and result["p99_ms"] <= GOAL_P99_MS
        and result["non2xx"] == 0
        and result["stored"] >= result["acked"]  # more: requests in flight when wrk stopped
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("bench.load needs wrk: apt-get install -y wrk")
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    for backend in backends:
        r = run_load(backend, seconds=args.seconds, connections=args.connections, workers=args.workers)
        print(
            f"{backend:8} workers={r['workers']} {r['rps']:7.1f} req/s  p50 {r['p50_ms']:6.1f} ms  "
            f"p99 {r['p99_ms']:6.1f} ms  non-2xx {r['non2xx']}  acked {r['acked']}  stored {r['stored']}  "
            f"{'meets' if r['ok'] else 'MISSES'} the goal (>= {GOAL_RPS:.0f} req/s, p99 <= {GOAL_P99_MS:.0f} ms, "
            "0 errors, stored >= acked)"
        )
        if r["errors_sample"]:
            print("  first errors:", r["errors_sample"].replace("\n", " | "))


if __name__ == "__main__":
    main()
