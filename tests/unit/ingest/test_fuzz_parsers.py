"""Fuzzing every registered parser (hypothesis): whatever the bytes, ``sniff`` returns a bool and
``parse`` returns runs or raises IngestError / MalformedInput, never anything else (a parser bug
would otherwise surface as a 500). Examples are bounded so the suite stays fast."""

from __future__ import annotations

import contextlib
import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.canonical import CanonicalRun
from advisor.errors import IngestError, MalformedInput
from advisor.ingest.base import Input, Parser
from advisor.ingest.registry import parse, parsers
from tests import ingest_goldens as golden

ALLOWED = (IngestError, MalformedInput)
PARSERS = parsers()
FUZZ = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)
# Small fixtures only: mutating and re-serialising a 1.3 MB report per example would dominate the run.
SMALL = [f for f in golden.fixtures() if f.path.stat().st_size <= 120_000]
STRUCTURED: list[tuple[golden.Fixture, Any]] = []
for _fixture in SMALL:
    _doc = Input(_fixture.path.read_bytes()).document
    if isinstance(_doc, dict | list):
        STRUCTURED.append((_fixture, _doc))

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
    | st.sampled_from(["inf", "-1", "1e999", "NaN", "", "0", "12abc", "20250101-000000"])
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=12,
)


def _exercise(parser: Parser, inp: Input) -> None:
    claimed = parser.sniff(inp)
    assert isinstance(claimed, bool)
    try:
        runs = parser.parse(inp)
    except ALLOWED:
        return
    assert isinstance(runs, list)
    assert all(isinstance(r, CanonicalRun) for r in runs)


def _exercise_all(data: bytes) -> None:
    inp = Input(data, file_name="fuzz.json")
    for parser in PARSERS:
        _exercise(parser, inp)
    with contextlib.suppress(*ALLOWED):
        parse(inp)


@FUZZ
@given(st.binary(max_size=512))
def test_random_bytes(data: bytes) -> None:
    _exercise_all(data)


@FUZZ
@given(json_values)
def test_random_json(value: Any) -> None:
    _exercise_all(json.dumps(value).encode())


def _paths(doc: Any, prefix: tuple[Any, ...] = (), limit: int = 400) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    stack: list[tuple[tuple[Any, ...], Any]] = [(prefix, doc)]
    while stack and len(out) < limit:
        path, node = stack.pop()
        if path:
            out.append(path)
        if isinstance(node, dict):
            stack.extend(((*path, k), v) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend(((*path, i), v) for i, v in enumerate(node[:20]))
    return out


def _mutate(doc: Any, path: tuple[Any, ...], value: Any, delete: bool) -> Any:
    mutated = copy.deepcopy(doc)
    node = mutated
    for step in path[:-1]:
        node = node[step]
    last = path[-1]
    if delete and isinstance(node, dict):
        del node[last]
    else:
        node[last] = value
    return mutated


@pytest.mark.skipif(not STRUCTURED, reason="no structured fixtures")
@settings(FUZZ, max_examples=150)
@given(st.data())
def test_mutated_fixtures(data: st.DataObject) -> None:
    fixture, doc = data.draw(st.sampled_from(STRUCTURED), label="fixture")
    paths = _paths(doc)
    mutated = doc
    for _ in range(data.draw(st.integers(min_value=1, max_value=3), label="mutations")):
        if not paths:
            break
        path = data.draw(st.sampled_from(paths), label="path")
        try:
            mutated = _mutate(mutated, path, data.draw(json_values, label="value"), data.draw(st.booleans()))
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed this path
    body = json.dumps(mutated, default=str).encode()  # YAML fixtures hold datetimes
    own = next(p for p in PARSERS if p.format_id == fixture.format_id)
    _exercise(own, Input(body, file_name=fixture.path.name))
    with contextlib.suppress(*ALLOWED):
        parse(Input(body), fixture.format_id)


@settings(FUZZ, max_examples=60)
@given(st.data())
def test_truncated_and_corrupted_fixtures(data: st.DataObject) -> None:
    fixture = data.draw(st.sampled_from(SMALL), label="fixture")
    raw = bytearray(fixture.path.read_bytes())
    cut = data.draw(st.integers(min_value=0, max_value=len(raw)), label="cut")
    raw = raw[:cut]
    for _ in range(data.draw(st.integers(min_value=0, max_value=3), label="flips")):
        if raw:
            position = data.draw(st.integers(min_value=0, max_value=len(raw) - 1))
            raw[position] = data.draw(st.integers(min_value=0, max_value=255))
    _exercise_all(bytes(raw))
