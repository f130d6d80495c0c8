"""Roofline physics: weight and KV bytes, decode and prefill ceilings, KV pool capacity.

Pure arithmetic (DESIGN §1, §3): imports nothing else from advisor. The usual entry point is
:func:`analyse`, which returns a :class:`Roofline` bundle for a hardware/model/quantization setup
and a workload.
"""

from __future__ import annotations

from advisor.physics.roofline import (
    ACTIVATION_RESERVE_BYTES_PER_DEVICE,
    GIB,
    KV_BYTES_PER_ELEMENT,
    RUNTIME_RESERVE_BYTES_PER_DEVICE,
    TP_BANDWIDTH_EFFICIENCY,
    TP_COMPUTE_EFFICIENCY,
    analyse,
    attended_tokens_sum,
    crossover_batch,
    decode_ceiling,
    decode_ceiling_batch,
    decode_flops_per_token,
    kv_bytes,
    kv_bytes_per_element,
    kv_bytes_per_token,
    kv_pool_bytes,
    kv_pool_tokens,
    kv_replication,
    max_concurrent_sequences,
    prefill_ceiling,
    prefill_flops,
    prefill_seconds,
    tensor_parallel_scale,
    ttft_floor_ms,
    weight_bytes,
    weights_read_per_step,
)
from advisor.physics.specs import (
    ESTIMATED_OPS_PER_BYTE,
    HardwareKind,
    HardwareSpec,
    ModelSpec,
    QuantSpec,
    Roofline,
    normalise_compute_dtype,
)

__all__ = [
    "ACTIVATION_RESERVE_BYTES_PER_DEVICE",
    "ESTIMATED_OPS_PER_BYTE",
    "GIB",
    "KV_BYTES_PER_ELEMENT",
    "RUNTIME_RESERVE_BYTES_PER_DEVICE",
    "TP_BANDWIDTH_EFFICIENCY",
    "TP_COMPUTE_EFFICIENCY",
    "HardwareKind",
    "HardwareSpec",
    "ModelSpec",
    "QuantSpec",
    "Roofline",
    "analyse",
    "attended_tokens_sum",
    "crossover_batch",
    "decode_ceiling",
    "decode_ceiling_batch",
    "decode_flops_per_token",
    "kv_bytes",
    "kv_bytes_per_element",
    "kv_bytes_per_token",
    "kv_pool_bytes",
    "kv_pool_tokens",
    "kv_replication",
    "max_concurrent_sequences",
    "normalise_compute_dtype",
    "prefill_ceiling",
    "prefill_flops",
    "prefill_seconds",
    "tensor_parallel_scale",
    "ttft_floor_ms",
    "weight_bytes",
    "weights_read_per_step",
]
