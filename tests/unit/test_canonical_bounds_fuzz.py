"""Issue #18 item 1 / #14 item 4 (Hypothesis): whatever the canonical document or the parsed file,
``decode_run`` and the registry either refuse it naming a field or return runs both databases store
alike: no NUL or lone surrogate, integers within 64 bits, numbers finite and within physical bounds."""

from __future__ import annotations

import contextlib
import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.canonical import LIMITS, MAX_TEXT, YEAR_MS, CanonicalRun, decode_run, run_to_builtins
from advisor.errors import IngestError, InvalidInput, MalformedInput
from advisor.ingest.base import Input
from advisor.ingest.registry import parse
from tests.unit.ingest.test_fuzz_parsers import FUZZ, STRUCTURED, _mutate, _paths

hostile_numbers = (
    st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([0, 1, -1, 2**31, 2**63, 2**70, 1e308, -1e308, 1e-300, 1e5, 1e9, 3.2e10])
)
hostile_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=80) | st.sampled_from(
    ["a\x00b", "\ud800", "v" * 70, "x" * (MAX_TEXT + 1)]
)


def _storable(value: Any, path: str = "") -> None:
    """What both databases store alike (the property; independent of how canonical checks it)."""
    if isinstance(value, str):
        assert "\x00" not in value, path
        value.encode("utf-8")  # raises on a lone surrogate
        assert len(value) <= MAX_TEXT, path
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int):
        assert -(2**63) < value < 2**63, path
    elif isinstance(value, float):
        assert math.isfinite(value), path
    elif isinstance(value, dict):
        for key, item in value.items():
            _storable(key, path)
            _storable(item, f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _storable(item, f"{path}[{i}]")


def _within_bounds(run: CanonicalRun) -> None:
    doc = run_to_builtins(run)
    _storable(doc)
    for section in ("setup", "workload", "metrics"):
        for name, value in doc.get(section, {}).items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                bound = LIMITS.get(name, YEAR_MS)
                assert 0 <= value <= bound, f"{section}.{name}={value} beyond {bound}"
            if isinstance(value, dict) and name.endswith("_ms"):
                assert all(0 <= v <= YEAR_MS for v in value.values()), f"{section}.{name}"


def _document(draw: Any) -> dict[str, Any]:
    return {
        "deployment": draw(hostile_text),
        "labels": draw(st.dictionaries(hostile_text, hostile_text, max_size=3)),
        "setup": {
            "runtime": draw(st.sampled_from(["vllm", "sglang", "llamacpp"])),
            "runtime_version": draw(hostile_text),
            "gpu_count": draw(hostile_numbers),
            "kv_cache_dtype": draw(hostile_text),
            "engine_args": draw(st.dictionaries(st.text(max_size=8), hostile_numbers | hostile_text, max_size=3)),
        },
        "workload": {"num_requests": draw(hostile_numbers), "concurrency": draw(hostile_numbers)},
        "metrics": {
            "decode_tok_s": draw(hostile_numbers),
            "duration_s": draw(hostile_numbers),
            "ttft_ms": {"p50": draw(hostile_numbers), "p99": draw(hostile_numbers)},
        },
        "source": {"file_name": draw(hostile_text)},
    }


@settings(FUZZ, max_examples=200)
@given(st.data())
def test_decode_run_refuses_naming_a_field_or_returns_a_storable_run(data: st.DataObject) -> None:
    doc = _document(data.draw)
    try:
        body = json.dumps(doc, allow_nan=True).encode("utf-8", "surrogatepass")
        run = decode_run(body)
    except InvalidInput as exc:
        assert exc.field, exc
        return
    except MalformedInput:
        return
    _within_bounds(run)


@pytest.mark.skipif(not STRUCTURED, reason="no structured fixtures")
@settings(FUZZ, max_examples=150)
@given(st.data())
def test_parsers_output_is_storable_and_within_bounds(data: st.DataObject) -> None:
    fixture, doc = data.draw(st.sampled_from(STRUCTURED), label="fixture")
    numeric = [p for p in _paths(doc) if isinstance(_at(doc, p), int | float) and not isinstance(_at(doc, p), bool)]
    mutated = doc
    for _ in range(data.draw(st.integers(min_value=1, max_value=3), label="mutations")):
        if not numeric:
            break
        path = data.draw(st.sampled_from(numeric), label="path")
        with contextlib.suppress(KeyError, IndexError, TypeError):
            mutated = _mutate(mutated, path, data.draw(hostile_numbers, label="value"), False)
    body = json.dumps(mutated, default=str).encode()
    try:
        _, runs = parse(Input(body, file_name=fixture.path.name), fixture.format_id)
    except (IngestError, MalformedInput, InvalidInput):
        return
    for run in runs:
        _within_bounds(run)


def _at(doc: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        doc = doc[step]
    return doc
