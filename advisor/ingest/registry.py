"""Parser registry: built-in parsers are every module in :mod:`advisor.ingest.formats` that exposes
``PARSERS`` (a list of parser instances); third-party parsers come from the ``advisor.ingest``
entry-point group. Detection asks each parser's ``sniff`` in ``priority`` order (lower first, as in
docs/formats.md §9.4) and takes the first that claims the file.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
from functools import cache
from importlib.metadata import entry_points

from advisor.canonical import CanonicalRun, validate_run
from advisor.errors import IngestError, InvalidInput, MalformedInput, UnsupportedFormat
from advisor.ingest import formats as _formats_pkg
from advisor.ingest.base import DEFAULT_PRIORITY, Input, Parser

__all__ = ["detect", "get_parser", "parse", "parsers"]


@cache
def parsers() -> tuple[Parser, ...]:
    """Every registered parser, in sniffing order."""
    found: list[Parser] = []
    for info in pkgutil.iter_modules(_formats_pkg.__path__):
        module = importlib.import_module(f"{_formats_pkg.__name__}.{info.name}")
        found.extend(getattr(module, "PARSERS", ()))
    for ep in entry_points(group="advisor.ingest"):
        obj = ep.load()
        found.extend(obj if isinstance(obj, list | tuple) else [obj() if isinstance(obj, type) else obj])
    ids = [p.format_id for p in found]
    duplicates = {i for i in ids if ids.count(i) > 1}
    if duplicates:
        raise RuntimeError(f"duplicate ingest format ids: {sorted(duplicates)}")
    return tuple(sorted(found, key=lambda p: (getattr(p, "priority", DEFAULT_PRIORITY), p.format_id)))


def get_parser(format_id: str) -> Parser:
    for p in parsers():
        if p.format_id == format_id:
            return p
    known = ", ".join(p.format_id for p in parsers())
    raise UnsupportedFormat(f"unknown format {format_id!r}; known formats: {known}", field="format")


def detect(inp: Input) -> Parser:
    """The first parser whose sniff claims the input."""
    if not inp.data.strip():
        raise MalformedInput("the body is empty", field="body")
    for p in parsers():
        try:
            if p.sniff(inp):
                return p
        except Exception:
            continue
    if inp.text is None:
        raise MalformedInput("the body is binary, not a benchmark file", field="body")
    stripped = inp.text.lstrip()
    if stripped[:1] in ("{", "[") and inp.json is None and inp.json_lines is None:
        # It meant to be JSON: say where it breaks rather than "unknown format".
        try:
            json.loads(inp.text)
        except ValueError as exc:
            raise MalformedInput(f"the body is not valid JSON (truncated?): {exc}", field="body") from exc
    known = ", ".join(p.format_id for p in parsers())
    raise UnsupportedFormat(f"no parser recognises this file; pass ?format= with one of: {known}", field="format")


def parse(inp: Input, format_id: str = "auto") -> tuple[str, list[CanonicalRun]]:
    """Detect (or take) the format and parse. Returns the format id and the runs."""
    parser = detect(inp) if format_id in ("", "auto") else get_parser(format_id)
    try:
        runs = parser.parse(inp)
    except (IngestError, MalformedInput):
        raise
    except Exception as exc:  # a parser bug must still surface as a clear 4xx, never a 500
        raise IngestError(
            f"{parser.format_id}: could not read the file ({type(exc).__name__}: {exc})",
            field="body",
            format=parser.format_id,
        ) from exc
    if not runs:
        raise IngestError(f"{parser.format_id}: the file holds no runs", field="body")
    # A parser whose runs already went through validate_run (the canonical one decodes with
    # decode_run) says so, sparing bulk ingest a second pass.
    validated = bool(getattr(parser, "validates_output", False))
    for index, run in enumerate(runs):
        run.source.format = run.source.format or parser.format_id
        if inp.file_name and not run.source.file_name:
            run.source.file_name = inp.file_name
        if validated:
            continue
        # Every parser's output meets the same contract as a canonical run submitted directly: a
        # physically impossible value is a 422 naming the field, never a stored run.
        try:
            validate_run(run)
        except IngestError:
            raise
        except InvalidInput as exc:
            where = f"runs[{index}].{exc.field}" if len(runs) > 1 and exc.field else exc.field
            raise IngestError(f"{parser.format_id}: {exc.detail}", field=where, format=parser.format_id) from exc
    return parser.format_id, runs
