"""ASGI entry point for uvicorn workers: ``uvicorn advisor.server.asgi:app``.

Each worker of ``advisor serve --workers N`` imports this module and nothing of the CLI: the app
factory, the domains it routes to and their libraries, never the ML stack (scikit-learn, SciPy,
pandas load when a fit or a model is first needed), so a worker starts within its supervisor's
health-check window on a loaded host. ``tests/unit/test_asgi_imports.py`` holds it to that.
"""

from advisor.server.app import create_app

__all__ = ["app"]

app = create_app()
