"""Every flag a rule can emit is in the runtime table (advisor/rules/data/runtimes.toml) for the
runtime whose fix names it, and the table's versioned defaults read as documented."""

from __future__ import annotations

import pytest

from advisor.canonical import CanonicalRun, Setup
from advisor.catalog import Catalog
from advisor.rules import fixes, runtimes
from advisor.rules.knobs import EngineConfig, engine_config
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
    assert runtimes.applies_note("vllm", "--speculative-config", None) == " (vllm 0.8.2 and later)"
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
    fix = {"vllm": "--speculative-config '{...}'", "sglang": "--tp-size 2"}
    unknown = runtimes.annotate_fix(fix, "vllm", None)
    assert unknown["vllm"] == "--speculative-config '{...}' (--speculative-config: 0.8.2 and later)"
    assert unknown["sglang"] == "--tp-size 2"  # in every version the table knows
    assert runtimes.annotate_fix(fix, "vllm", "0.11.0")["vllm"] == fix["vllm"]
    old = runtimes.annotate_fix(fix, "vllm", "0.8.1")["vllm"]
    assert old.endswith("(--speculative-config: 0.8.2 and later, not 0.8.1)")


# --- Release bounds read from the engines' released wheels (runtimes.toml, vLLM and SGLang) -------


@pytest.mark.parametrize(
    ("runtime", "name", "first", "before"),
    [
        ("vllm", "--data-parallel-size", "0.8.3", "0.8.2"),
        ("vllm", "--enable-expert-parallel", "0.8.0", "0.7.3"),
        ("vllm", "--no-enable-prefix-caching", "0.6.5", "0.6.4"),
        ("vllm", "--speculative-config", "0.8.2", "0.8.1"),
        ("vllm", "--kv-transfer-config", "0.6.5", "0.6.4"),
        ("vllm", "--cpu-offload-gb", "0.5.3", "0.5.2"),
        ("vllm", "--reasoning-parser", "0.9.0", "0.8.5"),
        ("sglang", "--chunked-prefill-size", "0.2.7", "0.2.6"),
        ("sglang", "--kv-cache-dtype", "0.2.14", "0.2.13"),
        ("sglang", "--enable-mixed-chunk", "0.2.14", "0.2.13"),
        ("sglang", "--ep-size", "0.4.1", "0.4.0"),
        ("sglang", "--speculative-algorithm", "0.4.2", "0.4.1"),
        ("sglang", "--reasoning-parser", "0.4.4", "0.4.3"),
        ("sglang", "--disaggregation-mode", "0.4.5", "0.4.4"),
        ("sglang", "--disaggregation-transfer-backend", "0.4.6", "0.4.5"),
    ],
)
def test_a_flag_holds_from_its_first_release_and_not_before(runtime: str, name: str, first: str, before: str) -> None:
    entry = runtimes._flags(runtime)[name]
    assert entry.holds(first) is True
    assert entry.holds(before) is False
    assert entry.holds("99.0.0") is True  # still in the newest wheel checked
    assert "wheel" in entry.source  # checked against a released wheel, not dated by a pull request


def _vllm_engine(hardware: str, version: str | None) -> EngineConfig:
    hw = Catalog.default().resolve_hardware(hardware)
    return engine_config(CanonicalRun(setup=Setup(runtime="vllm", runtime_version=version)), hw)


@pytest.mark.parametrize(
    ("hardware", "version", "budget", "seqs"),
    [
        # 0.8.0-0.8.4: the larger budget by device name (H100/H200), 1024 sequences everywhere.
        ("nvidia-h100-sxm", "0.8.0", 8192, 1024),
        ("nvidia-l40s", "0.8.4", 2048, 1024),
        ("nvidia-b200", "0.8.0", 2048, 1024),
        # 0.8.5: by memory (>= 70 GiB), A100 80GB included; 0.9.0 excludes A100.
        ("nvidia-a100-sxm-80gb", "0.8.5", 8192, 1024),
        ("nvidia-a100-sxm-80gb", "0.9.0", 2048, 256),
        ("nvidia-l40s", "0.9.2", 2048, 256),
        # 0.28.0: 16384 from 160 GiB; 0.33.0: GB10 (compute capability 12.1) back on the small tier.
        ("nvidia-b200", "0.27.0", 8192, 1024),
        ("nvidia-b200", "0.28.0", 16384, 1024),
        ("nvidia-dgx-spark-gb10", "0.32.0", 8192, 1024),
        ("nvidia-dgx-spark-gb10", "0.33.0", 2048, 256),
        # V0 (before 0.8.0): 256 sequences, the budget depends on max_model_len (unknown).
        ("nvidia-h100-sxm", "0.7.3", None, 256),
        # Unknown version: the newest release's defaults.
        ("nvidia-b200", None, 16384, 1024),
    ],
)
def test_vllm_batch_defaults_follow_the_release_and_the_device(
    hardware: str, version: str | None, budget: int | None, seqs: int
) -> None:
    engine = _vllm_engine(hardware, version)
    assert engine.batched_tokens.value == budget
    assert engine.max_num_seqs.value == seqs
    assert not engine.batched_tokens.explicit


