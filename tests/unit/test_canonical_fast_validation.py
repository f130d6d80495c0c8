"""``validate_run``'s fast pass (issue #19, session 7): ``_plain_run`` answers True only for a run
that every named check accepts, and True for the runs real files and the bench submit, so that the
named checks run only to name a failure.

Checked two ways: over every run the shipped fixtures parse into (every parser's output meets
``validate_run``), and over hostile runs (Hypothesis, and one mutation per bound) where whatever
``_plain_run`` answers, the named checks must agree when it says True.
"""

from __future__ import annotations

import copy
import json
import math
import random
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.canonical import (
    _RATIO_FIELDS,
    LIMITS,
    MAX_DEPTH,
    MAX_LABELS,
    MAX_TEXT,
    YEAR_MS,
    CanonicalRun,
    _plain_run,
    _validate_run_named,
    validate_run,
)
from advisor.errors import IngestError, InvalidInput, MalformedInput
from advisor.ingest.base import Input
from advisor.ingest.registry import parse
from bench._common import canonical_run
from tests import ingest_goldens as golden
from tests.unit.test_canonical_bounds_fuzz import hostile_numbers, hostile_text


def _named_accepts(run: CanonicalRun) -> bool:
    try:
        _validate_run_named(run)
    except InvalidInput:
        return False
    return True


def _fixture_runs() -> list[CanonicalRun]:
    runs: list[CanonicalRun] = []
    for fixture in golden.fixtures():
        try:
            _, parsed = parse(Input(fixture.path.read_bytes(), file_name=fixture.path.name), fixture.format_id)
        except (IngestError, MalformedInput, InvalidInput):
            continue  # an edge fixture the parser refuses
        runs.extend(parsed)
    return runs


FIXTURE_RUNS = _fixture_runs()


def test_the_fixtures_give_runs_to_check() -> None:
    assert len(FIXTURE_RUNS) > 100


@pytest.mark.parametrize("index", range(0, len(FIXTURE_RUNS)))
def test_every_parsed_run_passes_the_fast_pass_unless_it_has_an_slo(index: int) -> None:
    run = FIXTURE_RUNS[index]
    assert _named_accepts(run)  # every parser's output met validate_run already
    assert _plain_run(run) is (run.slo is None)


def test_the_bench_runs_pass_the_fast_pass() -> None:
    rng = random.Random(3)
    for i in range(200):
        run = msgspec.convert(canonical_run(i, rng), CanonicalRun, strict=False)
        assert _plain_run(run)


def test_the_ratio_fields_are_bounded_by_one_in_limits() -> None:
    # The fast pass checks the ratios through LIMITS; the named checks have a check of their own.
    assert all(LIMITS[name] == 1.0 for name in _RATIO_FIELDS)


def _base() -> dict[str, Any]:
    doc = canonical_run(1, random.Random(5))
    doc["setup"]["runtime_version"] = "0.6.3"
    doc["setup"]["gpu_count"] = 1
    doc["setup"]["tensor_parallel"] = 1
    doc["workload"]["dataset"] = "sharegpt"
    doc["source"] = {"format": "canonical", "notes": ["a note"], "given": {"hardware": "A10G"}}
    doc["metrics"]["e2e_ms"] = {"min": 1.0, "p50": 2.0, "p99": 3.0, "max": 4.0, "mean": 2.5, "std": 0.5}
    return doc


