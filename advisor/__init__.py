"""advisor: LLM serving configuration advisor."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("llm-advisor")
except PackageNotFoundError:  # pragma: no cover - running from a bare source tree
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