@pytest.mark.parametrize(("version", "fraction"), [("0.5.2", 0.9), ("0.19.0", 0.9), ("0.20.0", 0.92), (None, 0.92)])
def test_vllm_memory_fraction_default_moved_to_092_in_020(version: str | None, fraction: float) -> None:
    assert _vllm_engine("nvidia-h100-sxm", version).memory_fraction.value == fraction


def test_quant_matrix_cells_read_from_the_kernels() -> None:
    from advisor.catalog.capabilities import support

    # vLLM: FP8 Marlin (W8A16) below capability 8.9; NVFP4 through FP4 Marlin off Blackwell.
    assert support("vllm", "fp8", "ampere") == "weight-only"
    assert support("vllm", "fp8", "ada") == "w8a8"
    assert support("vllm", "nvfp4", "hopper") == "weight-only"
    assert support("vllm", "nvfp4", "blackwell") == "w8a8"
    # SGLang's plain AWQ kernel needs capability 7.5, awq_marlin 8.0.
    assert support("sglang", "awq", "turing") == "weight-only"
    assert "--quantization awq)" in fixes.weight_quant(4.0, "turing")["sglang"]
    assert "--quantization awq_marlin)" in fixes.weight_quant(4.0, "ampere")["sglang"]


def test_kv_unified_holds_from_build_5913_and_not_5912() -> None:
    """ggml-org/llama.cpp#14847: b5912 has no kv_unified, b5913 logs it (the split-KV change #14363)."""
    entry = runtimes._flags("llamacpp")["--kv-unified"]
    assert entry.holds("5913") is True and entry.holds("b5913") is True
    assert entry.holds("5912") is False
    assert "14847" in entry.source
    assert runtimes.versions_of("llamacpp", "--kv-unified") == "5913 and later"
    note = runtimes.annotate_fix({"llamacpp": "-np 4 --kv-unified"}, "llamacpp", None)["llamacpp"]
    assert note.endswith("(--kv-unified: 5913 and later)")


@pytest.mark.parametrize(
    ("name", "first", "before"),
    [("--ep_size", "0.19.0", "0.18.2"), ("--extra_llm_api_options", "0.20.0", "0.18.2")],
)
def test_trtllm_serve_flags_hold_from_their_release_docs(name: str, first: str, before: str) -> None:
    """Bounded by the versioned trtllm-serve docs: absent from 0.18.2's page, present from ``first``."""
    entry = runtimes._flags("trtllm")[name]
    assert entry.holds(first) is True
    assert entry.holds(before) is False
    assert entry.holds("1.0.0") is True
    assert "0.18.2/commands/trtllm-serve.html" in entry.source


@pytest.mark.parametrize(
    "name",
    ["--max_num_tokens", "--max_batch_size", "--max_seq_len", "--tp_size", "--kv_cache_free_gpu_memory_fraction"],
)
def test_trtllm_serve_flags_of_0_18_2_are_unbounded(name: str) -> None:
    """In the oldest versioned trtllm-serve page found (0.18.2) and in the source checked: no bound."""
    entry = runtimes._flags("trtllm")[name]
    assert entry.span.every_version and entry.holds("0.18.2") is True


# --- Static: every flag a rule's source can emit, in branches no case reaches too ------------------

#: Flags of benchmark clients and system tools that fixes keyed "other" name (not engine flags, so
#: not in runtimes.toml): vllm bench serve / guidellm / genai-perf / sglang.bench_serving request
#: counts and warm-up, ``python -m``, and ``nvidia-smi -q -d``.
_CLIENT_TOOL_FLAGS = {"--num-prompts", "--max-requests", "--request-count", "--warmup-request-count", "-m", "-q", "-d"}


def _text(node: object) -> str:
    """The string a node builds, f-string holes read as ``0`` (so ``f"{n}-token"`` stays a word)."""
    import ast

    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(_text(v) if isinstance(v, ast.Constant) else "0" for v in node.values)
    if isinstance(node, ast.AST):
        return " ".join(_text(child) for child in ast.iter_child_nodes(node))
    return ""


