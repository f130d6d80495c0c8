"""Built-in parsers, one module per format. Each module exposes ``PARSERS``."""
