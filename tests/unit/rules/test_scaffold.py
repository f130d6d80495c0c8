"""``make new-rule``: the scaffold writes a rule the registry, the meta tests and the harness accept,
into a copy of the tree (never into this checkout)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from advisor.rules import ACTIONS, GROUPS, Phase, Rule, thresholds_table
from advisor.rules.base import DOC_SECTIONS
from advisor.rules.config import RuleConfig, load_table, rules_data_dir
from advisor.rules.registry import rule_specs
from advisor.rules.scaffold import ScaffoldError, main, plan, write
from tests.unit.rules.harness import build_case_context, load_cases

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """The parts of a checkout the scaffold reads and writes: rule folders, thresholds, cases."""
    for group in GROUPS:
        shutil.copytree(
            REPO / "advisor" / "rules" / group,
            tmp_path / "advisor" / "rules" / group,
            ignore=shutil.ignore_patterns("__pycache__"),  # another process may be writing them
        )
    shutil.copytree(rules_data_dir(), tmp_path / "rules")
    return tmp_path


def load_rule(path: Path, group: str) -> type[Rule]:
    """Import a generated file under its package name (so that its group and phase are right),
    without registering it."""
    spec = importlib.util.spec_from_file_location(f"advisor.rules.{group}.{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    (cls,) = [v for v in vars(module).values() if isinstance(v, type) and issubclass(v, Rule) and v is not Rule]
    return cls


def snapshot(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text(encoding="utf-8") for p in sorted(root.rglob("*")) if p.is_file()}


def test_writes_a_rule_that_the_meta_checks_and_the_harness_accept(root: Path) -> None:
    new = plan(root, "PRE008", name="prefill.sampling_storm", action="shorten-prompt")
    written = write(new)
    assert written == [
        root / "advisor/rules/pre/PRE008.py",
        root / "rules/thresholds.toml",
        root / "rules/cases/PRE008.yaml",
    ]
    cls = load_rule(written[0], "pre")
    assert (cls.id, cls.name, cls.action, cls.__name__) == (
        "PRE008",
        "prefill.sampling_storm",
        "shorten-prompt",
        "SamplingStorm",
    )
    assert cls.phase == Phase.PREFILL and "phase = " not in written[0].read_text(encoding="utf-8")
    docs = cls.docs()
    assert docs.summary.endswith(".") and list(docs.sections)[: len(DOC_SECTIONS)] == list(DOC_SECTIONS)
    assert all(len(docs.sections[title]) > 40 for title in DOC_SECTIONS)

    # The thresholds file still loads, with the new (empty) section after the group's last rule.
    toml = written[1].read_text(encoding="utf-8")
    sections = list(tomllib.loads(toml))
    assert sections.index("PRE008") == sections.index("PRE007") + 1
    table = load_table({**rule_specs(), "PRE008": cls.thresholds}, defaults=(toml, str(written[1])))
    assert table.for_section("PRE008").thresholds == {}
    added = toml[toml.index("[PRE008]") : toml.index("[DEC001]")]
    assert toml.replace(added, "") == (REPO / "rules/thresholds.toml").read_text(encoding="utf-8")  # nothing else moved

    # A firing and a silent case; both are valid runs, and the stub stays silent on each.
    cases = load_cases(written[2])
    assert [c.expect["severity"] for c in cases] == ["moderate", "none"]
    assert cases[0].expect["action"] == "shorten-prompt"
    rule = cls(RuleConfig("PRE008"), thresholds_table().common)
    assert all(rule.evaluate(build_case_context(c)) is None for c in cases)


def test_the_generated_file_is_lint_clean(root: Path) -> None:
    written = write(plan(root, "MEAS009"))
    ruff = Path(sys.executable).with_name("ruff")
    result = subprocess.run(
        [str(ruff), "check", "--no-cache", "--config", str(REPO / "pyproject.toml"), str(written[0])],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_defaults_follow_the_group(root: Path) -> None:
    new = plan(root, "MEAS009")
    assert (new.group, new.name, new.action) == ("meas", "measurement.meas009", "improve-measurement")
    assert plan(root, "CAP009").action in ACTIONS


@pytest.mark.parametrize(
    ("rule_id", "kwargs", "message"),
    [
        ("PRE001", {}, "PRE001 exists"),
        ("PRE7", {}, "bad rule id 'PRE7'"),
        ("pre007", {}, "bad rule id"),
        ("PRE0070", {}, "bad rule id"),
        ("XYZ001", {}, "unknown group prefix 'XYZ'"),
        ("PRE008", {"name": "Prefill.Long"}, "bad rule name"),
        ("PRE008", {"name": "prefill.long_prompt"}, "rule name 'prefill.long_prompt' is used by"),
        ("PRE008", {"action": "make-it-fast"}, "unknown action 'make-it-fast'"),
    ],
)
def test_refuses_before_writing_anything(root: Path, rule_id: str, kwargs: dict[str, str], message: str) -> None:
    before = snapshot(root)
    with pytest.raises(ScaffoldError, match=message):
        plan(root, rule_id, **kwargs)
    assert snapshot(root) == before


def test_refuses_an_id_that_lives_on_as_a_section_or_an_alias(root: Path) -> None:
    toml = root / "rules/thresholds.toml"
    toml.write_text(toml.read_text(encoding="utf-8") + "\n[CFG050]\n", encoding="utf-8")
    with pytest.raises(ScaffoldError, match=r"\[CFG050\] in"):
        plan(root, "CFG050")
    rule = root / "advisor/rules/cfg/CFG003.py"
    rule.write_text(
        rule.read_text(encoding="utf-8").replace('    action = "', '    aliases = ("CFG051",)\n    action = "')
    )
    with pytest.raises(ScaffoldError, match="never recycled"):
        plan(root, "CFG051")


def test_the_command_line(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["SCH005", "--name", "scheduling.slow_admission", "--root", str(root)]) == 0
    out = capsys.readouterr().out
    assert f"wrote {root / 'advisor/rules/sch/SCH005.py'}" in out and "pytest tests/unit/rules -k SCH005" in out
    assert main(["SCH005", "--root", str(root)]) == 2
    assert "error: SCH005 exists" in capsys.readouterr().err


def test_a_rule_of_a_group_is_added_after_its_last_rule_even_at_the_end(root: Path) -> None:
    write(plan(root, "MEAS009"))  # MEAS is the last group in the file
    sections = list(tomllib.loads((root / "rules/thresholds.toml").read_text(encoding="utf-8")))
    assert sections[-1] == "MEAS009" and sections[-2] == "MEAS008"