def _rule_sources() -> dict[str, object]:
    import ast
    import inspect

    from advisor.rules import helpers
    from advisor.rules.registry import get_rules

    modules = {inspect.getmodule(type(rule)) for rule in get_rules()} | {fixes, helpers}
    return {m.__name__: ast.parse(inspect.getsource(m)) for m in modules if m is not None}


def _runtime_keyed_texts(tree: object) -> list[tuple[int, str, str]]:
    """(line, runtime, text) for every fix text the source keys by runtime: literal dicts, ``fix["tgi"] =``
    assignments, and ``("vllm", parts)`` pairs whose ``parts`` list is filled by ``.append(...)``."""
    import ast

    assert isinstance(tree, ast.AST)
    appended: dict[str, list[str]] = {}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("append", "extend")
            and isinstance(node.func.value, ast.Name)
        ):
            appended.setdefault(node.func.value.id, []).extend(_text(a) for a in node.args)
    out: list[tuple[int, str, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value in _RUNTIMES:
                    out.append((node.lineno, str(key.value), _text(value)))
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if (
                    isinstance(target, ast.Subscript)
                    and isinstance(target.slice, ast.Constant)
                    and target.slice.value in _RUNTIMES
                ):
                    out.append((node.lineno, str(target.slice.value), _text(node.value)))
        elif isinstance(node, ast.Tuple) and len(node.elts) == 2:
            key, parts = node.elts
            if isinstance(key, ast.Constant) and key.value in _RUNTIMES and isinstance(parts, ast.Name):
                out.append((node.lineno, str(key.value), " ".join(appended.get(parts.id, []))))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "flag"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "runtimes"
            and len(node.args) == 2
            and all(isinstance(a, ast.Constant) for a in node.args)
        ):
            runtime, name = (a.value for a in node.args)  # type: ignore[attr-defined]
            out.append((node.lineno, str(runtime), str(name)))
    return out


def test_every_flag_a_rules_source_keys_by_runtime_is_in_that_runtimes_table() -> None:
    """Read from the source, so a fix branch no case fires is checked too (the case test above
    only sees the fixes that fired)."""
    problems: list[str] = []
    seen = 0
    for module, tree in _rule_sources().items():
        for line, runtime, text in _runtime_keyed_texts(tree):
            for name in runtimes.flags_in(text):
                seen += 1
                if not runtimes.is_known_flag(runtime, name):
                    problems.append(f"{module}:{line} {runtime} {name}")
    assert seen > 80  # the walk really reaches the fix texts
    assert problems == []


def test_every_flag_shaped_string_in_a_rule_is_tabled_or_a_client_tool() -> None:
    """Any flag a rule's strings name (prose, "other" fixes, titles; not docstrings) is an engine
    flag of some runtime's table or one of the benchmark-client flags above."""
    import ast

    known = {f.flag for table in runtimes.table().values() for f in table.flags}
    problems: list[str] = []
    for module, tree in _rule_sources().items():
        if module == "advisor.rules.helpers":  # model-name markers ("-r1-"), no fix text
            continue
        assert isinstance(tree, ast.AST)
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        docstrings |= {  # an f-string's literal parts are read with the f-string
            id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr) or (
                isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
            ):
                for name in runtimes.flags_in(_text(node)):
                    if name.startswith("-") and name not in known and name not in _CLIENT_TOOL_FLAGS:
                        problems.append(f"{module}:{node.lineno} {name}")
    assert sorted(set(problems)) == []


def test_the_static_walk_sees_a_branch_no_case_fires() -> None:
    """The walk reads DEC002's per-runtime parts (built with .append and keyed in a loop) and
    CFG001's fix["tgi"] assignment."""
    texts = {(m, rt) for m, tree in _rule_sources().items() for _l, rt, _t in _runtime_keyed_texts(tree)}
    assert ("advisor.rules.dec.DEC002", "llamacpp") in texts
    assert ("advisor.rules.cfg.CFG001", "tgi") in texts


@pytest.mark.parametrize(
    ("build", "value"), [("6250", False), ("6324", False), ("6325", "auto"), ("b6327", "auto"), (None, "auto")]
)
def test_llamacpp_flash_attention_default_turns_auto_at_build_6325(build: str | None, value: object) -> None:
    """ggml-org/llama.cpp#15434 ("use FA + max. GPU layers by default"), first tag b6325: every
    build gets a default now (the 6251-6326 gap the earlier bounds left is closed)."""
    entry = runtimes.default("llamacpp", "flash_attention", build)
    assert entry is not None and entry.value == value
    assert "15434" in entry.source and "b6325" in entry.source
