"""ASGI entry point for uvicorn workers: ``uvicorn advisor.server.asgi:app``."""

from advisor.server.app import create_app

app = create_app()
