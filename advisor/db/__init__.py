"""Persistence: SQLAlchemy models, engine configuration and migrations."""
