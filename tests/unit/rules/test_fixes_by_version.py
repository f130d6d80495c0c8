"""Fix texts that depend on the run's runtime version and hardware (issue 13, engineer D2)."""

from __future__ import annotations

import pytest

from advisor.catalog import Catalog
from advisor.physics import HardwareSpec
from advisor.rules import fixes, runtimes, whatif


@pytest.mark.parametrize(
    ("build", "has_kv_unified"),
    [("b5606", False), ("b5912", False), ("b5913", True), ("b7300", True), (None, True)],
)
def test_llamacpp_slots_name_kv_unified_only_from_b5913(build: str | None, has_kv_unified: bool) -> None:
    text = fixes.max_seqs(4, build)["llamacpp"]
    assert text.startswith("-np 4")
    assert ("--kv-unified" in text) is has_kv_unified
    if not has_kv_unified:
        assert "raise -c" in text  # each of the 4 slots gets -c / 4


def test_llamacpp_draft_length_names_both_spellings_when_the_table_cannot_place_the_build() -> None:
    # --draft-max / --spec-draft-n-max are bounded by ggml-org/llama.cpp#22397 only (no build number).
    assert runtimes.versions_of("llamacpp", "--spec-draft-n-max").startswith("builds after")
    for build in ("b5606", "b9999", None):
        text = fixes.llamacpp_draft_max(build)
        assert text.startswith("--draft-max (builds before ggml-org/llama.cpp#22397")
        assert "--spec-draft-n-max" in text


def test_tgi_concurrency_fix_does_not_ask_to_size_an_ignored_flag() -> None:
    text = fixes.max_seqs(32)["tgi"]
    assert text.startswith("--max-concurrent-requests 32")
    assert "ignore --max-batch-total-tokens" in text
    assert "size --max-batch-total-tokens" not in text


@pytest.mark.parametrize(
    ("generation", "runtime", "has", "lacks"),
    [
        ("ampere", "vllm", "FlashInfer", ""),
        ("cdna3", "vllm", "ROCm", "FlashInfer"),
        ("hopper", "vllm", "--kv-cache-dtype fp8.", "FlashInfer"),
        ("hopper", "vllm", "Calibrate the KV scales", "FlashInfer"),  # the scales default to 1.0 everywhere
        ("blackwell", "vllm", "Calibrate the KV scales", "FlashInfer"),
        ("ada", "trtllm", "kv_cache_config", "FlashInfer"),
        ("ampere", "trtllm", "needs Ada, Hopper or Blackwell", "vllm"),
        ("cdna3", "tgi", "CUDA only", "FlashInfer"),
        ("ampere", "sglang", "fused", "vllm-project"),
    ],
)
def test_kv_cache_caveats_are_per_runtime_and_vendor(generation: str, runtime: str, has: str, lacks: str) -> None:
    text = fixes.kv_cache_quant(generation)[runtime]
    assert has in text
    if lacks:
        assert lacks not in text


def _hw(hardware_id: str) -> HardwareSpec:
    return next(h for h in Catalog.default().list_hardware() if isinstance(h, HardwareSpec) and h.id == hardware_id)


def test_cpu_runs_are_not_offered_a_macs_cpu_cores() -> None:
    ryzen, xeon, m2_max_cpu = _hw("amd-ryzen-9-7950x"), _hw("cpu-intel-xeon-spr-8ch-ddr5-4800"), _hw("apple-m2-max-cpu")
    assert whatif.platform_allows(ryzen, xeon, "llamacpp")
    assert not whatif.platform_allows(ryzen, m2_max_cpu, "llamacpp")
    assert whatif.platform_family(m2_max_cpu) == "apple"


def test_server_modules_are_a_step_only_from_data_centre_devices() -> None:
    m2_ultra, mi300x, h100 = _hw("apple-m2-ultra"), _hw("amd-mi300x"), _hw("nvidia-h100-pcie")
    assert not whatif.step_up(m2_ultra, mi300x)  # an OAM module for a Mac Studio
    assert whatif.step_up(_hw("nvidia-a100-80gb-pcie"), _hw("nvidia-h200-sxm"))  # an HBM card's user may
    assert not whatif.step_up(h100, _hw("nvidia-a10"))  # never a smaller card
