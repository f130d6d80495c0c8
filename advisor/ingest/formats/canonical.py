"""advisor's own canonical run JSON (DESIGN §4): one object, a JSON array of them, or NDJSON.

Decoded strictly with :func:`advisor.canonical.decode_run`: a misspelt key is an error naming it, not
a silently dropped value.
"""

from __future__ import annotations

from typing import Any

from advisor.canonical import CanonicalRun, decode_run
from advisor.errors import IngestError, InvalidInput
from advisor.ingest.base import Input, ParserBase

__all__ = ["PARSERS", "CanonicalParser"]

_FIELDS = frozenset(CanonicalRun.__struct_fields__)
# A canonical run is recognised by holding one of these sections and nothing but canonical keys.
_MARKERS = ("metrics", "setup", "workload")


def _is_run(doc: object) -> bool:
    return (
        isinstance(doc, dict)
        and bool(doc)
        and all(isinstance(k, str) and k in _FIELDS for k in doc)
        and any(isinstance(doc.get(k), dict) for k in _MARKERS)
    )


def _records(inp: Input) -> list[Any] | None:
    doc = inp.json
    if isinstance(doc, dict):
        return [doc]
    if isinstance(doc, list):
        return doc
    return inp.json_lines


class CanonicalParser(ParserBase):
    format_id = "canonical"
    description = "advisor canonical run JSON (an object, a JSON array, or NDJSON)"
    tool = "advisor"
    priority = 10
    #: decode_run already applies validate_run to every run.
    validates_output = True

    def sniff(self, inp: Input) -> bool:
        records = _records(inp)
        return bool(records) and all(_is_run(r) for r in records or ())

    def parse(self, inp: Input) -> list[CanonicalRun]:
        records = _records(inp)
        if records is None:
            inp.require_json()
            raise self.fail("expected a run object, a JSON array of runs or NDJSON", "body")
        runs: list[CanonicalRun] = []
        for index, record in enumerate(records):
            prefix = f"[{index}]" if len(records) > 1 else ""
            if not isinstance(record, dict):
                raise self.fail("each run must be a JSON object", prefix or "body")
            try:
                runs.append(decode_run(record))
            except IngestError:
                raise
            except InvalidInput as exc:
                where = ".".join(p for p in (prefix, exc.field or "") if p) or None
                raise IngestError(exc.detail, field=where, format=self.format_id) from exc
        return runs


PARSERS = [CanonicalParser()]
