"""Helpers shared by the server-response parsers (Ollama, llama-server) that ``_util`` lacks.

Responses saved by hand come in many shapes: one JSON object, a JSON array, JSON-Lines, objects
appended back to back by ``curl >> file`` (Ollama and llama-server end a response without a
newline), server-sent events (``data: {...}`` lines), PowerShell's ``{"value": [...], "Count": n}``
wrapper. :func:`json_records` reads them all into a list of records.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from advisor.canonical import CanonicalRun, Percentiles
from advisor.ingest._util import percentiles_from_values
from advisor.ingest.base import Input

__all__ = ["MIN_PREFILL_TOKENS", "distribution", "document_of", "json_records", "text_of"]

#: A response that evaluated fewer prompt tokens than this gives no prefill speed (FORMATS.md §9.3,
#: llama-server: "skip it when prompt_n is very small"): with the rest of the prompt served from the
#: cache, fixed per-request overhead dominates such a tiny batch.
MIN_PREFILL_TOKENS = 32

_SSE_FIELDS = ("event:", "id:", "retry:", ":")


def _concatenated(text: str) -> list[Any] | None:
    """Every JSON value in ``text`` when it is nothing but JSON values separated by whitespace."""
    decoder = json.JSONDecoder()
    out: list[Any] = []
    index, end = 0, len(text)
    while True:
        while index < end and text[index].isspace():
            index += 1
        if index >= end:
            return out
        try:
            value, index = decoder.raw_decode(text, index)
        except ValueError:
            return None
        out.append(value)


def _unwrap(doc: Any) -> list[Any]:
    if isinstance(doc, list):
        return doc
    # PowerShell 5 `ConvertTo-Json` of an array piped in writes {"value": [...], "Count": n}.
    if isinstance(doc, dict) and set(doc) == {"value", "Count"} and isinstance(doc["value"], list):
        return list(doc["value"])
    return [doc]


def text_of(inp: Input) -> str | None:
    """The body as text, UTF-16 with a byte-order mark included.

    ``Input.text`` treats any NUL byte as binary before it looks for a UTF-16 BOM, so a file saved
    by Windows PowerShell's ``Out-File`` (UTF-16 LE with BOM) reads as None there.
    """
    text = inp.text
    if text is None and inp.data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        try:
            return inp.data.decode("utf-16")
        except UnicodeDecodeError:
            return None
    return text


def document_of(inp: Input) -> Any:
    """The body as one JSON document (``Input.json``), also when it is UTF-16 text; else None."""
    doc = inp.json
    if doc is not None or inp.text is not None:
        return doc
    text = text_of(inp)
    if text is None or not text.lstrip().startswith(("{", "[")):
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def json_records(inp: Input) -> tuple[list[Any], int]:
    """The JSON records in the body and the number of non-JSON lines skipped (0 unless the body
    mixes JSON with other text, such as stderr or SSE comments)."""
    doc = document_of(inp)
    if doc is not None:
        return _unwrap(doc), 0
    text = text_of(inp)
    if text is None:
        return [], 0
    whole = _concatenated(text)
    if whole is not None:
        return [r for item in whole for r in _unwrap(item)], 0
    records: list[Any] = []
    skipped = 0
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(_SSE_FIELDS):
            continue
        if stripped.startswith("data:"):
            stripped = stripped[5:].strip()
            if stripped == "[DONE]":
                continue
        values = _concatenated(stripped)
        if values is None:
            skipped += 1
        else:
            records.extend(values)
    return records, skipped


def distribution(values: Sequence[float]) -> Percentiles:
    """Statistics of per-response values: with one response only its value, as the mean (a
    percentile or a spread of one sample would claim more than was measured)."""
    if not values:
        return Percentiles()
    if len(values) == 1:
        return Percentiles(mean=float(values[0]))
    return percentiles_from_values(values)


def runs_per_model(
    responses: Sequence[tuple[int, dict[str, Any]]],
    build: Callable[[str, list[tuple[int, dict[str, Any]]]], CanonicalRun],
) -> list[CanonicalRun]:
    """One run per ``model`` among server responses (llama-server, Ollama), in order of appearance;
    each run notes when the file held several models."""
    by_model: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for index, response in responses:
        model = response.get("model")
        by_model.setdefault(model if isinstance(model, str) else "", []).append((index, response))
    runs = [build(model, items) for model, items in by_model.items()]
    if len(runs) > 1:
        for run in runs:
            run.source.notes.append(f"the file holds {len(runs)} models; this run is one of them")
    return runs
