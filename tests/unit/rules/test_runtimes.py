"""Every flag a rule can emit is in the runtime table (advisor/rules/data/runtimes.toml) for the
runtime whose fix names it, and the table's versioned defaults read as documented."""

from __future__ import annotations

import pytest

from advisor.rules import fixes, runtimes
from tests.unit.rules.harness import all_cases, run_case

_RUNTIMES = ("vllm", "sglang", "tgi", "trtllm", "ollama", "llamacpp", "mlx")


def _unknown(fix: dict[str, str]) -> dict[str, set[str]]:
    missing: dict[str, set[str]] = {}
    for runtime, text in fix.items():
        if runtime not in _RUNTIMES:
            continue
        bad = {f for f in runtimes.flags_in(text) if not runtimes.is_known_flag(runtime, f)}
        if bad:
            missing[runtime] = bad
    return missing


def test_every_flag_in_every_rule_case_fix_is_in_the_table() -> None:
    problems: dict[str, dict[str, set[str]]] = {}
    fired = 0
    for case in all_cases():
        _ctx, rec = run_case(case)
        if rec is None:
            continue
        fired += 1
        missing = _unknown(dict(rec.fix))
        if missing:
            problems[case.test_id] = missing
    assert fired > 100  # the cases really exercise the fixes
    assert problems == {}


@pytest.mark.parametrize(
    "fix",
    [
        fixes.prefix_caching(),
        fixes.batched_tokens(2048),
        fixes.chunked_prefill_on(2048),
        fixes.kv_cache_quant(),
        fixes.kv_cache_quant("hopper"),
        fixes.memory_fraction(0.95),
        fixes.max_seqs(16),
        fixes.weight_quant(8.0),
        fixes.weight_quant(4.0),
        *(fixes.weight_quant(bits, gen) for bits in (8.0, 4.0) for gen in ("turing", "ampere", "ada", "hopper")),
        fixes.speculative_decoding(),
    ],
)
def test_every_fix_helper_names_only_tabled_flags(fix: dict[str, str]) -> None:
    assert _unknown(fix) == {}


def test_flag_refuses_an_unlisted_spelling() -> None:
    assert runtimes.flag("llamacpp", "--spec-draft-n-max") == "--spec-draft-n-max"
    with pytest.raises(KeyError, match="--max-batch-size"):
        runtimes.flag("vllm", "--max-batch-size")


def test_flags_in_skips_hyphenated_words() -> None:
    text = '-fa on -ctk q8_0 (a per-token, 8-bit cache) OLLAMA_NUM_PARALLEL=4 "--max-num-seqs 8"'
    assert runtimes.flags_in(text) == {"-fa", "-ctk", "OLLAMA_NUM_PARALLEL", "--max-num-seqs"}


@pytest.mark.parametrize(
    ("version", "value"),
    [("0.6.5", "auto"), ("0.9.6", "auto"), ("0.9.7", 1), ("0.12.3", 1)],
)
def test_ollama_num_parallel_default_by_version(version: str, value: object) -> None:
    entry = runtimes.default("ollama", "max_num_seqs", version)
    assert entry is not None
    assert entry.value == value


@pytest.mark.parametrize(
    ("version", "value"),
    [("0.6.6", 2048), ("0.6.7", 4096), ("0.15.4", 4096), ("0.15.5", "vram-tiered")],
)
def test_ollama_num_ctx_default_by_version(version: str, value: object) -> None:
    entry = runtimes.default("ollama", "context_length", version)
    assert entry is not None
    assert entry.value == value


def test_unknown_version_gets_the_newest_default_and_says_which_versions() -> None:
    entry = runtimes.default("ollama", "max_num_seqs", None)
    assert entry is not None
    assert entry.value == 1
    assert entry.versions == "0.9.7 and later"
    assert runtimes.applies_note("vllm", "--speculative-config", None) == " (vllm 0.8.0 and later)"
    assert runtimes.applies_note("vllm", "--speculative-config", "0.11.0") == ""


def test_every_entry_names_its_source() -> None:
    for table in runtimes.table().values():
        assert table.docs.startswith("https://")
        for entry in (*table.flags, *table.defaults):
            assert entry.source, entry


def test_rule_fix_flags_reads_a_rules_fixes_by_runtime() -> None:
    from advisor.rules.registry import get_rules

    rules = {r.id: type(r) for r in get_rules()}
    dec004 = runtimes.rule_fix_flags(rules["DEC004"])
    assert {"-md", "--spec-draft-n-max", "--draft-max", "--spec-type"} <= dec004["llamacpp"]
    assert runtimes.versions_of("llamacpp", "--draft-max") == "builds before ggml-org/llama.cpp#22397"
    cfg008 = runtimes.rule_fix_flags(rules["CFG008"])
    assert cfg008 == {"vllm": {"--enable-expert-parallel"}, "sglang": {"--ep-size"}, "trtllm": {"--ep_size"}}
    assert runtimes.versions_of("vllm", "--enable-expert-parallel") == "0.8.0 and later"


def test_annotate_fix_names_versions_the_run_cannot_vouch_for() -> None:
    fix = {"vllm": "--speculative-config '{...}'", "sglang": "--speculative-num-steps 3"}
    unknown = runtimes.annotate_fix(fix, "vllm", None)
    assert unknown["vllm"] == "--speculative-config '{...}' (--speculative-config: 0.8.0 and later)"
    assert unknown["sglang"] == "--speculative-num-steps 3"  # in every version the table knows
    assert runtimes.annotate_fix(fix, "vllm", "0.11.0")["vllm"] == fix["vllm"]
    old = runtimes.annotate_fix(fix, "vllm", "0.6.3")["vllm"]
    assert old.endswith("(--speculative-config: 0.8.0 and later, not 0.6.3)")
