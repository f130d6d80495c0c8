"""Physics-only /predict, in-process (DESIGN §8 / issue: <= 1 ms per call).

Two measurements, both in this process:
1. the predict service: name resolution (aliases), roofline, prior expectations and the response;
2. the whole POST /api/v1/predict handler through Litestar's in-process test client (routing,
   msgspec decoding and encoding, a database session), on a migrated SQLite database.

    .venv/bin/python bench/predict.py [calls]
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def service(calls: int) -> float:
    from advisor.canonical import Setup, Workload
    from advisor.catalog import Catalog
    from advisor.domain.predictions.services import predict
    from advisor.ml.prior import prior_expectations

    catalog = Catalog.default()
    setup = Setup(
        hardware="NVIDIA H100 80GB HBM3", model="meta-llama/Llama-3.1-8B-Instruct", quantization="fp8", runtime="vllm"
    )
    samples = []
    for _ in range(5):
        start = time.perf_counter()
        for i in range(calls):
            predict(catalog, setup, Workload(prompt_tokens_mean=2000 + (i & 7), concurrency=16), prior_expectations)
        samples.append((time.perf_counter() - start) / calls)
    return min(samples)


def http(calls: int) -> float:
    from litestar.testing import AsyncTestClient

    from advisor.server import create_app

    body = {
        "setup": {"hardware": "nvidia-h100-sxm", "model": "llama-3.1-8b", "quantization": "fp8", "runtime": "vllm"},
        "workload": {"prompt_tokens_mean": 2000, "concurrency": 16},
    }

    async def run() -> float:
        async with AsyncTestClient(app=create_app()) as client:
            for _ in range(50):
                assert (await client.post("/api/v1/predict", json=body)).status_code == 200
            samples = []
            for _ in range(3):
                start = time.perf_counter()
                for _ in range(calls // 10):
                    await client.post("/api/v1/predict", json=body)
                samples.append((time.perf_counter() - start) / (calls // 10))
            return statistics.median(samples)

    return asyncio.run(run())


def main() -> None:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 5_000
    per_call = service(calls)
    print(f"predict service (resolve + physics + prior): {per_call * 1e6:8.1f} µs/call (target <= 1000)")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["ADVISOR_DATABASE_URL"] = f"sqlite+aiosqlite:///{tmp}/predict.db"
        os.environ["ADVISOR_LOG_LEVEL"] = "warning"
        subprocess.run([sys.executable, "-m", "advisor", "db", "upgrade"], cwd=ROOT, check=True, capture_output=True)
        per_request = http(calls)
    print(f"POST /api/v1/predict in-process (test client): {per_request * 1e6:8.1f} µs/call")
    print("PASS" if per_call <= 1e-3 else "BELOW TARGET")


if __name__ == "__main__":
    main()
