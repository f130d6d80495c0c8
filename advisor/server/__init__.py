"""HTTP server: the app factory, plugins and the exception → problem-details mapping."""

from advisor.server.app import create_app

__all__ = ["create_app"]
