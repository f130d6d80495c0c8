"""Device capabilities and the runtime × method × generation support matrix, with sources."""

from __future__ import annotations

import dataclasses

import pytest

from advisor.catalog import Catalog
from advisor.catalog.capabilities import (
    _LADDER,
    capabilities,
    capability,
    gain_cap,
    support,
    support_source,
    weight_quant_choice,
)
from advisor.catalog.quant_gains import kernel_efficiency


def test_every_catalogued_device_has_a_capability_row_with_a_source() -> None:
    ids = {hw.id for hw in Catalog.default().list_hardware()}
    rows = capabilities()
    assert ids <= set(rows)
    for row in rows.values():
        assert row.source.startswith("https://")
        assert row.generation


@pytest.mark.parametrize(
    ("hardware", "generation", "fp8", "tp_link"),
    [
        ("nvidia-t4", "turing", False, "pcie"),
        ("nvidia-a10g", "ampere", False, "pcie"),
        ("nvidia-l40s", "ada", True, "pcie"),
        ("nvidia-h100-sxm", "hopper", True, "nvlink"),
        ("nvidia-b200", "blackwell", True, "nvlink"),
        ("amd-mi300x", "cdna3", True, "xgmi"),
        ("apple-m2-max", "apple-m2", False, "unified"),
    ],
)
def test_generation_formats_and_link(hardware: str, generation: str, fp8: bool, tp_link: str) -> None:
    cap = capability(hardware)
    assert cap is not None
    assert (cap.generation, cap.fp8, cap.tp_link) == (generation, fp8, tp_link)


def test_only_blackwell_and_cdna4_run_fp4() -> None:
    fp4 = {c.hardware_id for c in capabilities().values() if c.fp4}
    assert {"nvidia-b200", "nvidia-rtx-5090", "amd-mi355x"} <= fp4
    assert not {"nvidia-h100-sxm", "amd-mi300x", "nvidia-l40s"} & fp4


@pytest.mark.parametrize(
    ("runtime", "generation", "bits", "method", "how"),
    [
        ("vllm", "hopper", 8, "fp8", "w8a8"),
        ("vllm", "ada", 8, "fp8", "w8a8"),
        ("vllm", "ampere", 8, "fp8", "weight-only"),  # FP8 Marlin
        ("vllm", "turing", 8, "awq", "weight-only"),  # no FP8 on Turing: the 4-bit rung
        ("trtllm", "ampere", 8, "int8_weight_only", "weight-only"),
        ("trtllm", "ada", 8, "fp8", "w8a8"),
        ("trtllm", "ampere", 4, "int4_awq", "weight-only"),
        ("tgi", "ampere", 8, "fp8", "weight-only"),  # TGI's W8A8 fp8 is H100+; 8.x runs FP8 Marlin (W8A16)
        ("tgi", "turing", 8, "awq", "weight-only"),
        ("tgi", "hopper", 8, "fp8", "w8a8"),
        ("llamacpp", "apple-m2", 4, "gguf", "weight-only"),
        ("mlx", "apple-m3", 4, "mlx", "weight-only"),
    ],
)
def test_weight_quant_choice(runtime: str, generation: str, bits: float, method: str, how: str) -> None:
    choice = weight_quant_choice(runtime, generation, bits)
    assert choice is not None
    assert (choice.method, choice.how) == (method, how)
    assert choice.source


def test_nothing_is_proposed_where_nothing_runs() -> None:
    assert weight_quant_choice("trtllm", "turing", 8) is None
    assert weight_quant_choice("mlx", "hopper", 4) is None
    assert support("tgi", "fp8", "turing") == "none"
    assert support("tgi", "fp8", "ada") == "weight-only"  # layers/fp8.py: Marlin FP8 unless USE_CUTLASS_W8A8=1
    assert support("vllm", "fp8", "unknown-gen") is None


def test_vllm_fp8_carries_its_documented_gain() -> None:
    choice = weight_quant_choice("vllm", "hopper", 8)
    assert choice is not None
    assert choice.max_gain == 1.6
    assert choice.gain_source is not None and "1.6x" in choice.gain_source
    source = support_source("vllm", "fp8")
    assert source is not None and "docs.vllm.ai" in source


_GENERATIONS = ("turing", "ampere", "ada", "hopper", "blackwell", "cdna3", "apple-m2")


@pytest.mark.parametrize("runtime", sorted(_LADDER))
def test_every_method_the_advice_can_pick_carries_a_gain_with_its_source(runtime: str) -> None:
    """No rung falls back to the bare ceiling ratio: each has a cap, quoted with a URL or marked an estimate."""
    seen = 0
    for generation in _GENERATIONS:
        for bits in (8, 4):
            choice = weight_quant_choice(runtime, generation, bits)
            if choice is None:
                continue
            seen += 1
            assert choice.max_gain is not None, (runtime, generation, bits, choice.key)
            assert 1.0 < choice.max_gain <= 16 / choice.bits  # never above the weight-bytes ratio over 16 bits
            assert choice.gain_source is not None
            assert choice.gain_estimated == choice.gain_source.startswith("estimate:")
            if not choice.gain_estimated:  # a published figure is quoted with where it was published
                assert "https://" in choice.gain_source
    assert seen


