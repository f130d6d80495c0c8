"""advisor's own canonical run JSON (DESIGN §4): one object, a JSON array of them, or NDJSON.

Decoded strictly with :func:`advisor.canonical.decode_run`: a misspelt key is an error naming it, not
a silently dropped value.
"""

from __future__ import annotations

from typing import Any

import msgspec

from advisor.canonical import CanonicalRun, decode_run, validate_run
from advisor.errors import IngestError, InvalidInput
from advisor.ingest.base import Input, ParserBase, is_warmup
from advisor.ingest.side_files import not_a_benchmark

__all__ = ["PARSERS", "CanonicalParser", "plain_canonical_run"]

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


class CanonicalParser(ParserBase):
    format_id = "canonical"
    description = "advisor canonical run JSON (an object, a JSON array, or NDJSON)"
    #: A canonical run's source is the submitter's own: nothing is stamped on it.
    tool = None
    priority = 10
    #: decode_run already applies validate_run to every run.
    validates_output = True

    def sniff(self, inp: Input) -> bool:
        records = self.records(inp)
        return bool(records) and all(_is_run(r) for r in records or ())

    def records(self, inp: Input) -> list[Any] | None:
        return inp.records

    def parse_record(self, record: Any, prefix: str) -> list[CanonicalRun]:
        if not isinstance(record, dict):
            raise self.fail("each run must be a JSON object", self.record_field(prefix))
        try:
            return [decode_run(record)]
        except IngestError:
            raise
        except InvalidInput as exc:
            where = f"{prefix}{exc.field or ''}".rstrip(".") or None
            raise IngestError(exc.detail, field=where, format=self.format_id) from exc


PARSERS = [CanonicalParser()]


def plain_canonical_run(inp: Input) -> CanonicalRun | None:
    """The run of a body that is one valid canonical run object, as ``registry.parse(inp, "auto")``
    (or ``"canonical"``) returns it; None for anything else (an array, a wrapper, another format, an
    invalid or warm-up record), which then takes the general path and its errors.

    The general path asks the side-file recognisers, sniffs the parsers in priority order (the
    canonical parser first: priority 10, sorted before ``prometheus``), reads the records, filters
    warm-ups and decodes; this asks the same questions of the one object directly, in the same
    order, and decodes it as :func:`decode_run` does (``tests/unit/ingest/test_plain_canonical.py``
    compares both over every fixture). It runs for every ``POST /runs`` of a canonical run.
    """
    doc = inp.json
    if not _is_run(doc) or not_a_benchmark(inp) is not None or is_warmup(doc):
        return None
    try:
        run = msgspec.convert(doc, CanonicalRun, strict=False)
        validate_run(run)
    except (msgspec.ValidationError, InvalidInput):
        return None
    run.source.format = run.source.format or CanonicalParser.format_id
    if inp.file_name and not run.source.file_name:
        run.source.file_name = inp.file_name
    return run
