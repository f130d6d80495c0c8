from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from advisor.rules import ThresholdsError, ThresholdTable, get_rule, thresholds_table
from advisor.rules.config import ENV_THRESHOLDS_FILE, ParamSpec, ThresholdSpec, load_table, rules_data_dir
from advisor.rules.registry import rule_specs
from advisor.settings import get_settings

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
    return load_table(SPECS, defaults=(text, "test.toml"))


def test_loads_declared_values() -> None:
    table = load_table(SPECS, defaults=(GOOD, "test.toml"))
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


@pytest.fixture
def settings_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """Set ``ADVISOR_*`` variables through ``monkeypatch``; the cached settings are dropped on both
    sides, so the next test reads its own environment again."""
    get_settings.cache_clear()
    yield monkeypatch
    get_settings.cache_clear()


def test_the_thresholds_file_setting_overrides_the_shipped_defaults(
    tmp_path: Path, settings_env: pytest.MonkeyPatch
) -> None:
    default = thresholds_table().for_section("PRE001").t("prompt_tokens").values
    override = tmp_path / "site.toml"
    override.write_text("[PRE001]\nprompt_tokens = [100, 200, 300, 400]\n")
    settings_env.setenv(ENV_THRESHOLDS_FILE, str(override))
    get_settings.cache_clear()
    assert get_settings().rules.thresholds_file == override
    table = thresholds_table()
    assert table.for_section("PRE001").t("prompt_tokens").values == (100, 200, 300, 400)
    assert get_rule("PRE001").t("prompt_tokens").low == 100  # the rules in force use it
    settings_env.delenv(ENV_THRESHOLDS_FILE)
    get_settings.cache_clear()
    assert thresholds_table().for_section("PRE001").t("prompt_tokens").values == default
    assert get_rule("PRE001").t("prompt_tokens").values == default


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[PRE001]\nprompt_tokens = [400, 300, 200, 100]\n", "PRE001.prompt_tokens: thresholds must be ascending"),
        # whichever rule is checked first names it: the message must say it is a shared limit
        ("[limits]\nttft_ms = [1, 2, 3]\n", "limits.ttft_ms (referred to by "),
        ("[PRE001\n", "not valid TOML"),
    ],
)
def test_an_invalid_thresholds_file_setting_is_a_clear_error(
    tmp_path: Path, settings_env: pytest.MonkeyPatch, text: str, message: str
) -> None:
    override = tmp_path / "bad.toml"
    override.write_text(text)
    settings_env.setenv(ENV_THRESHOLDS_FILE, str(override))
    get_settings.cache_clear()
    with pytest.raises(ThresholdsError, match=re.escape(message)) as exc:
        thresholds_table()
    assert str(override) in str(exc.value)


def test_a_missing_thresholds_file_setting_names_the_variable(tmp_path: Path, settings_env: pytest.MonkeyPatch) -> None:
    settings_env.setenv(ENV_THRESHOLDS_FILE, str(tmp_path / "nope.toml"))
    get_settings.cache_clear()
    with pytest.raises(ThresholdsError, match="cannot read") as exc:
        thresholds_table()
    assert exc.value.field == ENV_THRESHOLDS_FILE


def test_case_style_overrides_are_validated() -> None:
    table = thresholds_table()
    changed = table.with_overrides({"PRE001": {"prompt_tokens": [1, 2, 3, 4]}})
    assert changed.for_section("PRE001").t("prompt_tokens").values == (1, 2, 3, 4)
    assert table.for_section("PRE001").t("prompt_tokens").values != (1, 2, 3, 4)  # the original is untouched
    with pytest.raises(ThresholdsError, match="unknown key"):
        table.with_overrides({"PRE001": {"prompt_length": [1, 2, 3, 4]}})


def test_shipped_defaults_load_against_every_rule() -> None:
    table = load_table(rule_specs())
    assert set(table.sections) == set(rule_specs())
    assert table.origins == (str(rules_data_dir() / "thresholds.toml"),)


SHARED_SPECS = {
    "common": (ThresholdSpec("gain_relative"),),
    "X001": (ThresholdSpec("ttft"), ParamSpec("target", minimum=1)),
    "X002": (ThresholdSpec("ttft"), ThresholdSpec("speed", ascending=False)),
}
SHARED = """
[common]
gain_relative = [0.03, 0.08, 0.15, 0.3]
[limits]
ttft = [300, 600, 1200, 2500]
target = 2
[X001]
ttft = "@limits.ttft"
target = "@limits.target"
[X002]
ttft = "@limits.ttft"
speed = [80, 50, 30, 15]
"""


def shared_table(text: str = SHARED) -> ThresholdTable:
    return load_table(SHARED_SPECS, defaults=(text, "test.toml"))


