"""Ingestion throughput (DESIGN §8, issue #19's method).

1. ``POST /api/v1/runs`` of distinct canonical runs (each stored and analysed: rules, physics,
   expectations, baseline), against the reference: a bare Litestar endpoint that only decodes the
   same body into advisor's canonical-run msgspec Struct (``bench/_echo_app.py``). Each server is
   one uvicorn process; ``wrk -t1 -c16 -d10s -s bench/ingest.lua`` drives it (wrk is C: it keeps
   the reference's CPU saturated, which a Python client cannot). The two are measured in alternating
   rounds and each side's median kept. Target: ratio >= 0.25.
2. Bulk: 20,000 canonical runs as JSON arrays of 5,000, posted one after the other to
   ``POST /api/v1/runs/bulk``. Target: >= 5,000 runs/s.

On SQLite (a new file) and on Postgres (a new database on ADVISOR_BENCH_POSTGRES_URL's server,
default postgresql+asyncpg://postgres@127.0.0.1:5432/postgres, dropped afterwards).

    .venv/bin/python -m bench.ingest [--backend sqlite|postgres|both] [--rounds 3] [--seconds 10]
        [--connections 16] [--bulk 20000] [--bulk-batch 5000] [--bulk-only] [--json PATH]

Needs wrk (``apt-get install -y wrk``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import shutil
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from bench._common import PIDS, PYTHON, ROOT, canonical_run, rss_mb, server

__all__ = ["main"]

LUA = ROOT / "bench" / "ingest.lua"
PG_ADMIN = os.environ.get("ADVISOR_BENCH_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/postgres")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wrk(url: str, *, seconds: int, connections: int, pid: int | None = None) -> dict[str, Any]:
    """One wrk run of bench/ingest.lua: requests/s, p99, the count of non-2xx answers and, given
    the server's ``pid``, its CPU time per request (which a loaded machine disturbs far less than
    the rate: the server gets fewer cycles, not more work per request)."""
    cpu_before = cpu_seconds(pid) if pid is not None else 0.0
    done = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "-s", str(LUA), url],
        capture_output=True,
        text=True,
        check=True,
        timeout=seconds + 60,
    )
    line = next(x for x in done.stdout.splitlines() if x.startswith("JSON "))
    result: dict[str, Any] = json.loads(line[5:])
    result["rps"] = result["requests"] / result["seconds"]
    if pid is not None and result["requests"]:
        result["cpu_ms"] = 1000 * (cpu_seconds(pid) - cpu_before) / result["requests"]
    if result["non2xx"]:
        raise SystemExit(f"{url}: {result['non2xx']} answers were not 2xx: {done.stderr[:500]}")
    return result


def _prepare_db(url: str) -> dict[str, str]:
    # The per-address rate limit (ADVISOR_AUTH_RATE_LIMIT_PER_SECOND, 500/s) would answer wrk's
    # single address with 429s: the benchmark measures the pipeline, not the limiter.
    env = {"ADVISOR_DATABASE_URL": url, "ADVISOR_LOG_LEVEL": "warning", "ADVISOR_AUTH_RATE_LIMIT_PER_SECOND": "0"}
    subprocess.run(
        [PYTHON, "-m", "advisor", "db", "upgrade"],
        cwd=ROOT,
        env={**os.environ, **env},
        check=True,
        capture_output=True,
    )
    return env


async def _pg_admin(sql: str) -> None:
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as conn:
            await conn.execute(text(sql))
    finally:
        await engine.dispose()


@contextlib.contextmanager
def database(backend: str, tmp: Path) -> Iterator[str]:
    """A new, empty database of ``backend``; its async URL."""
    if backend == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp / f'bench-{uuid.uuid4().hex[:8]}.db'}"
        return
    from sqlalchemy.engine import make_url

    name = f"advisor_bench_{uuid.uuid4().hex[:10]}"
    asyncio.run(_pg_admin(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(PG_ADMIN).set(database=name).render_as_string(hide_password=False)
    finally:
        asyncio.run(_pg_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def single(backend: str, tmp: Path, args: argparse.Namespace) -> dict[str, Any]:
    with database(backend, tmp) as url:
        env = _prepare_db(url)
        echo: list[dict[str, Any]] = []
        runs: list[dict[str, Any]] = []
        loads: list[float] = []
        with server("bench._echo_app:app") as echo_url, server("advisor.server.asgi:app", env) as advisor_url:
            echo_pid, advisor_pid = PIDS[echo_url], PIDS[advisor_url]
            # Warm-up: every route, cache and connection pool once.
            wrk(echo_url + "/echo", seconds=2, connections=args.connections)
            wrk(advisor_url + "/api/v1/runs", seconds=2, connections=args.connections)
            for _ in range(args.rounds):
                loads.append(os.getloadavg()[0])
                timing = {"seconds": args.seconds, "connections": args.connections}
                echo.append(wrk(echo_url + "/echo", pid=echo_pid, **timing))
                runs.append(wrk(advisor_url + "/api/v1/runs", pid=advisor_pid, **timing))
            rss = rss_mb(advisor_url)
    runs_rps = statistics.median(r["rps"] for r in runs)
    echo_rps = statistics.median(e["rps"] for e in echo)
    runs_cpu = statistics.median(r["cpu_ms"] for r in runs)
    echo_cpu = statistics.median(e["cpu_ms"] for e in echo)
    return {
        "echo_rps": echo_rps,
        "runs_rps": runs_rps,
        "ratio": runs_rps / echo_rps,
        "runs_p99_ms": statistics.median(r["p99_ms"] for r in runs),
        # Server CPU per request: the ratio of the two is the ratio a quiet machine would show
        # when both servers are CPU-bound.
        "echo_cpu_ms": echo_cpu,
        "runs_cpu_ms": runs_cpu,
        "cpu_ratio": echo_cpu / runs_cpu,
        "server_rss_mb": rss,
        "rounds": [
            {"echo": e["rps"], "runs": r["rps"], "echo_cpu_ms": e["cpu_ms"], "runs_cpu_ms": r["cpu_ms"], "load": load}
            for e, r, load in zip(echo, runs, loads, strict=True)
        ],
    }


def bulk(backend: str, tmp: Path, args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(7)
    arrays = [
        json.dumps([canonical_run(2_000_000 + start + i, rng) for i in range(args.bulk_batch)]).encode()
        for start in range(0, args.bulk, args.bulk_batch)
    ]
    with (
        database(backend, tmp) as url,
        server("advisor.server.asgi:app", _prepare_db(url)) as advisor_url,
        httpx.Client(base_url=advisor_url, timeout=600) as client,
    ):
        start = time.perf_counter()
        cpu_start = cpu_seconds(PIDS[advisor_url])
        created = 0
        for body in arrays:
            response = client.post("/api/v1/runs/bulk", content=body, headers={"content-type": "application/json"})
            if response.status_code != 200:
                raise SystemExit(f"bulk failed: {response.status_code} {response.text[:300]}")
            created += response.json()["created"]
        seconds = time.perf_counter() - start
        cpu = cpu_seconds(PIDS[advisor_url]) - cpu_start
    if created != args.bulk:
        raise SystemExit(f"bulk stored {created} of {args.bulk} runs")
    # The server's CPU seconds over the same span: on a busy machine the wall clock also counts the
    # time the server waited for a core (and, on Postgres, for the database's own process).
    return {"runs": created, "seconds": seconds, "runs_per_s": created / seconds, "server_cpu_s": cpu}


def _print_bulk(backend: str, b: dict[str, Any], args: argparse.Namespace) -> None:
    print(
        f"[{backend}] bulk {b['runs_per_s']:8.0f} runs/s ({b['runs']} runs as arrays of {args.bulk_batch} in "
        f"{b['seconds']:.2f} s; server CPU {b['server_cpu_s']:.2f} s = "
        f"{b['runs'] / max(b['server_cpu_s'], 1e-9):.0f} runs per CPU-second; target >= 5000)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per side (medians)")
    parser.add_argument("--seconds", type=int, default=10, help="wrk -d per round")
    parser.add_argument("--connections", type=int, default=16, help="wrk -c")
    parser.add_argument("--bulk", type=int, default=20_000, help="runs in the bulk part (0: skip it)")
    parser.add_argument("--bulk-batch", type=int, default=5_000, help="runs per bulk request (a JSON array)")
    parser.add_argument("--bulk-only", action="store_true", help="only the bulk part (no wrk needed)")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args()
    if shutil.which("wrk") is None and not args.bulk_only:
        raise SystemExit("bench.ingest needs wrk: apt-get install -y wrk")

    load = os.getloadavg()
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {load[0]:.2f}, {os.cpu_count()} cores")
    print(f"wrk -t1 -c{args.connections} -d{args.seconds}s -s bench/ingest.lua, {args.rounds} rounds per side")
    results: dict[str, Any] = {"load": load[0], "cores": os.cpu_count(), "connections": args.connections}
    ok = True
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    with tempfile.TemporaryDirectory() as tmp_dir:
        for backend in backends:
            if args.bulk_only:
                one: dict[str, Any] = {}
                one["bulk"] = bulk(backend, Path(tmp_dir), args)
                _print_bulk(backend, one["bulk"], args)
                ok = ok and one["bulk"]["runs_per_s"] >= 5000
                results[backend] = one
                continue
            one = single(backend, Path(tmp_dir), args)
            rounds = ", ".join(
                f"{r['echo']:.0f}/{r['runs']:.0f} "
                f"({r['echo_cpu_ms']:.3f}/{r['runs_cpu_ms']:.3f} ms, load {r['load']:.1f})"
                for r in one["rounds"]
            )
            print(f"[{backend}] rounds (echo/runs req/s, server CPU per request): {rounds}")
            print(
                f"[{backend}] echo {one['echo_rps']:8.0f} req/s | POST /api/v1/runs {one['runs_rps']:6.0f} req/s "
                f"(p99 {one['runs_p99_ms']:.0f} ms) | ratio {one['ratio']:.3f} (target >= 0.25) | "
                f"server CPU per request {one['echo_cpu_ms']:.3f} / {one['runs_cpu_ms']:.3f} ms = "
                f"{one['cpu_ratio']:.3f} | server RSS {one['server_rss_mb']:.0f} MB"
            )
            ok = ok and one["ratio"] >= 0.25
            if args.bulk:
                one["bulk"] = bulk(backend, Path(tmp_dir), args)
                _print_bulk(backend, one["bulk"], args)
                ok = ok and one["bulk"]["runs_per_s"] >= 5000
            results[backend] = one
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    print("PASS" if ok else "BELOW TARGET")


if __name__ == "__main__":
    main()
