from __future__ import annotations

from typing import Any

import msgspec

from advisor.canonical import Setup, Workload

__all__ = ["Band", "HardwareRanking", "PredictIn", "PredictOut"]


class PredictIn(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """A setup and a workload to predict (the canonical run's ``setup`` and ``workload``)."""

    setup: Setup
    workload: Workload = msgspec.field(default_factory=Workload)


class Band(msgspec.Struct, kw_only=True):
    """``ceiling`` is the physics bound (for latencies: the floor); ``expected`` is what a real server
    should reach, ``low``–``high`` its uncertainty band."""

    ceiling: float | None
    expected: float | None
    low: float | None
    high: float | None


class PredictOut(msgspec.Struct, kw_only=True):
    decode_tok_s: Band
    prefill_tok_s: Band
    ttft_ms: Band
    itl_ms: Band
    output_throughput_tok_s: Band
    weight_bytes: float
    kv_bytes_per_token: float | None
    kv_pool_tokens: int | None
    max_concurrent_sequences: int | None
    fits_in_memory: bool | None
    bound: dict[str, str]
    crossover_batch: float | None
    model_version: str
    expectation_source: str
    resolved: dict[str, Any]
    notes: list[str]
    #: Tail latencies, when the fitted model in force predicts them (the physics prior does not).
    ttft_p99_ms: Band | None = None
    itl_p99_ms: Band | None = None
    #: What carried the expectation: ``model``, ``baseline`` (roofline × constant, for a kind of
    #: device the fitted model never saw) or ``prior``.
    carried_by: str | None = None
    #: The device group predicted (``gpu_count`` devices, ``tensor_parallel`` of them in a TP
    #: group) and the fewest of 1, 2, 4 or 8 that hold the model (None: none does, or unknown).
    gpu_count: int = 1
    tensor_parallel: int = 1
    min_gpus_to_fit: int | None = None


class HardwareRanking(msgspec.Struct, kw_only=True):
    rank: int
    hardware: str
    name: str
    kind: str
    vendor: str | None
    memory_gb: float | None
    mem_bandwidth_gb_s: float
    fits_in_memory: bool | None
    decode_tok_s: Band
    prefill_tok_s: Band
    ttft_ms: Band
    #: Each device is predicted as a group of ``gpu_count`` (TP ``tensor_parallel``; Macs and CPUs
    #: stay at 1); ``min_gpus_to_fit``: the fewest of 1, 2, 4 or 8 that hold the model.
    gpu_count: int = 1
    tensor_parallel: int = 1
    min_gpus_to_fit: int | None = None
    model_version: str | None = None
    carried_by: str | None = None
    #: The weight format every row is predicted at: the query's, the model name's, or with
    #: neither the model's own checkpoint format (gpt-oss: mxfp4), else bf16.
    quantization: str | None = None
