"""Catalog context: the shipped catalogs loaded into the database, plus entries users add."""
