"""SCH rules (scheduling). One rule per module, named by its ID; discovered by advisor.rules.registry."""

__all__: list[str] = []
