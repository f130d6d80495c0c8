"""Golden tests: every raw file under tests/fixtures/ingest/<format_id>/ must be detected as that
format and parse to exactly its ``<name>.expected.json`` (regenerate with
``python -m tests.ingest_goldens --regen`` and review the diff)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.ingest.registry import parsers
from tests import ingest_goldens as golden

FIXTURES = list(golden.fixtures())


def test_fixture_tree_is_not_empty() -> None:
    assert len(FIXTURES) >= 10, "tests/fixtures/ingest holds no fixtures: the golden suite would pass vacuously"


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda f: f.id)
def test_fixture_parses_to_its_golden_file(fixture: golden.Fixture) -> None:
    assert fixture.expected_path.exists(), f"missing {fixture.expected_path.name}; run --regen"
    stored = json.loads(fixture.expected_path.read_text("utf-8"))
    actual = golden.expected_output(fixture)
    assert actual["detected"] == fixture.format_id, (
        f"detect() picked {actual['detected']!r} for a file in the {fixture.format_id!r} directory"
    )
    assert golden.same_output(stored, actual), (
        f"{fixture.id} no longer parses to its golden file; if the change is deliberate run "
        "`python -m tests.ingest_goldens --regen` and review the diff"
    )


@pytest.mark.parametrize("directory", sorted({f.format_id for f in FIXTURES}))
def test_fixture_directories_are_registered_formats(directory: str) -> None:
    assert directory in {p.format_id for p in parsers()}


def test_no_orphaned_expected_files() -> None:
    root = golden.default_root()
    inputs = {f.expected_path for f in FIXTURES}
    orphans = [p for p in root.glob(f"*/*{golden.EXPECTED_SUFFIX}") if p not in inputs]
    assert orphans == []


def _copy_fixture(tmp_path: Path, name: str) -> Path:
    source = next(f for f in FIXTURES if f.id == name)
    target = tmp_path / source.format_id / source.path.name
    target.parent.mkdir(parents=True)
    target.write_bytes(source.path.read_bytes())
    return target


def test_golden_command_regen_then_check_then_detects_staleness(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = _copy_fixture(tmp_path, "vllm_bench/vllm_bench_serve.json")
    assert golden.main(["--check", "--root", str(tmp_path)]) == 1  # expected file missing
    assert golden.main(["--regen", "--root", str(tmp_path)]) == 0
    expected = target.with_name(target.name + golden.EXPECTED_SUFFIX)
    assert json.loads(expected.read_text())["format"] == "vllm_bench"
    assert golden.main(["--check", "--root", str(tmp_path)]) == 0

    doc = json.loads(expected.read_text())
    doc["runs"][0]["metrics"]["ttft_ms"]["p99"] += 1.0
    expected.write_text(json.dumps(doc))
    assert golden.main(["--check", "--root", str(tmp_path)]) == 1
    assert "stale" in capsys.readouterr().err

    golden.main(["--regen", "--root", str(tmp_path)])
    target.unlink()
    assert golden.main(["--check", "--root", str(tmp_path)]) == 1
    assert "orphaned" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ({"x": 1.0}, {"x": 1.0 + 1e-12}, True),
        ({"x": 1.0}, {"x": 1.001}, False),
        ({"x": [1, 2]}, {"x": [1, 2, 3]}, False),
        ({"x": True}, {"x": 1}, False),
        ({"x": None}, {"x": 0.0}, False),
        ({"x": "a"}, {"y": "a"}, False),
    ],
)
def test_same_output_tolerates_only_float_rounding(a: object, b: object, same: bool) -> None:
    assert golden.same_output(a, b) is same
