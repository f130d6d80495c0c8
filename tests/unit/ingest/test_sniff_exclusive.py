"""Meta-test: sniffing is unambiguous. No parser may claim a fixture of another format, so the
sniffing order (docs/formats.md §9.4, the parsers' ``priority``) never decides a file's format by
accident. Generic over every fixture directory, including ones added later."""

from __future__ import annotations

import pytest

from advisor.ingest.base import Input, Parser
from advisor.ingest.registry import parsers
from tests import ingest_goldens as golden

CASES = [
    (fixture, parser) for fixture in golden.fixtures() for parser in parsers() if parser.format_id != fixture.format_id
]


@pytest.mark.parametrize(("fixture", "parser"), CASES, ids=[f"{p.format_id}-vs-{f.id}" for f, p in CASES])
def test_parser_does_not_claim_another_formats_fixture(fixture: golden.Fixture, parser: Parser) -> None:
    inp = Input(fixture.path.read_bytes(), file_name=fixture.path.name)
    assert parser.sniff(inp) is False


@pytest.mark.parametrize("fixture", list(golden.fixtures()), ids=lambda f: f.id)
def test_own_parser_claims_its_fixture(fixture: golden.Fixture) -> None:
    parser = next(p for p in parsers() if p.format_id == fixture.format_id)
    assert parser.sniff(Input(fixture.path.read_bytes(), file_name=fixture.path.name)) is True