def test_published_and_estimated_gains_are_told_apart() -> None:
    trt_fp8 = weight_quant_choice("trtllm", "hopper", 8)
    trt_awq = weight_quant_choice("trtllm", "ampere", 4)
    vllm_awq = weight_quant_choice("vllm", "turing", 8)  # no FP8 on Turing: the 4-bit rung
    assert trt_fp8 is not None and trt_fp8.max_gain == 1.51 and not trt_fp8.gain_estimated
    assert trt_awq is not None and trt_awq.max_gain == 1.61 and not trt_awq.gain_estimated
    # vLLM AWQ's max_gain is an estimated upper bound (the AWQ authors' 2.1-2.6x); the expected gain
    # comes from the documented Marlin figure below it (quant_support.toml documented_gain).
    assert vllm_awq is not None and vllm_awq.key == "awq" and vllm_awq.gain_estimated
    assert vllm_awq.max_gain is not None and 2.0 < vllm_awq.max_gain < 16 / vllm_awq.bits
    eff = kernel_efficiency("vllm", vllm_awq, "gpu")
    assert eff is not None and eff.basis == "documented" and eff.cap is not None
    assert eff.cap < vllm_awq.max_gain  # the documented figure, not the upper bound, caps the gain
    assert "vllm-project/vllm/pull/2497" in eff.source


def test_gguf_rungs_carry_their_own_gain() -> None:
    """The GGUF max_gain estimates are the fallback for a dataset without pairs: each rung has its
    own, the 4-bit above the 8-bit, both below the weight-bytes ratio, and the pairs the dataset has
    replace them (learnt efficiencies)."""
    q8 = weight_quant_choice("llamacpp", "apple-m2", 8)
    q4 = weight_quant_choice("ollama", "ampere", 4)
    assert q8 is not None and q8.key == "q8_0" and q8.max_gain is not None and q8.gain_estimated
    assert q4 is not None and q4.key == "q4_k_m" and q4.max_gain is not None and q4.gain_estimated
    assert 1.0 < q8.max_gain < q4.max_gain
    assert q8.max_gain < 16 / q8.bits and q4.max_gain < 16 / q4.bits
    for runtime, choice in (("llamacpp", q8), ("ollama", q4)):
        learnt = kernel_efficiency(runtime, choice, "gpu")
        assert learnt is not None and learnt.basis == "learnt", (runtime, choice.key)


def test_gain_cap_from_16_bits_is_the_gain_and_from_8_bits_the_ratio_of_gains() -> None:
    q4 = weight_quant_choice("llamacpp", "apple-m2", 4)
    awq = weight_quant_choice("vllm", "ampere", 4)
    assert q4 is not None and awq is not None
    q8 = weight_quant_choice("llamacpp", "apple-m2", 8)
    fp8 = weight_quant_choice("vllm", "ampere", 8)
    assert q8 is not None and fp8 is not None
    assert q4.max_gain is not None and q8.max_gain is not None and awq.max_gain is not None
    assert fp8.max_gain is not None
    assert gain_cap("llamacpp", "apple-m2", q4, 16) == (q4.max_gain, q4.gain_source)
    from_q8 = gain_cap("llamacpp", "apple-m2", q4, 8.5)
    assert from_q8 is not None and from_q8[0] == pytest.approx(q4.max_gain / q8.max_gain)
    assert "q4_k_m" in from_q8[1] and "q8_0" in from_q8[1]
    from_fp8 = gain_cap("vllm", "ampere", awq, 8)
    assert from_fp8 is not None and from_fp8[0] == pytest.approx(awq.max_gain / fp8.max_gain)
    assert "1.6x" in from_fp8[1]  # both sources are quoted
    assert gain_cap("vllm", "ampere", dataclasses.replace(awq, max_gain=None), 16) is None  # no figure, no cap


def test_nvfp4_is_the_4_bit_step_only_where_it_runs_natively() -> None:
    """Blackwell runs NVFP4 on FP4 tensor cores (quant_support.toml w8a8); elsewhere vLLM would run it
    weight-only through FP4 Marlin, the path AWQ takes, so the ladder proposes AWQ there."""
    for runtime in ("vllm", "trtllm"):
        blackwell = weight_quant_choice(runtime, "blackwell", 4)
        assert blackwell is not None and (blackwell.method, blackwell.how) == ("nvfp4", "w8a8"), runtime
        assert blackwell.gain_estimated and blackwell.max_gain is not None
    hopper = weight_quant_choice("vllm", "hopper", 4)
    assert hopper is not None and hopper.method == "awq"
    assert support("vllm", "nvfp4", "hopper") == "weight-only"  # described, not proposed
