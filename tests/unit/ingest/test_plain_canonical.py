"""The canonical fast path of ``POST /runs`` (issue #19, session 7): ``plain_canonical_run`` returns
a run only where the registry's general path (side-file recognisers, sniffing in priority order,
the canonical parser) returns that very run, and None everywhere else, so the general path still
answers every other body and names every error."""

from __future__ import annotations

import json
import random
from typing import Any

import msgspec
import pytest

from advisor.canonical import run_to_builtins
from advisor.errors import IngestError, InvalidInput, MalformedInput, UnsupportedFormat
from advisor.ingest.base import Input
from advisor.ingest.formats.canonical import plain_canonical_run
from advisor.ingest.registry import parse
from advisor.ingest.submission import SubmissionContext, parse_submission
from bench._common import canonical_run
from tests import ingest_goldens as golden
from tests.unit.test_canonical_fast_validation import MUTATIONS

FIXTURES = [f for f in golden.fixtures() if f.path.stat().st_size <= 2_000_000]


def _general(body: bytes, format_id: str, file_name: str | None = None) -> tuple[str, list[Any]] | Exception:
    try:
        fmt, runs = parse(Input(body, file_name=file_name), format_id)
    except (IngestError, MalformedInput, InvalidInput, UnsupportedFormat) as exc:
        return exc
    return fmt, [run_to_builtins(r) for r in runs]


def _check(body: bytes, file_name: str | None = None) -> bool:
    """Assert the fast path agrees with the general one for ``body``; True when it took the body."""
    taken = False
    for format_id in ("auto", "canonical"):
        plain = plain_canonical_run(Input(body, file_name=file_name))
        general = _general(body, format_id, file_name)
        if plain is not None:
            taken = True
            assert not isinstance(general, Exception), general
            assert general == ("canonical", [run_to_builtins(plain)])
    return taken


@pytest.mark.parametrize("fixture", FIXTURES, ids=[f"{f.format_id}/{f.path.name}" for f in FIXTURES])
def test_every_fixture_is_taken_only_where_the_general_path_agrees(fixture: Any) -> None:
    taken = _check(fixture.path.read_bytes(), fixture.path.name)
    body = fixture.path.read_bytes().strip()
    one_object = fixture.format_id == "canonical" and body.startswith(b"{") and b"\n{" not in body
    if one_object and not isinstance(_general(body, "auto"), Exception):
        assert taken, "a valid single canonical run must take the fast path"


@pytest.mark.parametrize(("label", "doc"), MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_valid_and_invalid_runs(label: str, doc: dict[str, Any]) -> None:
    body = json.dumps(doc, allow_nan=True).encode("utf-8", "surrogatepass")
    taken = _check(body)
    if label == "base":
        assert taken


def test_bench_runs_take_the_fast_path() -> None:
    rng = random.Random(11)
    for i in range(50):
        assert _check(json.dumps(canonical_run(i, rng)).encode())


@pytest.mark.parametrize(
    ("label", "body"),
    [
        ("no section, a label named metrics", b'{"labels": {"x": "metrics"}, "deployment": "d"}'),
        ("a misspelt key", b'{"metrics": {"decode_tok_s": 3}, "setpu": {}}'),
        ("an empty metrics section", b'{"metrics": {}}'),
        ("a warm-up record", b'{"metrics": {"decode_tok_s": 3}, "labels": {"phase": "warmup"}, "warmup": true}'),
        ("a wrapper", b'{"context": {}, "run": {"metrics": {"decode_tok_s": 3}}}'),
        ("an array", b'[{"metrics": {"decode_tok_s": 3}}]'),
        ("NDJSON", b'{"metrics": {"decode_tok_s": 3}}\n{"metrics": {"decode_tok_s": 4}}\n'),
        ("a NaN token", b'{"metrics": {"decode_tok_s": NaN}}'),
        ("a string number", b'{"metrics": {"decode_tok_s": "31.5"}, "workload": {"concurrency": "4"}}'),
        ("an inline hardware spec", b'{"setup": {"hardware": {"name": "x", "memory_gb": 24}}, "metrics": {}}'),
        ("a UTF-8 BOM", b'\xef\xbb\xbf{"metrics": {"decode_tok_s": 3}}'),
        ("a source of its own", b'{"metrics": {"decode_tok_s": 3}, "source": {"format": "vllm_bench"}}'),
        ("an SLO", b'{"metrics": {"decode_tok_s": 3}, "slo": {"ttft_p99_ms": 300}}'),
    ],
)
def test_edge_bodies(label: str, body: bytes) -> None:
    _check(body, "run.json")


def test_parse_submission_answers_as_the_general_path() -> None:
    layers = (SubmissionContext(), SubmissionContext())
    body = json.dumps(canonical_run(4, random.Random(2))).encode()
    parsed = parse_submission(body, content_type="application/json", format_id="auto", layers=layers)
    fmt, runs = parse(Input(body), "auto")
    assert parsed.format_id == fmt == "canonical"
    assert [msgspec.to_builtins(r) for r in parsed.runs] == [msgspec.to_builtins(r) for r in runs]
    # A forced other format never takes the fast path.
    with pytest.raises(IngestError):
        parse_submission(body, content_type="application/json", format_id="vllm_bench", layers=layers)
