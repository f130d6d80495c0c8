"""The weekly fleet report's database side: SQL aggregation and snapshots (services), delivery to
chat (delivery), the optional schedule (schedule) and the endpoints (controllers).

Nothing is imported here, so the app's start-up hooks (schedule) stay free of the report stack.
"""

__all__: list[str] = []
