"""The ParserBase template: what every built-in parser gets without writing it."""

from __future__ import annotations

from typing import Any

import pytest

from advisor.canonical import CanonicalRun, Metrics, Source
from advisor.errors import IngestError, MalformedInput
from advisor.ingest import Input, ParserBase, parsers
from advisor.ingest.base import DEFAULT_PRIORITY


class _Lines(ParserBase):
    """One run per JSON-Lines record; notes that the file had blank lines."""

    format_id = "test_lines"
    description = "test JSON-Lines"
    tool = "test-tool"

    def sniff(self, inp: Input) -> bool:
        return inp.json_lines is not None

    def read(self, inp: Input) -> tuple[list[Any], list[str]]:
        records = inp.json_lines or []
        return records, ["file note"]

    def parse_record(self, record: Any, prefix: str) -> list[CanonicalRun]:
        if not isinstance(record, dict):
            raise self.fail("not an object", self.record_field(prefix))
        tool = record.get("tool")
        return [CanonicalRun(metrics=Metrics(), source=Source(tool=tool, notes=["run note"]))]


class _Document(ParserBase):
    format_id = "test_document"
    description = "a test document"
    tool = "doc-tool"

    def sniff(self, inp: Input) -> bool:
        return False

    def parse_record(self, record: Any, prefix: str) -> list[CanonicalRun]:
        return [CanonicalRun()]


def test_file_notes_come_first_and_the_source_is_stamped() -> None:
    runs = _Lines().parse(Input(b'{"a": 1}\n{"tool": "own tool"}\n'))
    assert [r.source.notes for r in runs] == [["file note", "run note"], ["file note", "run note"]]
    assert [r.source.format for r in runs] == ["test_lines", "test_lines"]
    # A run that names its own, more precise tool keeps it.
    assert [r.source.tool for r in runs] == ["test-tool", "own tool"]


def test_a_bad_record_is_named_by_its_index_only_in_a_multi_record_file() -> None:
    with pytest.raises(IngestError) as several:
        _Lines().parse(Input(b'{"a": 1}\n[1]\n'))
    assert several.value.field == "[1]"
    with pytest.raises(IngestError) as one:
        _Lines().parse(Input(b"[1]\n"))
    assert one.value.field == "body"


@pytest.mark.parametrize("body", [b"", b"   ", b"not json", b'{"truncated": '])
def test_an_unreadable_body_is_a_400_whatever_the_format(body: bytes) -> None:
    with pytest.raises(MalformedInput):
        _Document().parse(Input(body))


def test_default_priority_and_every_builtin_declares_its_own() -> None:
    assert _Document.priority == DEFAULT_PRIORITY
    builtin = [p for p in parsers() if isinstance(p, ParserBase)]
    assert builtin, "no built-in parser derives from ParserBase"
    assert all(p.priority < DEFAULT_PRIORITY for p in builtin)
    ordered = [(p.priority, p.format_id) for p in builtin]
    assert ordered == sorted(ordered)
