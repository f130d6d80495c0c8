"""A real ``advisor serve`` in a subprocess (uvicorn, one or several worker processes) for the tests
that need what an in-process TestClient cannot give: several workers on one database, raw sockets,
uvicorn's own connection handling."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

__all__ = ["free_port", "serve"]

BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(url: str, extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ADVISOR_", "PROMETHEUS_"))}
    env.update(
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        ADVISOR_DATABASE_URL=url,
        ADVISOR_LOG_LEVEL="warning",
        ADVISOR_AUTH_RATE_LIMIT_PER_SECOND="0",
    )
    env.update(extra)
    return env


@contextlib.contextmanager
def serve(url: str, cwd: Path, *, workers: int = 1, env: dict[str, str] | None = None) -> Iterator[str]:
    """``advisor serve --workers N`` on the (migrated) database ``url``; yields the base URL once
    every worker can answer, and stops the server (SIGTERM, then SIGKILL) afterwards."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [str(BIN / "advisor"), "serve", "--port", str(port), "--workers", str(workers)],
        env=_env(url, env or {}),
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 180
        answered = 0
        # Several answers in a row: with N workers, each has likely imported the app by then.
        while answered < 4 * workers:
            if proc.poll() is not None:
                raise AssertionError("advisor serve exited: " + (proc.stdout.read().decode() if proc.stdout else ""))
            if time.monotonic() > deadline:
                raise AssertionError("advisor serve was not ready in time")
            try:
                ok = httpx.get(base + "/health/live", timeout=2).status_code == 200
            except httpx.HTTPError:
                ok = False
            answered = answered + 1 if ok else 0
            time.sleep(0.1 if ok else 0.3)
        yield base
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stdout is not None:
            output = proc.stdout.read().decode(errors="replace")
            if output.strip():
                print(output[-4000:])
