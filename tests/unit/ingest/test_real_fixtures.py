"""Every registered format is tested on at least one real file: written by the tool during a real
run and committed to a public repository, copied byte for byte, its upstream repository, path and
commit recorded in tests/fixtures/ingest/PROVENANCE.md.

Hand-written ("edge") and simulated ("sample") files pin behaviours, but only a real file shows what
the tool writes in the wild. A format for which no real file could be found is listed in
``WITHOUT_REAL_FILE`` with the reason, and its test is an expected failure: strict, so that the day
a real file is added the list must shrink.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from advisor.ingest import Input, parsers

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "ingest"
PROVENANCE = FIXTURES / "PROVENANCE.md"

#: Formats with no real file yet, and why (searched: formats/real/PROVENANCE.md, "Gaps").
WITHOUT_REAL_FILE: dict[str, str] = {
    "canonical": "advisor's own run format: no public repository holds one written by a real run",
}

_SECTION = re.compile(r"^## (\S+)\s*$", re.MULTILINE)
_ROW = re.compile(r"^\| `([^`]+)` \| (\w+) \| (.*) \|\s*$", re.MULTILINE)
_COMMIT = re.compile(r"\b[0-9a-f]{40}\b")


def _rows() -> dict[str, list[tuple[str, str, str]]]:
    """``{format id: [(file, kind, origin), ...]}`` from the provenance tables."""
    text = PROVENANCE.read_text("utf-8")
    heads = list(_SECTION.finditer(text))
    out: dict[str, list[tuple[str, str, str]]] = {}
    for head, nxt in zip(heads, [*heads[1:], None], strict=True):
        body = text[head.end() : nxt.start() if nxt else len(text)]
        out[head.group(1)] = [(m.group(1), m.group(2), m.group(3)) for m in _ROW.finditer(body)]
    return out


ROWS = _rows()
FORMATS = sorted(p.format_id for p in parsers())


def _real(format_id: str) -> list[tuple[str, str]]:
    return [(name, origin) for name, kind, origin in ROWS.get(format_id, []) if kind == "real"]


@pytest.mark.parametrize(
    "format_id",
    [
        pytest.param(f, marks=pytest.mark.xfail(strict=True, reason=WITHOUT_REAL_FILE[f]))
        if f in WITHOUT_REAL_FILE
        else f
        for f in FORMATS
    ],
)
def test_format_has_a_real_fixture(format_id: str) -> None:
    real = _real(format_id)
    assert real, f"{format_id} has no real fixture in tests/fixtures/ingest/{format_id}/ (see PROVENANCE.md)"
    for name, origin in real:
        path = FIXTURES / format_id / name
        assert path.is_file(), f"PROVENANCE.md lists {format_id}/{name}, which is missing"
        assert _COMMIT.search(origin), f"{format_id}/{name}: the origin names no upstream commit"


@pytest.mark.parametrize(("format_id", "name"), [(f, name) for f in FORMATS for name, _ in _real(f)], ids=str)
def test_real_fixture_is_detected_as_its_format(format_id: str, name: str) -> None:
    inp = Input((FIXTURES / format_id / name).read_bytes(), file_name=name)
    claimed = [p.format_id for p in parsers() if p.sniff(inp)]
    assert format_id in claimed


def test_every_fixture_directory_is_documented() -> None:
    # A file copied without its provenance entry would count for nothing above: say so.
    for directory in sorted(p for p in FIXTURES.iterdir() if p.is_dir()):
        inputs = {p.name for p in directory.iterdir() if p.is_file() and not p.name.endswith(".expected.json")}
        listed = {name for name, _, _ in ROWS.get(directory.name, [])}
        assert inputs <= listed, f"{directory.name}: no PROVENANCE.md entry for {sorted(inputs - listed)}"


def test_the_formats_without_a_real_file_are_registered_formats() -> None:
    assert set(WITHOUT_REAL_FILE) <= set(FORMATS)
