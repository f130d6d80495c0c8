"""CAP001 beyond its cases: which levers a full pool is offered on GPUs a runtime cannot quantize for."""

from __future__ import annotations

from tests.unit.rules.harness import RuleCase, cases_dir, load_cases, run_case


def _case(name: str) -> RuleCase:
    return next(c for c in load_cases(cases_dir() / "CAP001.yaml") if c.name == name)


def test_trtllm_on_ampere_is_never_told_to_store_the_kv_cache_in_fp8() -> None:
    # TensorRT-LLM runs no FP8 on Ampere (quant_support.toml trtllm.fp8): neither the lever the
    # finding picks nor the "other levers" may name it.
    _ctx, rec = run_case(_case("trtllm_on_ampere_adds_gpus_instead_of_an_fp8_cache"))
    assert rec is not None and rec.fix_for_runtime is not None
    assert rec.action == "add-capacity"
    assert "fp8" not in rec.fix_for_runtime, rec.fix_for_runtime


def test_trtllm_on_ada_keeps_fp8_among_its_levers() -> None:
    _ctx, rec = run_case(_case("trtllm_on_ada_keeps_the_fp8_cache"))
    assert rec is not None and rec.fix_for_runtime is not None
    assert "dtype: fp8" in rec.fix_for_runtime


def test_the_other_levers_leave_out_the_proposed_one_and_those_already_taken() -> None:
    # KV already fp8 at 0.95: more GPUs is the proposal, so neither it nor fp8 is "another lever".
    _ctx, rec = run_case(_case("nothing_cheap_left_means_more_gpus"))
    assert rec is not None and rec.fix_for_runtime is not None
    assert rec.action == "add-capacity"
    assert rec.fix_for_runtime.count("--tensor-parallel-size") == 1, rec.fix_for_runtime
    assert "--kv-cache-dtype" not in rec.fix_for_runtime, rec.fix_for_runtime
    # TensorRT-LLM on Ampere: "--tp_size 2" is the proposal; nothing else is left to list.
    _ctx, rec = run_case(_case("trtllm_on_ampere_adds_gpus_instead_of_an_fp8_cache"))
    assert rec is not None and rec.fix_for_runtime is not None
    assert rec.fix_for_runtime.count("--tp_size") == 1, rec.fix_for_runtime
