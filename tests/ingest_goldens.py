"""Golden files for the ingest parsers: ``python -m tests.ingest_goldens --regen | --check``.

Every directory ``tests/fixtures/ingest/<format_id>/`` holds raw tool outputs, byte for byte, and
beside each one ``<input name>.expected.json``: the format detected and the canonical runs parsed
from it (or the error a malformed file must raise). The expected files are the parsers'
specification; regenerate them after a deliberate change and review the diff.

``--check`` exits 1 when any expected file is missing, stale or orphaned (CI runs it, through
``make docs-check``). The tool lives in the test tree, not in the package: it reads the repository's
fixtures, so an installed wheel has no use for it.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from advisor.canonical import run_to_builtins
from advisor.errors import AdvisorError
from advisor.ingest.base import Input
from advisor.ingest.registry import detect, parse

__all__ = [
    "EXPECTED_SUFFIX",
    "Fixture",
    "default_root",
    "expected_output",
    "fixtures",
    "main",
    "same_output",
]

EXPECTED_SUFFIX = ".expected.json"
#: Files in a fixture directory that are documentation, not inputs.
_NOT_INPUTS = (".md", ".txt.license")


@dataclass(frozen=True)
class Fixture:
    """One raw input file and the format its directory names."""

    format_id: str
    path: Path

    @property
    def expected_path(self) -> Path:
        return self.path.with_name(self.path.name + EXPECTED_SUFFIX)

    @property
    def id(self) -> str:
        return f"{self.format_id}/{self.path.name}"


def default_root() -> Path:
    """``tests/fixtures/ingest`` beside this module."""
    return Path(__file__).resolve().parent / "fixtures" / "ingest"


def fixtures(root: Path | None = None) -> Iterator[Fixture]:
    """Every input file under ``root``, one directory per format id, in a stable order."""
    base = root or default_root()
    if not base.is_dir():
        return
    for directory in sorted(p for p in base.iterdir() if p.is_dir()):
        for path in sorted(directory.iterdir()):
            if path.is_file() and not path.name.endswith((EXPECTED_SUFFIX, *_NOT_INPUTS)):
                yield Fixture(directory.name, path)


def expected_output(fixture: Fixture) -> dict[str, Any]:
    """What parsing the fixture yields now, as JSON-ready builtins.

    ``detected`` is the format ``detect`` picks (None when none does); on success ``runs`` holds the
    canonical runs, and on a refused file ``error`` holds the problem type, the field and the detail.
    """
    inp = Input(fixture.path.read_bytes(), file_name=fixture.path.name)
    try:
        detected: str | None = detect(inp).format_id
    except AdvisorError:
        detected = None
    try:
        format_id, runs = parse(inp, fixture.format_id)
    except AdvisorError as exc:
        return {
            "detected": detected,
            "error": {
                "type": type(exc).__name__,
                "status": exc.status,
                "field": exc.field,
                "detail": exc.detail,
            },
        }
    return {"detected": detected, "format": format_id, "runs": [run_to_builtins(r) for r in runs]}


def render(output: dict[str, Any]) -> str:
    """The expected file's text: stable, reviewable JSON."""
    return json.dumps(output, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def same_output(a: Any, b: Any, *, rel_tol: float = 1e-9) -> bool:
    """Structural equality with a relative tolerance on floats, so that a numpy release that
    rounds the last bit differently does not fail the suite."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(float(a), float(b), rel_tol=rel_tol, abs_tol=1e-12)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_output(a[k], b[k], rel_tol=rel_tol) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_output(x, y, rel_tol=rel_tol) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _orphans(root: Path) -> list[Path]:
    inputs = {f.expected_path for f in fixtures(root)}
    return sorted(p for p in root.glob(f"*/*{EXPECTED_SUFFIX}") if p not in inputs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.ingest_goldens", description=__doc__)
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--regen", action="store_true", help="rewrite every expected file")
    mode.add_argument("--check", action="store_true", help="exit 1 when an expected file is stale")
    parser.add_argument("--root", type=Path, default=None, help="fixture root (default: tests/fixtures/ingest)")
    parser.add_argument("--format", dest="only", default=None, help="only this format id's directory")
    args = parser.parse_args(argv)
    root: Path = args.root or default_root()
    if not root.is_dir():
        print(f"no fixture directory at {root}", file=sys.stderr)
        return 2

    problems: list[str] = []
    written = 0
    for fixture in fixtures(root):
        if args.only and fixture.format_id != args.only:
            continue
        output = expected_output(fixture)
        if args.regen:
            text = render(output)
            if not fixture.expected_path.exists() or fixture.expected_path.read_text("utf-8") != text:
                fixture.expected_path.write_text(text, encoding="utf-8")
                written += 1
            continue
        if not fixture.expected_path.exists():
            problems.append(f"missing {fixture.expected_path.relative_to(root)}")
            continue
        stored = json.loads(fixture.expected_path.read_text("utf-8"))
        if not same_output(stored, output):
            problems.append(f"stale {fixture.expected_path.relative_to(root)}")
    for orphan in _orphans(root):
        if not args.only or orphan.parent.name == args.only:
            problems.append(f"orphaned {orphan.relative_to(root)} (its input is gone)")

    if args.regen:
        print(f"{written} expected file(s) written under {root}")
        for problem in problems:
            print(problem, file=sys.stderr)
        return 0
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print("run `make goldens` (python -m tests.ingest_goldens --regen) and review the diff", file=sys.stderr)
        return 1
    print("golden files are up to date")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
