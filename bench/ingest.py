"""Ingestion throughput (DESIGN §8).

1. POST /api/v1/runs of distinct canonical runs (stored and analysed: rules, physics, expectations),
   against a bare Litestar endpoint that only decodes the same bodies. Each is one uvicorn process;
   the same client drives both, in the same script run. Target: ratio >= 25%.
2. POST /api/v1/runs/bulk of 10,000 runs (NDJSON) on SQLite. Target: >= 5,000 runs/s.

    .venv/bin/python -m bench.ingest [--requests 3000] [--rounds 5] [--concurrency 8] [--backfill] [--database-url URL]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import httpx

from bench._common import PYTHON, ROOT, canonical_run, server


async def _drive(url: str, bodies: list[bytes], concurrency: int) -> float:
    """Requests per second, with ``concurrency`` requests in flight."""
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    for body in bodies:
        queue.put_nowait(body)
    failures: list[str] = []

    async def worker(client: httpx.AsyncClient) -> None:
        while not queue.empty():
            body = queue.get_nowait()
            response = await client.post(url, content=body, headers={"content-type": "application/json"})
            if response.status_code >= 300:
                failures.append(f"{response.status_code} {response.text[:200]}")

    async with httpx.AsyncClient(timeout=60) as client:
        start = time.perf_counter()
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
        elapsed = time.perf_counter() - start
    if failures:
        raise SystemExit(f"{len(failures)} requests failed, e.g. {failures[0]}")
    return len(bodies) / elapsed


def _prepare_db(path: Path, url: str | None = None) -> dict[str, str]:
    env = {"ADVISOR_DATABASE_URL": url or f"sqlite+aiosqlite:///{path}", "ADVISOR_LOG_LEVEL": "warning"}
    for command in (["db", "upgrade"], ["catalog", "load"]):
        subprocess.run(
            [PYTHON, "-m", "advisor", *command],
            cwd=ROOT,
            env={**__import__("os").environ, **env},
            check=True,
            capture_output=True,
        )
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5, help="alternating measurement rounds (medians)")
    parser.add_argument("--bulk", type=int, default=10_000)
    parser.add_argument(
        "--backfill", action="store_true", help="submit the runs in random measured_at order (a backfill)"
    )
    parser.add_argument(
        "--database-url", default=None, help="POST /runs against this database (default: a fresh SQLite file)"
    )
    args = parser.parse_args()
    rng = random.Random(42)
    warm = [json.dumps(canonical_run(i - 50, rng)).encode() for i in range(50)]
    bodies = [json.dumps(canonical_run(i, rng)).encode() for i in range(args.requests)]
    if args.backfill:
        rng.shuffle(bodies)  # measured_at in random order: most baselines need a query

    with tempfile.TemporaryDirectory() as tmp:
        env = _prepare_db(Path(tmp) / "bench.db", args.database_url)
        # Both servers stay up; the two sides are measured in alternating rounds (new runs each
        # round) and each side's median is kept, so a burst of noise on this shared machine moves
        # one round, not the ratio.
        echo_rates: list[float] = []
        runs_rates: list[float] = []
        per_round = len(bodies) // args.rounds
        with server("bench._echo_app:app") as echo_url, server("advisor.server.asgi:app", env) as url:
            asyncio.run(_drive(echo_url + "/echo", warm, args.concurrency))
            asyncio.run(_drive(url + "/api/v1/runs", warm, args.concurrency))
            for r in range(args.rounds):
                chunk = bodies[r * per_round : (r + 1) * per_round]
                echo_rates.append(asyncio.run(_drive(echo_url + "/echo", chunk, args.concurrency)))
                runs_rates.append(asyncio.run(_drive(url + "/api/v1/runs", chunk, args.concurrency)))
        echo_rps = statistics.median(echo_rates)
        runs_rps = statistics.median(runs_rates)

        bulk_env = _prepare_db(Path(tmp) / "bulk.db")
        ndjson = b"\n".join(json.dumps(canonical_run(1_000_000 + i, rng)).encode() for i in range(args.bulk))
        with server("advisor.server.asgi:app", bulk_env) as url:
            start = time.perf_counter()
            response = httpx.post(url + "/api/v1/runs/bulk", content=ndjson, timeout=600)
            bulk_seconds = time.perf_counter() - start
            if response.status_code != 200 or response.json()["created"] != args.bulk:
                raise SystemExit(f"bulk failed: {response.status_code} {response.text[:300]}")

    rounds = ", ".join(f"{e:.0f}/{r:.0f}" for e, r in zip(echo_rates, runs_rates, strict=True))
    print(f"rounds (echo/runs req/s): {rounds}")
    ratio = runs_rps / echo_rps
    bulk_rate = args.bulk / bulk_seconds
    print(f"echo (decode only)      : {echo_rps:8.1f} req/s")
    print(f"POST /api/v1/runs        : {runs_rps:8.1f} req/s  (ratio {ratio:.1%}, target >= 25%)")
    print(
        f"POST /api/v1/runs/bulk   : {bulk_rate:8.0f} runs/s ({args.bulk} runs in {bulk_seconds:.2f} s, target >= 5000)"
    )
    ok = ratio >= 0.25 and bulk_rate >= 5000
    print("PASS" if ok else "BELOW TARGET")


if __name__ == "__main__":
    main()
