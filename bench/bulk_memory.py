"""Server memory under maximal bulk loads (issue #18 item 4: "bulk requests limited in size and in how
many run at once, so memory stays within a documented bound").

One uvicorn worker on a new database; three clients post a maximal bulk each at the same moment:
10,000 distinct canonical runs (ADVISOR_BULK_MAX_RUNS) carrying 32 labels of 500 characters, about
190 MB of JSON, under ADVISOR_BULK_MAX_BODY_BYTES (200 MB). The worker holds two bulk requests at
once (advisor.server.limits.MAX_CONCURRENT_BULK); the third is answered 503 with Retry-After at
once, and its client sends it again after that. The server's RSS is sampled every 50 ms from
/proc throughout; the script prints the idle RSS, the peak and the statuses.

    .venv/bin/python -m bench.bulk_memory [--backend sqlite|postgres|both] [--clients 3] [--runs 10000]
        [--labels 32] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from bench._common import PIDS, canonical_run, server
from bench.ingest import _prepare_db, database

__all__ = ["main"]


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _body(client: int, runs: int, labels: int) -> bytes:
    rng = random.Random(client)
    pad = "x" * 480
    items = []
    for i in range(runs):
        run = canonical_run(10_000_000 * (client + 1) + i, rng)
        run["labels"] = {f"k{j}": f"{client}-{i}-{j}-{pad}"[:500] for j in range(labels)}
        items.append(run)
    return json.dumps(items).encode()


def measure(backend: str, tmp: Path, args: argparse.Namespace) -> dict[str, Any]:
    bodies = [_body(c, args.runs, args.labels) for c in range(args.clients)]
    with database(backend, tmp) as url, server("advisor.server.asgi:app", _prepare_db(url)) as base:
        pid = PIDS[base]
        time.sleep(1.0)
        idle = _rss_mb(pid)
        peak = [idle]
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                peak[0] = max(peak[0], _rss_mb(pid))
                time.sleep(0.05)

        statuses: list[list[int]] = [[] for _ in bodies]
        start = threading.Barrier(len(bodies))

        def send(i: int) -> None:
            with httpx.Client(base_url=base, timeout=900) as client:
                start.wait()
                while True:
                    response = client.post(
                        "/api/v1/runs/bulk", content=bodies[i], headers={"content-type": "application/json"}
                    )
                    statuses[i].append(response.status_code)
                    if response.status_code != 503 or len(statuses[i]) > 50:
                        return
                    time.sleep(float(response.headers.get("retry-after", "1")))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        t0 = time.perf_counter()
        senders = [threading.Thread(target=send, args=(i,)) for i in range(len(bodies))]
        for t in senders:
            t.start()
        for t in senders:
            t.join()
        seconds = time.perf_counter() - t0
        done.set()
        sampler.join()
        after = _rss_mb(pid)
    return {
        "body_mb": [round(len(b) / 1e6, 1) for b in bodies],
        "idle_rss_mb": idle,
        "peak_rss_mb": peak[0],
        "after_rss_mb": after,
        "statuses": statuses,
        "seconds": seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--clients", type=int, default=3)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--labels", type=int, default=32)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    load = os.getloadavg()
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {load[0]:.2f}, {os.cpu_count()} cores")
    results: dict[str, Any] = {"load": load[0]}
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    with tempfile.TemporaryDirectory() as tmp:
        for backend in backends:
            one = measure(backend, Path(tmp), args)
            results[backend] = one
            print(
                f"[{backend}] {args.clients} bulks of {args.runs} runs ({one['body_mb'][0]:.0f} MB each) at once: "
                f"RSS idle {one['idle_rss_mb']:.0f} MB, peak {one['peak_rss_mb']:.0f} MB, after "
                f"{one['after_rss_mb']:.0f} MB; statuses {one['statuses']} in {one['seconds']:.1f} s"
            )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
