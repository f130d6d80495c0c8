"""Helpers shared by the benchmarks: free ports, servers in subprocesses, synthetic runs."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import random
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
#: The HTTP protocol `advisor serve` gives uvicorn (advisor.cli.serve._http_protocol).
HTTP_PROTOCOL = "advisor.server.timeouts:HeaderTimeoutProtocol" if importlib.util.find_spec("httptools") else "auto"

#: The process id of each running :func:`server`, by base URL (for its memory).
PIDS: dict[str, int] = {}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def server(app: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """Run ``uvicorn app`` (one worker, one process) and yield its base URL."""
    port = free_port()
    # advisor's app is served as `advisor serve` serves it: with its HTTP protocol (the bound on
    # the request head, one write per response); the reference keeps uvicorn's default.
    protocol = [] if app.endswith("_echo_app:app") else ["--http", HTTP_PROTOCOL]
    proc = subprocess.Popen(
        [
            PYTHON,
            "-m",
            "uvicorn",
            app,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--no-access-log",
            "--log-level",
            "warning",
            *protocol,
        ],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )
    url = f"http://127.0.0.1:{port}"
    PIDS[url] = proc.pid
    try:
        echo = app.endswith("_echo_app:app")  # the reference has no /health: any answer means it is up
        wait_until_up(proc, url + "/health", what=app, tries=200, accept=lambda s: echo or s < 500)
        yield url
    finally:
        PIDS.pop(url, None)
        proc.terminate()
        proc.wait(timeout=20)


def wait_until_up(
    proc: subprocess.Popen[bytes], url: str, *, what: str, tries: int, accept: Callable[[int], bool] = lambda s: s < 500
) -> None:
    """Poll ``url`` every 0.1 s until its status is one ``accept`` takes, up to ``tries`` times;
    exit if the server process dies first."""
    for _ in range(tries):
        if proc.poll() is not None:
            raise SystemExit(f"{what} exited with {proc.returncode} before it answered")
        with contextlib.suppress(httpx.HTTPError):
            if accept(httpx.get(url, timeout=1).status_code):
                return
        time.sleep(0.1)


def rss_mb(url: str) -> float:
    """Resident memory of the :func:`server` at ``url``, in MB (Linux)."""
    for line in Path(f"/proc/{PIDS[url]}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise LookupError("no VmRSS")


_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def canonical_run(i: int, rng: random.Random) -> dict[str, Any]:
    """A realistic, distinct canonical run (Llama-3.1-8B on an A10G or L40S, vLLM)."""
    hardware = ("nvidia-a10g", "nvidia-l40s")[i % 2]
    decode = rng.uniform(20, 34) if hardware == "nvidia-a10g" else rng.uniform(30, 50)
    ttft = rng.uniform(80, 400)
    itl = 1000 / decode
    return {
        "deployment": f"bench-{i % 10}",
        # One run a minute, in submission order, as a live stream of CI submissions arrives.
        "measured_at": (_EPOCH + timedelta(minutes=i)).isoformat().replace("+00:00", "Z"),
        "labels": {"bench": "ingest", "i": str(i)},
        "setup": {
            "runtime": "vllm",
            "hardware": hardware,
            "model": "llama-3.1-8b",
            "quantization": "bf16",
            "engine_args": {"enable_prefix_caching": True, "max_num_batched_tokens": 2048},
        },
        "workload": {
            "num_requests": 200,
            "concurrency": 4,
            "prompt_tokens_mean": rng.choice([256, 1024, 2048]),
            "output_tokens_mean": 256,
        },
        "metrics": {
            "ttft_ms": {"mean": ttft, "p50": ttft * 0.9, "p90": ttft * 1.3, "p99": ttft * 1.8},
            "itl_ms": {"mean": itl, "p50": itl, "p90": itl * 1.2, "p99": itl * 1.6},
            "decode_tok_s": decode,
            "output_throughput_tok_s": decode * 3.6,
            "queue_waiting_mean": rng.choice([0, 0, 0, 1.5]),
            "kv_cache_usage_mean": rng.uniform(0.05, 0.6),
            "requests_completed": 200,
        },
    }