def test_a_shared_limit_is_resolved_for_every_rule_that_refers_to_it() -> None:
    table = shared_table()
    assert (
        table.for_section("X001").t("ttft").values
        == table.for_section("X002").t("ttft").values
        == (300, 600, 1200, 2500)
    )
    assert table.for_section("X001").p("target") == 2.0
    assert table.for_section("X001").shared == {"ttft": "ttft", "target": "target"}
    assert table.for_section("X002").shared == {"ttft": "ttft"}  # speed is its own
    assert table.limits == {"ttft": [300, 600, 1200, 2500], "target": 2}


def test_overriding_a_shared_limit_changes_every_rule_and_a_rule_may_keep_its_own(tmp_path: Path) -> None:
    override = tmp_path / "site.toml"
    override.write_text("[limits]\nttft = [100, 200, 300, 400]\n[X002]\nttft = [1000, 2000, 3000, 4000]\n")
    table = load_table(SHARED_SPECS, defaults=(SHARED, "test.toml"), override_file=override)
    assert table.for_section("X001").t("ttft").values == (100, 200, 300, 400)
    assert table.for_section("X002").t("ttft").values == (1000, 2000, 3000, 4000)
    assert "ttft" not in table.for_section("X002").shared
    # The same through case-style overrides, on top of a table that already had one.
    again = table.with_overrides({"limits": {"ttft": [5, 6, 7, 8]}})
    assert again.for_section("X001").t("ttft").values == (5, 6, 7, 8)
    assert again.for_section("X002").t("ttft").values == (1000, 2000, 3000, 4000)
    assert table.for_section("X001").t("ttft").values == (100, 200, 300, 400)  # the original is untouched


def test_overriding_a_shipped_limit_reaches_the_rules() -> None:
    table = thresholds_table().with_overrides({"limits": {"ttft_ms": [1, 2, 3, 4]}})
    referring = [s for s, cfg in table.sections.items() if cfg.shared.get("ttft_ms") == "ttft_ms"]
    assert len(referring) >= 2
    for section in referring:
        assert table.for_section(section).t("ttft_ms").values == (1, 2, 3, 4)
        assert get_rule(section, table=table).t("ttft_ms").low == 1


@pytest.mark.parametrize(
    ("text", "message", "field"),
    [
        (
            SHARED.replace('"@limits.ttft"', '"@limits.ttfb"', 1),
            "X001.ttft refers to unknown '@limits.ttfb'",
            "X001.ttft",
        ),
        (SHARED.replace('"@limits.ttft"', '"limits.ttft"', 1), 'or a reference "@limits.<key>"', "X001.ttft"),
        (
            SHARED.replace("target = 2\n", "target = 2\nunused = 3\n", 1),
            "'unused' is referred to by no rule",
            "limits.unused",
        ),
        (
            SHARED.replace("target = 2\n", "target = 0\n", 1),
            "limits.target (referred to by X001.target) must be >= 1",
            "limits.target",
        ),
        (
            SHARED.replace("speed = [80, 50, 30, 15]", 'speed = "@limits.ttft"'),
            "limits.ttft (referred to by X002.speed): thresholds must be descending",
            "limits.ttft",
        ),
        (
            SHARED.replace("target = 2\n", 'target = "x"\n', 1),
            "limits.target must be a number or a list",
            "limits.target",
        ),
        (
            SHARED.replace('target = "@limits.target"', 'target = "@limits.ttft"'),
            "must be a number, got [300",
            "limits.ttft",
        ),
    ],
)
def test_bad_references_and_limits_are_clear_errors(text: str, message: str, field: str) -> None:
    with pytest.raises(ThresholdsError, match=re.escape(message)) as exc:
        shared_table(text)
    assert exc.value.field == field
    assert "test.toml" in str(exc.value)


def test_an_override_file_may_not_invent_a_limit(tmp_path: Path) -> None:
    override = tmp_path / "site.toml"
    override.write_text("[limits]\nttfb = [1, 2, 3, 4]\n")
    with pytest.raises(
        ThresholdsError, match=r"site\.toml: \[limits\] has unknown key 'ttfb'; shared limits: target, ttft"
    ):
        load_table(SHARED_SPECS, defaults=(SHARED, "test.toml"), override_file=override)


def test_an_overridden_limit_is_checked_against_the_rules_that_refer_to_it(tmp_path: Path) -> None:
    override = tmp_path / "site.toml"
    override.write_text("[limits]\nttft = [4, 3, 2, 1]\n")
    with pytest.raises(ThresholdsError, match=r"site\.toml: limits\.ttft \(referred to by X001\.ttft\)"):
        load_table(SHARED_SPECS, defaults=(SHARED, "test.toml"), override_file=override)
