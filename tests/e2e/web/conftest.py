"""A real advisor server (uvicorn, its own process, a free port) and a real Chromium driven by
Playwright, on SQLite and on Postgres.

Chromium is Debian's (/usr/bin/chromium); Playwright's own browser download is never used. Without
Playwright or Chromium the tests skip, unless ADVISOR_REQUIRE_BROWSER=1 (set by .ci/run), when they fail.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from advisor.settings import DatabaseSettings

CHROMIUM = Path(os.environ.get("ADVISOR_CHROMIUM", "/usr/bin/chromium"))
REQUIRE = os.environ.get("ADVISOR_REQUIRE_BROWSER") == "1"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "web"

pytestmark = pytest.mark.e2e


def _unavailable() -> str | None:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "Playwright for Python is not installed (the dev extra)"
    if not CHROMIUM.exists():
        return f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    return None


def _skip_or_fail(reason: str) -> None:
    if REQUIRE:
        pytest.fail(f"ADVISOR_REQUIRE_BROWSER=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture
def browser() -> Iterator[object]:
    """Chromium, per test: Playwright's sync API runs an event loop in this thread, so it must start
    after the database fixtures have run their ``asyncio.run`` and stop before their teardown
    (request ``server`` before ``page``)."""
    reason = _unavailable()
    if reason:
        _skip_or_fail(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        yield chromium
        chromium.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Server:
    url: str
    database_url: str
    env: dict[str, str]

    def cli(self, *args: str) -> str:
        """Run the advisor CLI against this server's database (e.g. to create a token)."""
        done = subprocess.run(
            [sys.executable, "-m", "advisor", *args], env=self.env, capture_output=True, text=True, check=True
        )
        return done.stdout


def _start(database_url: str, tmp: Path, extra_env: dict[str, str]) -> Iterator[Server]:
    from advisor.db import migrate

    migrate.upgrade(DatabaseSettings(url=database_url))
    port = _free_port()
    env = {
        **os.environ,
        "ADVISOR_DATABASE_URL": database_url,
        "ADVISOR_LOG_LEVEL": "warning",
        "ADVISOR_SECRET_KEY_FILE": str(tmp / "secret-key"),
        **extra_env,
    }
    log = (tmp / f"server-{port}.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "advisor.server.asgi:app", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(url + "/health", timeout=2).status_code < 500:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                log.flush()
                pytest.fail(f"the server did not start: {(tmp / log.name).read_text()[-3000:]}")
            time.sleep(0.2)
        yield Server(url=url, database_url=database_url, env=env)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture
def server(clean_db: str, tmp_path: Path) -> Iterator[Server]:
    """An open (auth mode none) server on each backend's test database."""
    yield from _start(clean_db, tmp_path, {"ADVISOR_AUTH_MODE": "none"})


@pytest.fixture
def token_server(clean_db: str, tmp_path: Path) -> Iterator[Server]:
    """A server in token mode."""
    yield from _start(clean_db, tmp_path, {"ADVISOR_AUTH_MODE": "token"})


@pytest.fixture
def page(browser: object, request: pytest.FixtureRequest) -> Iterator[object]:
    """A fresh browser context and page; a screenshot is saved to tests/artifacts/web/ at the end."""
    context = browser.new_context(viewport={"width": 1366, "height": 900})  # type: ignore[attr-defined]
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.console_errors = errors  # CSP violations show up here
    yield page
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    name = request.node.name.replace("/", "_").replace("[", "-").replace("]", "")
    try:
        page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
    finally:
        context.close()
