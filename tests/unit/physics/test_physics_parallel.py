"""Tensor-parallel efficiency and MoE dispatch (advisor/physics/parallel.py)."""

from __future__ import annotations

import math

import pytest

from advisor.physics import HardwareSpec, ModelSpec, QuantSpec
from advisor.physics.parallel import (
    allreduce_seconds,
    expert_dispatch_seconds,
    interconnect_of,
    parse_interconnect,
    tp_communication_seconds,
    tp_efficiency,
)

F16 = QuantSpec("f16-bf16", "F16 / BF16", 16.0, "float")
H100 = HardwareSpec("nvidia-h100-sxm", "H100 SXM", "gpu", "NVIDIA", 3350, 80, 989.5, 989.5, 1979, 1979)
A10G = HardwareSpec("nvidia-a10g", "A10G", "gpu", "NVIDIA", 600, 24, 125, 125)
LLAMA_70B = ModelSpec("llama-70b", 70.6, 70.6, 80, 8192, 64, 8, 128)
LLAMA_8B = ModelSpec("llama-8b", 8.03, 8.03, 32, 4096, 32, 8, 128)
MIXTRAL = ModelSpec("mixtral", 46.7, 12.9, 32, 4096, 32, 8, 128, num_experts=8, num_experts_per_tok=2)


def test_parse_the_catalog_interconnect_text() -> None:
    nv = parse_interconnect("NVLink 4 900 GB/s; PCIe Gen5 128 GB/s")
    assert (nv.kind, nv.bandwidth_gb_s) == ("nvlink", 450.0)
    assert parse_interconnect("NVLink 5 1.8 TB/s; PCIe Gen6").bandwidth_gb_s == 900.0
    bridge = parse_interconnect("PCIe Gen4 x16; NVLink bridge 600 GB/s (2 GPUs)")
    assert bridge.kind == "pcie"  # the bridge is optional: the first link is what every card has
    assert parse_interconnect("NVLink bridge 600 GB/s; PCIe Gen5 128 GB/s").max_ranks == 2
    assert parse_interconnect("PCIe Gen3 x16").bandwidth_gb_s == 16.0
    assert parse_interconnect("Infinity Fabric 896 GB/s (7 links x 128 GB/s); PCIe Gen5 x16").kind == "xgmi"
    assert parse_interconnect("Unified memory LPDDR5").kind == "unified"
    assert parse_interconnect(None).kind == "none"


def test_ring_allreduce_latency_and_transfer() -> None:
    nvlink = interconnect_of("nvlink", 450.0)
    # 8 ranks: 5 µs + 1 µs × 14 hops; 1 MiB moves 2 × 7/8 of itself at 450 GB/s.
    assert allreduce_seconds(1024**2, tp=8, interconnect=nvlink) == pytest.approx(19e-6 + 1.75 * 1024**2 / 450e9)
    assert allreduce_seconds(1024**2, tp=1, interconnect=nvlink) == 0.0
    # A 2-way bridge cannot join 4 ranks: they talk over PCIe Gen4 (10 µs + 3 µs × 6 hops).
    bridge = interconnect_of("bridge", 56.0)
    assert allreduce_seconds(0.0, tp=4, interconnect=bridge) == pytest.approx(28e-6)


def test_tp8_70b_keeps_about_63_percent_on_nvlink_and_less_on_pcie() -> None:
    # t_ideal = 70.6e9 × 2 B / (8 × 3350 GB/s) = 5.27 ms; t_comm = 160 × 19 µs (+ 16 KiB each) ≈ 3.04 ms.
    ideal = 70.6e9 * 2 / (8 * 3350e9)
    comm = tp_communication_seconds(LLAMA_70B, tp=8, tokens=1, interconnect=interconnect_of("nvlink", 450.0))
    assert comm == pytest.approx(160 * (19e-6 + 1.75 * 8192 * 2 / 450e9))
    nvlink = tp_efficiency(H100, LLAMA_70B, F16, tp=8, interconnect="NVLink 4 900 GB/s; PCIe Gen5 128 GB/s")
    assert nvlink == pytest.approx(ideal / (ideal + comm))
    assert 0.62 < nvlink < 0.65
    pcie = tp_efficiency(H100, LLAMA_70B, F16, tp=8, interconnect="PCIe Gen5 128 GB/s")
    assert 0.37 < pcie < 0.40


def test_efficiency_falls_with_concurrency_and_ranks_over_pcie() -> None:
    link = interconnect_of("pcie", 32.0)
    tp2 = tp_efficiency(A10G, LLAMA_8B, F16, tp=2, interconnect=link)
    tp4 = tp_efficiency(A10G, LLAMA_8B, F16, tp=4, interconnect=link)
    busy = tp_efficiency(A10G, LLAMA_8B, F16, tp=4, concurrency=64, interconnect=link)
    assert 1.0 > tp2 > tp4 > busy > 0.0
    assert tp_efficiency(A10G, LLAMA_8B, F16, tp=1) == 1.0


def test_expert_dispatch_under_ep() -> None:
    link = interconnect_of("nvlink", 450.0)
    # 32 MoE layers × 2 all-to-alls × (5 µs + 64 tokens × top-2 × 4096 × 2 B × 7/8 / 450 GB/s).
    moved = 64 * 2 * 4096 * 2 * 7 / 8
    assert expert_dispatch_seconds(MIXTRAL, ep=8, tokens=64, interconnect=link) == pytest.approx(
        32 * 2 * (5e-6 + moved / 450e9)
    )
    assert expert_dispatch_seconds(LLAMA_8B, ep=8, tokens=64, interconnect=link) == 0.0
    assert expert_dispatch_seconds(MIXTRAL, ep=1, tokens=64, interconnect=link) == 0.0
    assert math.isfinite(expert_dispatch_seconds(MIXTRAL, ep=4, tokens=1))
