"""``advisor serve``: the API (and OpenAPI at /schema), under uvicorn."""

from __future__ import annotations

import click

from advisor.cli.database import settings_or_exit

__all__ = ["serve_command"]


@click.command("serve")
@click.option("--host", default=None, help="Interface to bind (ADVISOR_HOST, default 127.0.0.1).")
@click.option("--port", type=int, default=None, help="TCP port (ADVISOR_PORT, default 8000).")
@click.option("--workers", type=int, default=None, help="Worker processes (ADVISOR_WORKERS, default 1).")
@click.option("--reload", is_flag=True, help="Restart on code changes (development).")
def serve_command(host: str | None, port: int | None, workers: int | None, reload: bool) -> None:
    """Serve the API (and OpenAPI at /schema)."""
    import uvicorn

    settings = settings_or_exit()
    uvicorn.run(
        "advisor.server.asgi:app",
        host=host or settings.server.host,
        port=port or settings.server.port,
        workers=None if reload else (workers or settings.server.workers),
        reload=reload,
        log_level=settings.server.log_level,
        proxy_headers=True,
        access_log=False,  # requests are logged by the app, with their request id
    )
