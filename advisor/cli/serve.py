"""``advisor serve``: the API (and OpenAPI at /schema), under uvicorn.

With ``--workers N`` uvicorn's supervisor spawns N worker processes that each import only
:mod:`advisor.server.asgi` (the app, not the CLI), and pings each one; a worker that does not
answer within ``--timeout-worker-healthcheck`` seconds is killed and replaced. uvicorn's own default
(5 s) is too short for a worker importing the app on a loaded 2-core host, so the default here is
30 s. On SIGTERM each worker stops accepting connections and finishes its in-flight requests for up
to ``--timeout-graceful-shutdown`` seconds before the app's shutdown hooks run. Several workers
share their Prometheus counters through ``PROMETHEUS_MULTIPROC_DIR`` (see advisor.server.metrics).
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import tempfile
from typing import Any

import click

from advisor.cli.database import settings_or_exit
from advisor.client.exit_codes import ExitCode

__all__ = ["is_loopback", "serve_command"]


def is_loopback(host: str) -> bool:
    """True for an address only this machine can reach (127.0.0.0/8, ::1, ``localhost``)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a host name: it may resolve to anything
        return False


@click.command("serve")
@click.option("--host", default=None, help="Interface to bind (ADVISOR_HOST, default 127.0.0.1).")
@click.option("--port", type=int, default=None, help="TCP port (ADVISOR_PORT, default 8000).")
@click.option(
    "--workers", type=click.IntRange(1, 64), default=None, help="Worker processes (ADVISOR_WORKERS, default 1)."
)
@click.option(
    "--timeout-worker-healthcheck",
    type=click.IntRange(1),
    default=30,
    show_default=True,
    envvar="ADVISOR_TIMEOUT_WORKER_HEALTHCHECK",
    help="Seconds a worker may take to answer the supervisor's ping before it is replaced.",
)
@click.option(
    "--timeout-graceful-shutdown",
    type=click.IntRange(1),
    default=30,
    show_default=True,
    envvar="ADVISOR_TIMEOUT_GRACEFUL_SHUTDOWN",
    help="Seconds in-flight requests get to finish on SIGTERM.",
)
@click.option(
    "--insecure",
    is_flag=True,
    envvar="ADVISOR_INSECURE",
    help="Allow a non-loopback address with ADVISOR_AUTH_MODE=none (anyone who reaches it may write).",
)
@click.option("--reload", is_flag=True, help="Restart on code changes (development).")
def serve_command(
    host: str | None,
    port: int | None,
    workers: int | None,
    timeout_worker_healthcheck: int,
    timeout_graceful_shutdown: int,
    insecure: bool,
    reload: bool,
) -> None:
    """Serve the API (and OpenAPI at /schema)."""
    settings = settings_or_exit()
    bind = host or settings.server.host
    if settings.auth.mode == "none" and not is_loopback(bind) and not insecure:
        raise click.exceptions.Exit(_refuse_open_bind(bind))
    import uvicorn

    n_workers = None if reload else (workers or settings.server.workers)
    made = _share_metrics_between_workers() if n_workers is not None and n_workers > 1 else None
    try:
        uvicorn.run(
            "advisor.server.asgi:app",
            host=bind,
            port=port or settings.server.port,
            workers=n_workers,
            reload=reload,
            log_level=settings.server.log_level,
            proxy_headers=True,
            access_log=False,  # requests are logged by the app, with their request id
            **_log_config(settings.server.log_format, settings.server.log_level),
            timeout_worker_healthcheck=timeout_worker_healthcheck,
            timeout_graceful_shutdown=timeout_graceful_shutdown,
            http=_http_protocol(),
        )
    finally:
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)


def _http_protocol() -> str:
    """uvicorn's httptools protocol with a bound on the request head (advisor.server.timeouts),
    named, not imported: the supervisor process never imports the app."""
    import importlib.util

    return "advisor.server.timeouts:HeaderTimeoutProtocol" if importlib.util.find_spec("httptools") else "auto"


def _log_config(log_format: str, level: str) -> dict[str, Any]:
    """JSON logs: uvicorn's own lines too (else uvicorn's default, coloured console lines)."""
    if log_format != "json":
        return {}
    from advisor.server.logs import uvicorn_log_config

    return {"log_config": uvicorn_log_config(level)}


def _share_metrics_between_workers() -> str | None:
    """prometheus_client's multiprocess mode: each worker writes its counters to files in one
    directory, and /metrics sums every worker's (the workers inherit the variable). A fresh
    directory per start, removed at exit, unless one is configured; the one made, if any."""
    if "PROMETHEUS_MULTIPROC_DIR" in os.environ:
        return None
    made = os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="advisor-metrics-")
    return made


def _refuse_open_bind(bind: str) -> int:
    click.echo(
        f"advisor: refusing to serve on {bind} with ADVISOR_AUTH_MODE=none: anyone who can reach it could "
        "read and write every run. Set ADVISOR_AUTH_MODE=token (and create tokens with `advisor tokens create`), "
        "bind 127.0.0.1, or pass --insecure (ADVISOR_INSECURE=1) to accept it.",
        err=True,
    )
    return int(ExitCode.USAGE)