def _set(doc: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    node = out
    for step in path[:-1]:
        node = node.setdefault(step, {})
    node[path[-1]] = value
    return out


_BAD_NUMBERS = (math.nan, math.inf, -math.inf, -1, -0.5, 2**64, 1e300)


def _mutations() -> list[tuple[str, dict[str, Any]]]:
    base = _base()
    out: list[tuple[str, dict[str, Any]]] = [("base", base)]
    numeric = [
        ("setup", "gpu_count"), ("setup", "tensor_parallel"), ("setup", "pipeline_parallel"),
        ("setup", "max_model_len"), ("workload", "num_requests"), ("workload", "concurrency"),
        ("workload", "prompt_tokens_mean"), ("metrics", "decode_tok_s"), ("metrics", "kv_cache_usage_mean"),
        ("metrics", "prefix_cache_hit_rate"), ("metrics", "requests_completed"), ("metrics", "duration_s"),
        ("metrics", "ttft_ms", "p50"), ("metrics", "ttft_ms", "mean"), ("metrics", "e2e_ms", "std"),
        ("metrics", "e2e_ms", "min"), ("metrics", "itl_ms", "max"),
    ]  # fmt: skip
    for path in numeric:
        bound = YEAR_MS if path[-2].endswith("_ms") else LIMITS[path[-1]]
        for value in (*_BAD_NUMBERS, 0, bound, bound * 1.0001, 1.5):
            out.append((f"{'.'.join(path)}={value}", _set(base, path, value)))
    out.append(("percentiles out of order", _set(base, ("metrics", "ttft_ms", "p90"), 1.0)))
    out.append(("gpu_count 0", _set(base, ("setup", "gpu_count"), 0)))
    out.append(("tensor_parallel 0", _set(base, ("setup", "tensor_parallel"), 0)))
    out.append(("unknown runtime", _set(base, ("setup", "runtime"), "vllmx")))
    for text in ("a\x00b", "\ud800", "v" * 33, "v" * 65, "x" * (MAX_TEXT + 1), "ü" * 20):
        for path in (
            ("setup", "runtime_version"), ("setup", "kv_cache_dtype"), ("setup", "hardware"), ("deployment",),
            ("workload", "dataset"), ("source", "tool"), ("source", "file_name"), ("labels", "k"),
            ("setup", "engine_args", "k"), ("source", "given", "model"),
        ):  # fmt: skip
            out.append((f"{'.'.join(path)}={text[:8]!r}", _set(base, path, text)))
    out.append(("label key too long", _set(base, ("labels", "k" * 101), "v")))
    out.append(("too many labels", _set(base, ("labels",), {f"k{i}": "v" for i in range(MAX_LABELS + 1)})))
    deep: Any = "leaf"
    for _ in range(MAX_DEPTH + 1):
        deep = {"a": deep}
    out.append(("engine args too deep", _set(base, ("setup", "engine_args"), deep)))
    out.append(("engine arg beyond int64", _set(base, ("setup", "engine_args", "big"), 2**64)))
    out.append(("engine arg list", _set(base, ("setup", "engine_args", "list"), [1, "a", [2.5, None, True]])))
    out.append(("an SLO", _set(base, ("slo",), {"ttft_p99_ms": 500})))
    out.append(("a bad SLO", _set(base, ("slo",), {"ttft_p50_ms": 900, "ttft_p99_ms": 500})))
    return out


MUTATIONS = _mutations()


@pytest.mark.parametrize(("label", "doc"), MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_the_fast_pass_accepts_only_what_the_named_checks_accept(label: str, doc: dict[str, Any]) -> None:
    body = json.dumps(doc, allow_nan=True).encode("utf-8", "surrogatepass")
    try:
        run = msgspec.json.decode(body, type=CanonicalRun, strict=False)
    except (msgspec.ValidationError, msgspec.DecodeError):
        try:  # a NaN token or a lone surrogate: msgspec refuses the JSON; build the run from builtins
            run = msgspec.convert(json.loads(body.decode("utf-8", "surrogatepass")), CanonicalRun, strict=False)
        except msgspec.ValidationError:
            return  # the type itself refuses it: never reaches validate_run
    named = _named_accepts(run)
    if _plain_run(run):
        assert named, label
    elif run.slo is None and named:
        # Doubt is allowed only for what the fast pass does not judge (an SLO, an exotic type).
        pytest.fail(f"{label}: the named checks accept it but the fast pass does not")
    # And validate_run as a whole says what the named checks say.
    try:
        validate_run(run)
    except InvalidInput:
        assert not named, label
    else:
        assert named, label


@settings(max_examples=300, deadline=None, database=None)
@given(st.data())
def test_hostile_runs_pass_the_fast_pass_only_when_valid(data: st.DataObject) -> None:
    doc = _base()
    for path in (
        ("setup", "gpu_count"), ("workload", "concurrency"), ("metrics", "decode_tok_s"),
        ("metrics", "ttft_ms", "p50"), ("metrics", "ttft_ms", "p99"), ("metrics", "kv_cache_usage_mean"),
    ):  # fmt: skip
        if data.draw(st.booleans()):
            doc = _set(doc, path, data.draw(hostile_numbers))
    for path in (("deployment",), ("setup", "runtime_version"), ("labels", "x"), ("setup", "engine_args", "x")):
        if data.draw(st.booleans()):
            doc = _set(doc, path, data.draw(hostile_text))
    try:
        run = msgspec.convert(doc, CanonicalRun, strict=False)
    except msgspec.ValidationError:
        return
    if _plain_run(run):
        assert _named_accepts(run)
