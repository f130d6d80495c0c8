from __future__ import annotations

import re
from pathlib import Path

import pytest

from advisor.rules import ThresholdsError, get_rule, thresholds_table
from advisor.rules.config import ENV_THRESHOLDS_FILE, ParamSpec, ThresholdSpec, load_table, rules_data_dir
from advisor.rules.registry import rule_specs

SPECS = {
    "common": (ThresholdSpec("gain_relative"),),
    "X001": (ThresholdSpec("ratio"), ThresholdSpec("eff", ascending=False), ParamSpec("target", minimum=1, maximum=10)),
}
GOOD = """
[common]
gain_relative = [0.03, 0.08, 0.15, 0.3]
[X001]
ratio = [1, 2, 3, 4]
eff = [0.5, 0.4, 0.3, 0.2]
target = 2
"""


def load(text: str) -> object:
    return load_table(SPECS, defaults=(text, "test.toml"), use_env=False)


def test_loads_declared_values() -> None:
    table = load_table(SPECS, defaults=(GOOD, "test.toml"), use_env=False)
    cfg = table.for_section("X001")
    assert cfg.t("ratio").values == (1, 2, 3, 4)
    assert cfg.t("eff").ascending is False
    assert cfg.p("target") == 2.0


@pytest.mark.parametrize(
    ("text", "message", "field"),
    [
        (GOOD + "\n[Y001]\nratio = [1, 2, 3, 4]\n", "unknown section [Y001]", "Y001"),
        (GOOD.replace("target = 2", "target = 2\nspeed = 3"), "unknown key 'speed'", "X001.speed"),
        (GOOD.replace("target = 2", ""), "missing declared key 'target'", "X001.target"),
        (GOOD.replace("ratio = [1, 2, 3, 4]", "ratio = [1, 3, 2, 4]"), "must be ascending", "X001.ratio"),
        (GOOD.replace("eff = [0.5, 0.4, 0.3, 0.2]", "eff = [0.2, 0.3, 0.4, 0.5]"), "must be descending", "X001.eff"),
        (GOOD.replace("ratio = [1, 2, 3, 4]", "ratio = [1, 2, 3]"), "expected 4 thresholds", "X001.ratio"),
        (GOOD.replace("ratio = [1, 2, 3, 4]", 'ratio = "1,2,3,4"'), "list of 4 numbers", "X001.ratio"),
        (GOOD.replace("target = 2", "target = true"), "must be a number", "X001.target"),
        (GOOD.replace("target = 2", "target = 20"), "must be <= 10", "X001.target"),
        ("[X001\n", "not valid TOML", "test.toml"),
    ],
)
def test_rejects_bad_files_with_a_clear_error(text: str, message: str, field: str) -> None:
    with pytest.raises(ThresholdsError, match=re.escape(message)) as exc:
        load(text)
    assert exc.value.field == field
    assert "test.toml" in str(exc.value)


def test_override_file_merges_over_defaults(tmp_path: Path) -> None:
    override = tmp_path / "mine.toml"
    override.write_text("[X001]\nratio = [5, 6, 7, 8]\n")
    table = load_table(SPECS, defaults=(GOOD, "test.toml"), override_file=override)
    assert table.for_section("X001").t("ratio").values == (5, 6, 7, 8)
    assert table.for_section("X001").p("target") == 2.0  # untouched keys keep their defaults
    assert table.origins == ("test.toml", str(override))


def test_override_file_is_validated(tmp_path: Path) -> None:
    override = tmp_path / "mine.toml"
    override.write_text("[X001]\nratio = [8, 7, 6, 5]\n")
    with pytest.raises(ThresholdsError, match=r"mine\.toml: X001\.ratio"):
        load_table(SPECS, defaults=(GOOD, "test.toml"), override_file=override)


def test_missing_override_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ThresholdsError, match="cannot read") as exc:
        load_table(SPECS, defaults=(GOOD, "test.toml"), override_file=tmp_path / "nope.toml")
    assert exc.value.field == ENV_THRESHOLDS_FILE


def test_environment_variable_overrides_the_shipped_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    default = thresholds_table().for_section("PRE001").t("prompt_tokens").values
    override = tmp_path / "site.toml"
    override.write_text("[PRE001]\nprompt_tokens = [100, 200, 300, 400]\n")
    monkeypatch.setenv(ENV_THRESHOLDS_FILE, str(override))
    table = thresholds_table()
    assert table.for_section("PRE001").t("prompt_tokens").values == (100, 200, 300, 400)
    assert get_rule("PRE001", table=table).t("prompt_tokens").low == 100
    monkeypatch.delenv(ENV_THRESHOLDS_FILE)
    assert thresholds_table().for_section("PRE001").t("prompt_tokens").values == default


def test_case_style_overrides_are_validated() -> None:
    table = thresholds_table()
    changed = table.with_overrides({"PRE001": {"prompt_tokens": [1, 2, 3, 4]}})
    assert changed.for_section("PRE001").t("prompt_tokens").values == (1, 2, 3, 4)
    assert table.for_section("PRE001").t("prompt_tokens").values != (1, 2, 3, 4)  # the original is untouched
    with pytest.raises(ThresholdsError, match="unknown key"):
        table.with_overrides({"PRE001": {"prompt_length": [1, 2, 3, 4]}})


def test_shipped_defaults_load_against_every_rule() -> None:
    table = load_table(rule_specs(), use_env=False)
    assert set(table.sections) == set(rule_specs())
    assert table.origins == (str(rules_data_dir() / "thresholds.toml"),)
