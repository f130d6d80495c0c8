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
from advisor.ingest.side_files import not_a_benchmark, side_file

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


def _claimed(inp: Input) -> Parser | None:
    for p in parsers():
        try:
            if p.sniff(inp):
                return p
        except Exception:
            continue
    return None


def _looks_like_a_log(text: str, exc: json.JSONDecodeError) -> bool:
    """True when a body starting with ``[`` or ``{`` is a text log, not broken JSON: a log line such
    as ``[TensorRT-LLM][INFO] …`` or ``[2025-01-01 12:00:00] …`` breaks on its first line although
    more lines follow, where truncated JSON breaks late (or is one line)."""
    stripped = text.lstrip()
    if stripped[:1] == "[" and stripped[1:2].isalpha() and not stripped[1:].startswith(("true", "false", "null")):
        return True
    return exc.lineno == 1 and stripped.count("\n") > 1


def _refuse_recognised(inp: Input) -> None:
    """A 422 for a file recognised as a side file or as no benchmark at all."""
    side = side_file(inp)
    if side is not None:
        raise IngestError(
            f"this is {side.what}, a side file: send {side.instead} (or put this file beside it in a "
            'wrapper, role "side")',
            field="body",
            side_file=side.name,
        )
    other = not_a_benchmark(inp)
    if other is not None:
        raise IngestError(f"this is {other.what}, not a benchmark: send {other.instead}", field="body")


def detect(inp: Input) -> Parser:
    """The first parser whose sniff claims the input."""
    if not inp.data.strip():
        raise MalformedInput("the body is empty", field="body")
    if not_a_benchmark(inp) is not None:
        _refuse_recognised(inp)
    found = _claimed(inp)
    if found is not None:
        return found
    if inp.text is None:
        raise MalformedInput("the body is binary, not a benchmark file", field="body")
    _refuse_recognised(inp)
    stripped = inp.text.lstrip()
    if stripped[:1] in ("{", "[") and inp.json is None and inp.json_lines is None:
        # It meant to be JSON: say where it breaks rather than "unknown format" (unless it is a log).
        try:
            json.loads(inp.text)
        except json.JSONDecodeError as exc:
            if not _looks_like_a_log(inp.text, exc):
                raise MalformedInput(f"the body is not valid JSON (truncated?): {exc}", field="body") from exc
    known = ", ".join(p.format_id for p in parsers())
    raise UnsupportedFormat(f"no parser recognises this file; pass ?format= with one of: {known}", field="format")


def _sniffs(parser: Parser, inp: Input) -> bool:
    try:
        return bool(parser.sniff(inp))
    except Exception:
        return False


def _what_it_looks_like(inp: Input, forced: Parser) -> str | None:
    """What the file looks like when it is not in the forced format, for the error message."""
    if _sniffs(forced, inp):
        return None
    other = _claimed(inp)
    if other is not None:
        return f"it looks like {other.description}: drop ?format= or pass ?format={other.format_id}"
    recognised = side_file(inp) or not_a_benchmark(inp)
    if recognised is not None:
        return f"it looks like {recognised.what}"
    if inp.text is None:
        return "it is binary data"
    if inp.json is None and inp.json_lines is None:
        return "it is plain text, not JSON"
    return None


def parse(inp: Input, format_id: str = "auto") -> tuple[str, list[CanonicalRun]]:
    """Detect (or take) the format and parse. Returns the format id and the runs."""
    forced = format_id not in ("", "auto")
    parser = get_parser(format_id) if forced else detect(inp)
    if forced and not _sniffs(parser, inp) and (_claimed(inp) is not None or side_file(inp) or not_a_benchmark(inp)):
        # Another format claims the file: parsing it as the forced one would store nonsense.
        raise IngestError(
            f"the file is not {parser.description} (?format={parser.format_id}); {_what_it_looks_like(inp, parser)}",
            field="format",
            format=parser.format_id,
        )
    try:
        runs = parser.parse(inp)
    except (IngestError, MalformedInput) as exc:
        hint = _what_it_looks_like(inp, parser) if forced else None
        if hint is None:
            raise
        raise IngestError(
            f"the file is not {parser.description} (?format={parser.format_id}); {hint}",
            field="format",
            format=parser.format_id,
        ) from exc
    except Exception as exc:  # a parser bug must still surface as a clear 4xx, never a 500
        hint = _what_it_looks_like(inp, parser) if forced else None
        if hint is not None:
            raise IngestError(
                f"the file is not {parser.description} (?format={parser.format_id}); {hint}",
                field="format",
                format=parser.format_id,
            ) from exc
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
