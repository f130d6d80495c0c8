"""Every "docs/formats.md §N" reference in the code and the tests names a section that exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "formats.md"

# "docs/formats.md §3, §9.3" and "docs/formats.md §4.1 and §9.3" cite several sections at once.
_REFERENCE = re.compile(r"docs/formats\.md\s+((?:§\d+(?:\.\d+)*(?:,\s*|\s+and\s+)?)+)")
_SECTION = re.compile(r"§(\d+(?:\.\d+)*)")
# Reference headings read "### 9. Normalization" or "#### 9.4 Telling the formats apart".
_HEADING = re.compile(r"^#{1,6}\s+(\d+(?:\.\d+)*)\.?\s", re.MULTILINE)


def _references() -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for tree in ("advisor", "tests"):
        for path in sorted((ROOT / tree).rglob("*")):
            if path.suffix not in (".py", ".md", ".toml", ".yaml") or not path.is_file():
                continue
            text = path.read_text("utf-8", errors="replace")
            for match in _REFERENCE.finditer(text):
                for section in _SECTION.findall(match.group(1)):
                    found.append((f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1}", section))
    return found


REFERENCES = _references()


def test_the_code_cites_the_format_reference() -> None:
    # The parsers cite their format's section; no references at all means the scan is broken.
    assert len(REFERENCES) >= 30


@pytest.mark.parametrize(("where", "section"), REFERENCES, ids=[f"{w}§{s}" for w, s in REFERENCES])
def test_reference_names_an_existing_section(where: str, section: str) -> None:
    sections = set(_HEADING.findall(DOC.read_text("utf-8")))
    assert section in sections, f"{where} cites docs/formats.md §{section}, which has no such section"


def test_no_reference_to_the_old_out_of_repo_file() -> None:
    stale = [
        str(path.relative_to(ROOT))
        for tree in ("advisor", "tests")
        for path in (ROOT / tree).rglob("*.py")
        if "FORMATS" + ".md" in path.read_text("utf-8", errors="replace")
    ]
    assert stale == []
