"""Multi-device physics: tensor-parallel efficiency from the interconnect, and MoE expert dispatch.

Pure arithmetic on :mod:`advisor.physics.specs` values (no I/O, nothing else from advisor). The
roofline (:mod:`advisor.physics.roofline`) scales bandwidth and compute by the TP degree as if the
devices were one; this module says how much of that ideal a TP group keeps once it pays for its
communication.

Model (Megatron-style tensor parallelism, which vLLM, SGLang, TGI and TensorRT-LLM all use):

* every transformer layer does **two all-reduces** of the activations (after attention and after
  the MLP), each of ``tokens × hidden_size × 2`` bytes (16-bit activations);
* a ring all-reduce over ``tp`` ranks costs ``2 (tp-1)/tp × bytes / link_bandwidth`` plus a fixed
  latency per collective (:data:`ALLREDUCE_LATENCY_US`), which dominates at decode batch sizes;
* one decode step at ideal scaling takes ``t_ideal = weights_read / (tp × BW)`` (plus the batch's KV
  reads); the efficiency is ``t_ideal / (t_ideal + t_comm)``.

For MoE under expert parallelism (EP), each token is dispatched to ``num_experts_per_tok`` experts,
most of which live on other ranks: an all-to-all of ``tokens × top_k × hidden × 2`` bytes there and
back per MoE layer (:func:`expert_dispatch_seconds`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

from advisor.physics.roofline import weight_bytes
from advisor.physics.specs import HardwareSpec, ModelSpec, QuantSpec

__all__ = [
    "ACTIVATION_BYTES",
    "ALLREDUCE_HOP_US",
    "ALLREDUCE_LATENCY_US",
    "LINK_GB_S",
    "Interconnect",
    "InterconnectKind",
    "allreduce_seconds",
    "decode_step_seconds_ideal",
    "expert_dispatch_seconds",
    "interconnect_of",
    "parse_interconnect",
    "smallest_fitting_tp",
    "tp_communication_seconds",
    "tp_efficiency",
]

InterconnectKind = Literal["nvlink", "xgmi", "pcie", "bridge", "unified", "network", "none"]

#: Bytes per activation element exchanged by the collectives (bf16/fp16 activations).
ACTIVATION_BYTES: float = 2.0

#: Fixed cost of one small all-reduce (µs), by link kind: ``base + per_hop × 2 (tp-1)`` (a ring
#: all-reduce takes 2 (tp-1) steps, each paying a link latency). Calibrated to the shape of NCCL's
#: small-message ``all_reduce_perf`` results: ~7 µs for 2 and ~19 µs for 8 GPUs on NVLink/NVSwitch,
#: ~16 µs for 2 and ~50 µs for 8 GPUs through PCIe host bridges; both include the launch and
#: synchronisation around the collective. Estimates, not measurements of any one system.
ALLREDUCE_LATENCY_US: dict[str, float] = {
    "nvlink": 5.0,
    "xgmi": 7.0,
    "bridge": 6.0,
    "pcie": 10.0,
    "network": 30.0,
    "unified": 0.0,
    "none": 10.0,
}
ALLREDUCE_HOP_US: dict[str, float] = {
    "nvlink": 1.0,
    "xgmi": 1.5,
    "bridge": 1.0,
    "pcie": 3.0,
    "network": 5.0,
    "unified": 0.0,
    "none": 3.0,
}

#: Per-direction bandwidth (GB/s) of a PCIe x16 link by generation (PCI-SIG: 8, 16, 32, 64 GT/s
#: per lane for Gen3-6 after encoding ≈ 1, 2, 4, 8 GB/s per lane... ×16 lanes = 16/32/64/128).
LINK_GB_S: dict[str, float] = {
    "pcie3": 16.0,
    "pcie4": 32.0,
    "pcie5": 64.0,
    "pcie6": 128.0,
}


@dataclass(frozen=True, slots=True)
class Interconnect:
    """The link a TP group talks over: its kind, per-direction bandwidth (GB/s) and per-collective
    latency (µs). ``max_ranks`` is how many devices the link joins (a 2-way NVLink bridge: 2);
    beyond it the group falls back to PCIe."""

    kind: InterconnectKind
    bandwidth_gb_s: float
    latency_us: float
    max_ranks: int | None = None


_NUMBER = re.compile(r"([\d.]+)\s*(TB/s|GB/s)", re.IGNORECASE)
_GEN = re.compile(r"pcie\s*gen\s*(\d)", re.IGNORECASE)
_WAYS = re.compile(r"(\d)[- ]?(?:way|gpus)", re.IGNORECASE)


def _bandwidth(text: str) -> float | None:
    match = _NUMBER.search(text)
    if match is None:
        return None
    value = float(match.group(1))
    return value * 1000.0 if match.group(2).lower() == "tb/s" else value


def _pcie(text: str) -> Interconnect:
    gen = _GEN.search(text)
    bandwidth = LINK_GB_S.get(f"pcie{gen.group(1)}", LINK_GB_S["pcie4"]) if gen else LINK_GB_S["pcie4"]
    return Interconnect("pcie", bandwidth, ALLREDUCE_LATENCY_US["pcie"])


def parse_interconnect(text: str | None) -> Interconnect:
    """Read the catalog's free-text interconnect column (``hardware.csv``) into an
    :class:`Interconnect`.

    * ``NVLink 4 900 GB/s`` → nvlink at 900 GB/s (a "bridge" NVLink is ``bridge`` with its way count);
    * ``Infinity Fabric ... 896 GB/s`` → xgmi;
    * ``Unified memory`` → unified (one device, nothing to exchange);
    * ``PCIe GenN`` → pcie at that generation's x16 rate; anything else (or None) → PCIe Gen4.
    Figures are the aggregate per-GPU link rates vendors publish (both directions for NVLink);
    the ring uses half of it per direction.
    """
    if not text:
        return Interconnect("none", LINK_GB_S["pcie4"], ALLREDUCE_LATENCY_US["none"])
    lowered = text.lower()
    first = lowered.split(";")[0]
    if "unified memory" in first:
        return Interconnect("unified", math.inf, 0.0, max_ranks=1)
    if "nvlink" in first and "c2c" not in first:
        bandwidth = _bandwidth(first) or 600.0
        if "bridge" in first:
            ways = _WAYS.search(lowered)
            return Interconnect(
                "bridge", bandwidth / 2.0, ALLREDUCE_LATENCY_US["bridge"], int(ways.group(1)) if ways else 2
            )
        return Interconnect("nvlink", bandwidth / 2.0, ALLREDUCE_LATENCY_US["nvlink"])
    if "infinity fabric" in first:
        bandwidth = _bandwidth(first) or 300.0
        return Interconnect("xgmi", bandwidth / 2.0, ALLREDUCE_LATENCY_US["xgmi"])
    if any(word in first for word in ("ici", "neuronlink", "roce")):
        bandwidth = _bandwidth(first) or 100.0
        return Interconnect("network", bandwidth / 2.0, ALLREDUCE_LATENCY_US["network"])
    return _pcie(lowered)


def interconnect_of(kind: str | None, bandwidth_gb_s: float | None) -> Interconnect:
    """An :class:`Interconnect` from a kind (``nvlink``, ``bridge``, ``pcie``, ``xgmi``, ``unified``,
    ``network``; the catalog's ``tp_link``) and its per-direction GB/s (PCIe Gen4 when unknown). A
    ``bridge`` joins 2 devices."""
    known: tuple[InterconnectKind, ...] = ("nvlink", "xgmi", "pcie", "bridge", "unified", "network", "none")
    link: InterconnectKind = "none"
    for candidate in known:
        if kind == candidate:
            link = candidate
    if link == "unified":
        return Interconnect("unified", math.inf, 0.0, max_ranks=1)
    bandwidth = bandwidth_gb_s if bandwidth_gb_s and bandwidth_gb_s > 0 else LINK_GB_S["pcie4"]
    return Interconnect(link, bandwidth, ALLREDUCE_LATENCY_US[link], 2 if link == "bridge" else None)


def allreduce_seconds(message_bytes: float, *, tp: int, interconnect: Interconnect) -> float:
    """One ring all-reduce of ``message_bytes`` over ``tp`` ranks:
    ``latency + 2 (tp-1)/tp × bytes / bandwidth`` (0 for ``tp ≤ 1``). A group larger than the
    link's ``max_ranks`` (a 2-way bridge) runs over PCIe Gen4."""
    if tp <= 1:
        return 0.0
    link = interconnect
    if link.max_ranks is not None and tp > link.max_ranks:
        link = Interconnect("pcie", LINK_GB_S["pcie4"], ALLREDUCE_LATENCY_US["pcie"])
    transfer = (
        2.0 * (tp - 1) / tp * message_bytes / (link.bandwidth_gb_s * 1e9) if math.isfinite(link.bandwidth_gb_s) else 0.0
    )
    latency = link.latency_us + ALLREDUCE_HOP_US.get(link.kind, ALLREDUCE_HOP_US["pcie"]) * 2 * (tp - 1)
    return latency * 1e-6 + transfer


def tp_communication_seconds(model: ModelSpec, *, tp: int, tokens: float, interconnect: Interconnect) -> float:
    """All-reduce time one forward pass of ``tokens`` tokens pays under TP ``tp``:
    ``2 × layers × allreduce(tokens × hidden × 2 B)``. A model without a known shape is taken as
    32 layers of hidden 4096 (a 7-8B dense model), which keeps the estimate on the small side."""
    if tp <= 1:
        return 0.0
    layers = model.num_hidden_layers or 32
    hidden = model.hidden_size or 4096
    message = max(tokens, 1.0) * hidden * ACTIVATION_BYTES
    return 2.0 * layers * allreduce_seconds(message, tp=tp, interconnect=interconnect)


def decode_step_seconds_ideal(hardware: HardwareSpec, model: ModelSpec, quant: QuantSpec, *, tp: int) -> float:
    """One decode step at perfect TP scaling, weights only: ``active_weight_bytes / (tp × BW)``."""
    active = weight_bytes(model, quant, active=True)
    return active / (max(tp, 1) * hardware.mem_bandwidth_gb_s * 1e9)


def tp_efficiency(
    hardware: HardwareSpec,
    model: ModelSpec,
    quant: QuantSpec,
    *,
    tp: int,
    concurrency: float = 1.0,
    interconnect: Interconnect | str | None = None,
) -> float:
    """Share of the ideal TP decode speed a group of ``tp`` devices keeps, in (0, 1].

    ``t_ideal / (t_ideal + t_comm)`` for one decode step of ``concurrency`` streams, with
    ``t_ideal`` from :func:`decode_step_seconds_ideal` and ``t_comm`` from
    :func:`tp_communication_seconds`. ``interconnect`` is an :class:`Interconnect` or the catalog
    text (None → the device's own PCIe Gen4 guess). ``tp ≤ 1`` → 1.0.

    Example: Llama-3.1-70B bf16 on 8 × H100 SXM (NVLink 900 GB/s): ``t_ideal`` = 141 GB / (8 × 3350
    GB/s) = 5.3 ms, ``t_comm`` = 160 all-reduces × 19 µs = 3.0 ms → ≈ 0.63, so the 190 tok/s
    ideal ceiling becomes ≈ 120; the same group over PCIe Gen5 ≈ 0.39.
    """
    if tp <= 1:
        return 1.0
    link = interconnect if isinstance(interconnect, Interconnect) else parse_interconnect(interconnect)
    ideal = decode_step_seconds_ideal(hardware, model, quant, tp=tp)
    comm = tp_communication_seconds(model, tp=tp, tokens=max(concurrency, 1.0), interconnect=link)
    if ideal <= 0:
        return 1.0
    return ideal / (ideal + comm)


def expert_dispatch_seconds(
    model: ModelSpec, *, ep: int, tokens: float, interconnect: Interconnect | str | None = None
) -> float:
    """All-to-all time one forward pass of ``tokens`` tokens pays for MoE expert parallelism over
    ``ep`` ranks: per MoE layer, dispatch and combine of ``tokens × top_k × hidden × 2 B``, of
    which ``(ep-1)/ep`` leaves the rank, plus two collective latencies. 0 for a dense model, an
    unknown top-k, or ``ep ≤ 1``."""
    if ep <= 1 or not model.is_moe or not model.num_experts_per_tok:
        return 0.0
    link = interconnect if isinstance(interconnect, Interconnect) else parse_interconnect(interconnect)
    layers = model.num_hidden_layers or 32
    hidden = model.hidden_size or 4096
    moved = max(tokens, 1.0) * model.num_experts_per_tok * hidden * ACTIVATION_BYTES * (ep - 1) / ep
    transfer = moved / (link.bandwidth_gb_s * 1e9) if math.isfinite(link.bandwidth_gb_s) else 0.0
    return layers * 2.0 * (link.latency_us * 1e-6 + transfer)


def smallest_fitting_tp(
    hardware: HardwareSpec,
    model: ModelSpec,
    quant: QuantSpec,
    *,
    gpu_count: int,
    gpu_memory_utilization: float = 0.9,
    reserve_bytes_per_device: float = 2.0 * 1024**3,
) -> int | None:
    """The smallest tensor-parallel degree of ``gpu_count`` devices that holds the weights: the
    first of 1, 2, 4, … dividing ``gpu_count`` and, when known, the attention heads (vLLM's
    ``verify_with_parallel_config``: "Total number of attention heads … must be divisible by tensor
    parallel size") with ``memory × utilization − weights − reserve × tp > 0`` over the group, the
    KV pool's own test (:func:`advisor.physics.roofline.kv_pool_bytes`, whose defaults these are).
    None when the device memory is unknown or not even all ``gpu_count`` devices hold the model.

    For a run that states its GPUs but not how they split the model: a 405B FP8 model on 141 GB
    H200s needs 4 of them, so its per-stream ceiling is a 4-GPU group's, not one GPU's.
    """
    if not hardware.memory_gb or gpu_count < 1:
        return None
    weights = weight_bytes(model, quant)
    device = hardware.memory_gb * 1024**3  # GiB, as the engines count it (roofline.GIB)
    tp = 1
    while tp <= gpu_count:
        heads_ok = not model.num_attention_heads or model.num_attention_heads % tp == 0
        if (
            gpu_count % tp == 0
            and heads_ok
            and device * tp * gpu_memory_utilization - weights - reserve_bytes_per_device * tp > 0
        ):
            return tp
        tp *= 2
    return None
