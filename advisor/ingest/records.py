"""Reading the JSON records of a hand-saved file of server responses (Ollama, llama-server).

Responses saved by hand come in many shapes: one JSON object, a JSON array, JSON-Lines, objects
appended back to back by ``curl >> file`` (Ollama and llama-server end a response without a
newline), server-sent events (``data: {...}`` lines), PowerShell's ``{"value": [...], "Count": n}``
wrapper. :func:`json_records` reads them all into a list of records; :func:`runs_per_model` turns
the responses into one run per served model.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from advisor.canonical import CanonicalRun
from advisor.ingest.base import Input

__all__ = ["first_record_is", "json_records", "records_where", "runs_per_model"]

_SSE_FIELDS = ("event:", "id:", "retry:", ":")


def _concatenated(text: str) -> list[Any] | None:
    """Every JSON value in ``text`` when it is nothing but JSON values separated by whitespace."""
    # json.JSONDecoder.raw_decode is the stdlib's way to read one value and say where it ended;
    # msgspec has no such call.
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


def json_records(inp: Input) -> tuple[list[Any], int]:
    """The JSON records in the body and the number of non-JSON lines skipped (0 unless the body
    mixes JSON with other text, such as stderr or SSE comments)."""
    doc = inp.json
    if doc is not None:
        return _unwrap(doc), 0
    text = inp.text
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


def first_record_is(inp: Input, keep: Callable[[object], bool]) -> bool:
    """Whether the body's first JSON record is one ``keep`` accepts (a JSONL parser's sniff)."""
    records, _ = json_records(inp)
    return bool(records) and keep(records[0])


def records_where(inp: Input, keep: Callable[[object], bool]) -> tuple[list[Any], list[str]]:
    """The body's JSON records that ``keep`` accepts, and a note on non-JSON lines skipped."""
    records, skipped = json_records(inp)
    notes = [f"skipped {skipped} non-JSON line(s)"] if skipped else []
    return [r for r in records if keep(r)], notes
