"""Device capabilities and the runtime × method × generation support matrix, with sources."""

from __future__ import annotations

import pytest

from advisor.catalog import Catalog
from advisor.catalog.capabilities import capabilities, capability, support, support_source, weight_quant_choice


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
