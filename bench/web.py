"""Web page server time with 10,000 runs in the database (issue #15: every page < 100 ms).

Loads 10,000 distinct canonical runs (10 deployments) through POST /api/v1/runs/bulk, then requests
each page in-process through Litestar's TestClient (server time: routing, queries, page assembly,
template rendering, middleware; no network) and reports the median and p95 per page.

    .venv/bin/python -m bench.web [--runs 10000] [--repeat 30] [--database-url URL]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("ADVISOR_LOG_LEVEL", "warning")

from bench._common import canonical_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--database-url", default=None, help="default: a new SQLite file in a temp dir")
    args = parser.parse_args()

    from litestar.testing import TestClient

    from advisor.db import migrate
    from advisor.server import create_app
    from advisor.settings import DatabaseSettings, ServerSettings, Settings

    with tempfile.TemporaryDirectory() as tmp:
        url = args.database_url or f"sqlite+aiosqlite:///{Path(tmp) / 'web.db'}"
        db = DatabaseSettings(url=url)
        migrate.upgrade(db)
        settings = Settings(db=db, server=ServerSettings(log_level="warning", bulk_max_runs=args.runs))
        with TestClient(app=create_app(settings)) as client:
            rng = random.Random(15)
            body = "\n".join(json.dumps(canonical_run(i, rng)) for i in range(args.runs)).encode()
            start = time.perf_counter()
            loaded = client.post("/api/v1/runs/bulk", content=body, headers={"content-type": "application/x-ndjson"})
            loaded.raise_for_status()
            print(f"loaded {args.runs} runs in {time.perf_counter() - start:.1f} s")
            newest = client.get("/api/v1/runs?limit=2").json()["items"]
            a, b = newest[1]["id"], newest[0]["id"]
            pages = {
                "/": "/",
                "/runs/new": "/runs/new",
                "/runs/{id}": f"/runs/{b}",
                "/deployments/{name}": f"/deployments/{newest[0]['deployment']}",
                "/compare": f"/compare?a={a}&b={b}",
                "/rules": "/rules",
                "/rules/{id}": "/rules/PRE002",
            }
            print(f"{'page':24} {'median ms':>10} {'p95 ms':>8}  (n={args.repeat}, after 3 warm-ups)")
            for name, path in pages.items():
                for _ in range(3):  # the first read of a bulk-loaded run analyses it, once
                    client.get(path).raise_for_status()
                times = []
                for _ in range(args.repeat):
                    t0 = time.perf_counter()
                    response = client.get(path)
                    times.append((time.perf_counter() - t0) * 1000)
                    response.raise_for_status()
                times.sort()
                p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
                print(f"{name:24} {statistics.median(times):10.1f} {p95:8.1f}")
    print(f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
