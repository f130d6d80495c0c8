"""Roofline arithmetic: weight and KV bytes, decode and prefill ceilings, the KV pool (DESIGN §1).

Plain arithmetic on :mod:`advisor.physics.specs` values; no I/O, no imports from the rest of
advisor. Every function documents its formula. Ceilings are *upper bounds* at 100 % of the
spec-sheet bandwidth and compute: real servers land below them, and the gap (``efficiency``) is
what the rules and the fitted model reason about.

Formulas (B = bytes, F = FLOPs, BW = bandwidth in B/s, T = dense FLOP/s of the compute dtype):

* weights read per decoded token ``W = active_params × bits_per_weight / 8``.
* KV per token ``2 × layers × kv_heads × head_dim × bytes_per_element`` (MLA:
  ``layers × (kv_lora_rank + qk_rope_head_dim) × bytes_per_element``). Sliding-window layers stop
  growing at the window: ``kv(ctx) = global_per_token × ctx + local_per_token × min(ctx, window)``.
* decode step for a batch of ``b`` streams at context ``c``:
  ``t = max((W(b) + b × kv(c)) / BW, b × F_tok(c) / T)``; per-stream tok/s ``1/t``, aggregate
  ``b/t``. One weight read serves the whole batch; each stream reads its own KV. For MoE with known
  expert counts ``W(b)`` grows as the batch touches more experts (see :func:`weights_read_per_step`).
* ``F_tok(c) = 2 × active_params + 4 × n_heads × head_dim × Σ_layers attended(c)``: the matmuls
  (2 FLOPs per weight) plus attention (QKᵀ and AV, 2 FLOPs each per head dimension per attended
  token); local layers attend at most ``window`` tokens.
* prefill of ``p`` prompt tokens after ``d`` tokens already cached:
  ``F = 2 × active_params × p + 4 × n_heads × head_dim × Σ_layers Σ_{t=d+1..d+p} attended(t)``
  (the causal quadratic term ≈ ``4 × layers × hidden × (p×d + p²/2)``); time
  ``max(F / T, W_total_read / BW)``: a short prompt still has to stream the weights once.
  The two terms are kept apart (``Roofline.prefill_attention_flops``): real engines run the
  matmuls and the attention at different shares of peak (attention kernels at long KV depth reach
  far less of it than dense GEMMs), so the time a runtime takes is
  ``F_matmul / (e_m × T) + F_attention / (e_a × T)`` (:func:`prefill_seconds_split`); the ceiling
  is that time at ``e_m = e_a = 1``.
"""

from __future__ import annotations

import functools
import math
from typing import Literal

from advisor.physics.specs import HardwareSpec, ModelSpec, QuantSpec, Roofline

__all__ = [
    "ACTIVATION_RESERVE_BYTES_PER_DEVICE",
    "GIB",
    "KV_BYTES_PER_ELEMENT",
    "RUNTIME_RESERVE_BYTES_PER_DEVICE",
    "TP_BANDWIDTH_EFFICIENCY",
    "TP_COMPUTE_EFFICIENCY",
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
    "prefill_attention_flops",
    "prefill_ceiling",
    "prefill_efficiency",
    "prefill_flops",
    "prefill_matmul_flops",
    "prefill_seconds",
    "prefill_seconds_split",
    "tensor_parallel_scale",
    "ttft_floor_ms",
    "weight_bytes",
    "weights_read_per_step",
]

#: Bytes per cached element by KV-cache dtype. ``auto`` is the model's 16-bit dtype (vLLM, SGLang
#: and llama.cpp all default to it). GGUF block types from ``ggml-common.h``: q8_0 = 34 B / 32,
#: q4_0 = 18 B / 32, q4_1 = 20 B / 32, q5_0 = 22 B / 32, q5_1 = 24 B / 32, iq4_nl = 18 B / 32.
KV_BYTES_PER_ELEMENT: dict[str, float] = {
    "auto": 2.0,
    "fp16": 2.0,
    "bf16": 2.0,
    "fp32": 4.0,
    "fp8": 1.0,
    "fp8_e4m3": 1.0,
    "fp8_e5m2": 1.0,
    "int8": 1.0,
    "q8_0": 34 / 32,
    "q5_1": 24 / 32,
    "q5_0": 22 / 32,
    "q4_1": 20 / 32,
    "q4_0": 18 / 32,
    "iq4_nl": 18 / 32,
}

#: Device memory set aside before the KV pool, per device: CUDA context and other non-torch
#: allocations (~0.6 GiB), CUDA graphs, and the activation peak vLLM profiles at start-up (~1-1.5
#: GiB for a 2k-8k-token batch of a 7-70B model at TP≤8, per typical vLLM start-up logs).
#: 2 GiB is a round, slightly generous figure so the pool estimate errs small, not large.
ACTIVATION_RESERVE_BYTES_PER_DEVICE: float = 2.0 * 1024**3

#: Bytes in a GiB. Device memory is counted in GiB, as the engines see it: an "80 GB" H100 has
#: 80 GiB of HBM (torch.cuda.mem_get_info reports 85.0e9 bytes total), a "24 GB" card 24 GiB.
GIB: float = 1024.0**3

#: The activation/graph reserve each runtime keeps *inside* its memory fraction, per device.
#: * vLLM: ``gpu_memory_utilization`` covers weights, the profiled activation peak, CUDA graphs and
#:   the KV cache, so the reserve comes out of it (:data:`ACTIVATION_RESERVE_BYTES_PER_DEVICE`).
#: * TGI: warms up with ``--max-batch-prefill-tokens`` to measure the same peak inside
#:   ``--cuda-memory-fraction``: the same reserve.
#: * SGLang: ``--mem-fraction-static`` is weights + KV only; activations and CUDA graphs live in the
#:   rest of the device (server_arguments docs), so nothing is reserved inside it.
#: * TensorRT-LLM: ``free_gpu_memory_fraction`` is a share of the memory *left* after weights and
#:   activations (KvCacheConfig docs): see :func:`kv_pool_bytes`.
#: * llama.cpp / Ollama: a compute buffer of a few hundred MiB (logged as "compute buffer size").
RUNTIME_RESERVE_BYTES_PER_DEVICE: dict[str, float] = {
    "vllm": ACTIVATION_RESERVE_BYTES_PER_DEVICE,
    "tgi": ACTIVATION_RESERVE_BYTES_PER_DEVICE,
    "sglang": 0.0,
    "trtllm": ACTIVATION_RESERVE_BYTES_PER_DEVICE,
    "llamacpp": 0.5 * 1024**3,
    "ollama": 0.5 * 1024**3,
}

#: Tensor parallelism multiplies bandwidth, compute and memory by the number of devices. The
#: ceiling keeps the ideal (factor 1.0): all-reduce cost is a *runtime* inefficiency, seen as a
#: lower measured efficiency, and the prior/fitted model carry ``tensor_parallel`` as a feature.
#: :func:`advisor.physics.parallel.tp_efficiency` gives the share of that ideal a group keeps after
#: its all-reduces; rules that judge against the ceiling (DEC002, CFG005) scale it by that.
TP_BANDWIDTH_EFFICIENCY: float = 1.0
TP_COMPUTE_EFFICIENCY: float = 1.0


def _positive(name: str, value: float) -> float:
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return value


def kv_bytes_per_element(kv_cache_dtype: str) -> float:
    """Bytes per cached element for ``kv_cache_dtype`` (see :data:`KV_BYTES_PER_ELEMENT`)."""
    key = kv_cache_dtype.strip().lower()
    try:
        return KV_BYTES_PER_ELEMENT[key]
    except KeyError:
        raise ValueError(f"unknown kv_cache_dtype {kv_cache_dtype!r}") from None


def weight_bytes(model: ModelSpec, quant: QuantSpec, *, active: bool = False) -> float:
    """``params × bits_per_weight / 8`` bytes: all parameters (resident), or the active ones
    (read per decoded token) with ``active=True``.

    A format that quantizes only the routed experts (``quant.dense_bits_per_weight``) stores the
    rest at its own width: ``experts × bits / 8 + others × dense_bits / 8``. gpt-oss-20b in
    llama.cpp's MXFP4_MOE file reads 2.49 B expert parameters at 4.25 bits and 1.11 B others at
    8.5 per token, 2.5 GB, not the 1.9 GB of 3.6 B parameters at 4.25 bits."""
    params_b = model.active_params_b if active else model.params_b
    split = model.expert_split() if quant.dense_bits_per_weight is not None else None
    if split is None or quant.dense_bits_per_weight is None:
        return params_b * 1e9 * quant.bits_per_weight / 8.0
    experts_b = split[1] if active else split[0]
    others_b = model.active_params_b - split[1]
    return (experts_b * quant.bits_per_weight + others_b * quant.dense_bits_per_weight) * 1e9 / 8.0


def _layer_split(model: ModelSpec) -> tuple[int, int] | None:
    """``(global_layers, local_layers)`` or None when the layer count is unknown."""
    layers = model.num_hidden_layers
    if not layers:
        return None
    local = min(max(model.sliding_layers, 0), layers) if model.sliding_window else 0
    return layers - local, local


def _kv_elements_per_layer(model: ModelSpec) -> float | None:
    if model.attention == "mla" or model.kv_lora_rank is not None:
        if model.kv_lora_rank is None:
            return None
        return float(model.kv_lora_rank + (model.qk_rope_head_dim or 0))
    head_dim = model.effective_head_dim
    kv_heads = model.num_key_value_heads
    if kv_heads is None and model.attention == "mha":
        kv_heads = model.num_attention_heads
    if not head_dim or not kv_heads:
        return None
    return 2.0 * kv_heads * head_dim


def kv_bytes_per_token(model: ModelSpec, kv_cache_dtype: str = "auto") -> float | None:
    """KV bytes one token adds across *all* layers (the cost while the context is shorter than
    any window); None when the shape is unknown.

    ``2 × layers × kv_heads × head_dim × bytes`` (Llama-3.1-8B, 16 bit: 131,072 B); MLA caches
    ``kv_lora_rank + qk_rope_head_dim`` values per layer (DeepSeek-V3: 61 × 576 × 2 = 70,272 B).
    """
    split = _layer_split(model)
    per_layer = _kv_elements_per_layer(model)
    if split is None or per_layer is None:
        return None
    return (split[0] + split[1]) * per_layer * kv_bytes_per_element(kv_cache_dtype)


def kv_bytes(model: ModelSpec, context_tokens: float, kv_cache_dtype: str = "auto") -> float | None:
    """KV bytes held by one sequence of ``context_tokens``:
    ``global_bytes × ctx + local_bytes × min(ctx, window)``; None when the shape is unknown."""
    split = _layer_split(model)
    per_layer = _kv_elements_per_layer(model)
    if split is None or per_layer is None:
        return None
    per_element = kv_bytes_per_element(kv_cache_dtype)
    context = max(float(context_tokens), 0.0)
    global_layers, local_layers = split
    local_context = min(context, float(model.sliding_window)) if model.sliding_window else context
    return per_layer * per_element * (global_layers * context + local_layers * local_context)


def _attention_width(model: ModelSpec) -> float:
    """``n_heads × head_dim``: the width of QKᵀ and AV per attended token (0 when unknown, which
    leaves only the matmul term: a lower bound on FLOPs, so the ceiling stays an upper bound)."""
    head_dim = model.effective_head_dim
    if model.num_attention_heads and head_dim:
        return float(model.num_attention_heads * head_dim)
    return float(model.hidden_size or 0)


def attended_tokens_sum(model: ModelSpec, start: float, count: float) -> float:
    """Σ over layers and over query positions ``t = start+1 … start+count`` of the tokens each
    query attends to (``t`` for global layers, ``min(t, window)`` for local ones). Closed form,
    O(1)."""
    split = _layer_split(model)
    if split is None or count <= 0:
        return 0.0
    global_layers, local_layers = split
    first, last = start + 1.0, start + count
    full = count * (first + last) / 2.0  # Σ t for t = first..last
    if not local_layers or not model.sliding_window:
        return (global_layers + local_layers) * full
    window = float(model.sliding_window)
    if last <= window:
        capped = full
    elif first > window:
        capped = count * window
    else:
        below = window - first + 1.0  # positions first..window attend t
        capped = below * (first + window) / 2.0 + (count - below) * window
    return global_layers * full + local_layers * capped


def decode_flops_per_token(model: ModelSpec, context_tokens: float) -> float:
    """FLOPs to decode one token at ``context_tokens``: ``2 × active_params`` for the matmuls plus
    ``4 × n_heads × head_dim`` per attended token per layer."""
    attended = attended_tokens_sum(model, max(context_tokens - 1.0, 0.0), 1.0)
    return 2.0 * model.active_params_b * 1e9 + 4.0 * _attention_width(model) * attended


def prefill_matmul_flops(model: ModelSpec, prompt_tokens: float) -> float:
    """The linear (matmul) FLOPs of a prefill: ``2 × active_params × p``, independent of depth."""
    return 2.0 * model.active_params_b * 1e9 * max(prompt_tokens, 0.0)


def prefill_attention_flops(model: ModelSpec, prompt_tokens: float, kv_depth_tokens: float = 0.0) -> float:
    """The attention FLOPs of a prefill of ``prompt_tokens`` after ``kv_depth_tokens`` cached:
    ``4 × n_heads × head_dim × Σ_layers Σ_{t=d+1..d+p} attended(t)`` (QKᵀ and AV). For global
    layers this is ``4 × n_heads × head_dim × layers × (p × d + p × (p + 1) / 2)``: linear in the
    depth, quadratic in the prompt. 0 when the shape is unknown."""
    if prompt_tokens <= 0:
        return 0.0
    attended = attended_tokens_sum(model, max(kv_depth_tokens, 0.0), prompt_tokens)
    return 4.0 * _attention_width(model) * attended


def prefill_flops(model: ModelSpec, prompt_tokens: float, kv_depth_tokens: float = 0.0) -> float:
    """FLOPs to prefill ``prompt_tokens`` after ``kv_depth_tokens`` already cached:
    :func:`prefill_matmul_flops` (linear) + :func:`prefill_attention_flops` (quadratic)."""
    return prefill_matmul_flops(model, prompt_tokens) + prefill_attention_flops(model, prompt_tokens, kv_depth_tokens)


def tensor_parallel_scale(value: float, tensor_parallel: int, efficiency: float = 1.0) -> float:
    """``value × tp`` scaled by ``efficiency`` for tp > 1 (identity at tp = 1)."""
    if tensor_parallel <= 1:
        return value
    return value * tensor_parallel * efficiency


def weights_read_per_step(model: ModelSpec, quant: QuantSpec, batch: float) -> float:
    """Weight bytes one decode step reads for ``batch`` concurrent streams.

    Dense models: the active weights, once for the whole batch. MoE with known ``num_experts`` E
    and ``num_experts_per_tok`` k: the shared part ``D`` plus every expert some token routes to.
    With uniform routing a given expert is untouched by all ``b`` tokens with probability
    ``(1 - k/E)^b``, so the expected bytes are ``D + E × e × (1 - (1 - k/E)^b)``, where the expert
    size ``e = (total - active) / (E - k)`` and ``D = active - k × e``. At b = 1 this is exactly the
    active weights. Without expert counts the active weights are used (a lower bound on bytes, so
    the ceiling stays an upper bound).
    """
    active = weight_bytes(model, quant, active=True)
    experts, per_tok = model.num_experts, model.num_experts_per_tok
    if batch <= 1 or not model.is_moe or not experts or not per_tok or experts <= per_tok:
        return active
    total = weight_bytes(model, quant)
    expert = (total - active) / (experts - per_tok)
    shared = max(active - per_tok * expert, 0.0)
    touched = 1.0 - math.pow(1.0 - per_tok / experts, batch)
    return min(shared + experts * expert * touched, total)


def decode_ceiling(mem_bandwidth_gb_s: float, bytes_per_token: float) -> float:
    """Single-stream decode ceiling, tok/s: ``bandwidth / bytes read per token`` (DESIGN §1)."""
    return _positive("mem_bandwidth_gb_s", mem_bandwidth_gb_s) * 1e9 / _positive("bytes", bytes_per_token)


def decode_ceiling_batch(
    *,
    mem_bandwidth_gb_s: float,
    tflops: float,
    weight_bytes_read: float,
    kv_bytes_per_sequence: float,
    flops_per_token: float,
    batch: float,
) -> tuple[float, Literal["bandwidth", "compute"]]:
    """Per-stream decode ceiling (tok/s) with ``batch`` streams, and the binding resource.

    Step time ``max((W + b × kv) / BW, b × F / T)``: one weight read serves the batch, each
    stream reads its own KV, and compute grows with the batch.
    """
    bandwidth = _positive("mem_bandwidth_gb_s", mem_bandwidth_gb_s) * 1e9
    flops_per_s = _positive("tflops", tflops) * 1e12
    memory_time = (weight_bytes_read + batch * kv_bytes_per_sequence) / bandwidth
    compute_time = batch * flops_per_token / flops_per_s
    if compute_time > memory_time:
        return 1.0 / compute_time, "compute"
    return 1.0 / memory_time, "bandwidth"


def crossover_batch(
    *,
    mem_bandwidth_gb_s: float,
    tflops: float,
    weight_bytes_read: float,
    kv_bytes_per_sequence: float,
    flops_per_token: float,
) -> float | None:
    """Batch size where decode turns compute-bound: ``b* = (W/BW) / (F/T − kv/BW)``; None when
    ``F/T ≤ kv/BW`` (KV reads grow at least as fast as compute, so it never does). Dense weights;
    MoE growth is handled by :func:`analyse` numerically."""
    bandwidth = _positive("mem_bandwidth_gb_s", mem_bandwidth_gb_s) * 1e9
    flops_per_s = _positive("tflops", tflops) * 1e12
    slope = flops_per_token / flops_per_s - kv_bytes_per_sequence / bandwidth
    if slope <= 0:
        return None
    return (weight_bytes_read / bandwidth) / slope


def _moe_crossover(
    model: ModelSpec,
    quant: QuantSpec,
    *,
    bandwidth_gb_s: float,
    tflops: float,
    kv_per_sequence: float,
    flops_per_token: float,
) -> float | None:
    # compute_time - memory_time is convex in b (linear minus concave), negative at b = 0, so it
    # crosses zero at most once: bisect on [1, 2^20]. Hand-written because scipy is not a
    # dependency and 50 bisection steps cost ~20 µs.
    bandwidth, flops_per_s = bandwidth_gb_s * 1e9, tflops * 1e12

    def gap(b: float) -> float:
        memory = (weights_read_per_step(model, quant, b) + b * kv_per_sequence) / bandwidth
        return b * flops_per_token / flops_per_s - memory

    low, high = 1.0, float(2**20)
    if gap(high) <= 0:
        return None
    if gap(low) >= 0:
        return low
    for _ in range(50):
        mid = (low + high) / 2.0
        if gap(mid) >= 0:
            high = mid
        else:
            low = mid
    return high


def prefill_seconds(
    *, flops: float, tflops: float, weight_bytes_read: float, mem_bandwidth_gb_s: float
) -> tuple[float, Literal["compute", "bandwidth"]]:
    """Lower bound on prefill time: ``max(F / T, W / BW)``, and which term binds."""
    compute = flops / (_positive("tflops", tflops) * 1e12)
    memory = weight_bytes_read / (_positive("mem_bandwidth_gb_s", mem_bandwidth_gb_s) * 1e9)
    return (compute, "compute") if compute >= memory else (memory, "bandwidth")


def prefill_seconds_split(
    *,
    matmul_flops: float,
    attention_flops: float,
    tflops: float,
    matmul_efficiency: float = 1.0,
    attention_efficiency: float = 1.0,
) -> float:
    """Prefill compute time with one efficiency per term:
    ``F_matmul / (e_m × T) + F_attention / (e_a × T)``.

    At ``e_m = e_a = 1`` this is the compute term of :func:`prefill_seconds`. The share of peak a
    runtime reaches is ``1 / ((1 − a) / e_m + a / e_a)`` with ``a`` the attention share of the
    FLOPs (:func:`prefill_efficiency`)."""
    flops_per_s = _positive("tflops", tflops) * 1e12
    matmul = max(matmul_flops, 0.0) / (_positive("matmul_efficiency", matmul_efficiency) * flops_per_s)
    attention = max(attention_flops, 0.0) / (_positive("attention_efficiency", attention_efficiency) * flops_per_s)
    return matmul + attention


def prefill_efficiency(attention_share: float, matmul_efficiency: float, attention_efficiency: float) -> float:
    """The share of the compute ceiling a prefill reaches when its matmuls run at
    ``matmul_efficiency`` and its attention at ``attention_efficiency``, ``a`` being the attention
    share of its FLOPs: ``1 / ((1 − a) / e_m + a / e_a)`` (a weighted harmonic mean)."""
    a = min(max(attention_share, 0.0), 1.0)
    return 1.0 / (
        (1.0 - a) / _positive("matmul_efficiency", matmul_efficiency)
        + a / _positive("attention_efficiency", attention_efficiency)
    )


def prefill_ceiling(prompt_tokens: float, seconds: float) -> float:
    """Prompt tokens per second for a prefill lasting ``seconds``."""
    return prompt_tokens / _positive("seconds", seconds)


def ttft_floor_ms(prompt_tokens: float, prefill_tok_s: float) -> float:
    """Time to first token at the prefill ceiling: ``prompt / prefill × 1000`` ms."""
    return prompt_tokens / _positive("prefill_tok_s", prefill_tok_s) * 1000.0


def kv_replication(model: ModelSpec, tensor_parallel: int) -> int:
    """How many copies of each token's KV a TP group stores. KV heads shard across ranks, so when
    there are fewer KV heads than ranks they are replicated (vLLM); an MLA latent has no heads to
    shard and is replicated on every rank."""
    if tensor_parallel <= 1:
        return 1
    if model.attention == "mla" or model.kv_lora_rank is not None:
        return tensor_parallel
    kv_heads = model.num_key_value_heads or model.num_attention_heads
    if kv_heads and kv_heads < tensor_parallel:
        return math.ceil(tensor_parallel / kv_heads)
    return 1


def kv_pool_bytes(
    *,
    memory_bytes: float,
    gpu_memory_utilization: float,
    weight_bytes_resident: float,
    tensor_parallel: int = 1,
    runtime: str | None = None,
) -> float:
    """The KV pool as ``runtime`` sizes it (never negative); ``memory_bytes`` is the whole TP
    group's memory in bytes of GiB-counted devices (:data:`GIB`).

    * default and vLLM/TGI/SGLang/llama.cpp: ``memory × fraction − weights − reserve × devices``
      with the runtime's reserve (:data:`RUNTIME_RESERVE_BYTES_PER_DEVICE`; vLLM's when unknown);
    * TensorRT-LLM: ``(memory − weights − reserve × devices) × fraction``, its fraction being of
      the memory left after the weights.
    """
    devices = max(tensor_parallel, 1)
    reserve = RUNTIME_RESERVE_BYTES_PER_DEVICE.get(runtime or "vllm", ACTIVATION_RESERVE_BYTES_PER_DEVICE) * devices
    if runtime == "trtllm":
        return max((memory_bytes - weight_bytes_resident - reserve) * gpu_memory_utilization, 0.0)
    return max(memory_bytes * gpu_memory_utilization - weight_bytes_resident - reserve, 0.0)


def kv_pool_tokens(pool_bytes: float, per_token_bytes: float, replication: int = 1) -> int:
    """Tokens the pool holds at full per-token cost (every layer)."""
    return int(pool_bytes // (_positive("per_token_bytes", per_token_bytes) * replication))


def max_concurrent_sequences(pool_bytes: float, bytes_per_sequence: float, replication: int = 1) -> int:
    """Sequences of a given KV footprint that fit in the pool at once."""
    return int(pool_bytes // (_positive("bytes_per_sequence", bytes_per_sequence) * replication))


def analyse(
    hw: HardwareSpec,
    model: ModelSpec,
    quant: QuantSpec,
    *,
    prompt_tokens: float | None = None,
    output_tokens: float | None = None,
    kv_depth_tokens: float = 0,
    concurrency: float = 1,
    tensor_parallel: int = 1,
    kv_cache_dtype: str = "auto",
    gpu_memory_utilization: float = 0.9,
    runtime: str | None = None,
) -> Roofline:
    """The whole roofline for one setup and workload (see :func:`_analyse`).

    ``runtime`` sizes the KV pool the way that engine does (:func:`kv_pool_bytes`: its reserve,
    and TensorRT-LLM's fraction of what is left after the weights); None means vLLM's semantics.

    Memoised: the specs are frozen and the result is immutable, and every analysed run asks for
    its own roofline and those of its what-ifs, mostly the same few setups over and over.
    """
    args = (
        hw, model, quant, prompt_tokens, output_tokens, kv_depth_tokens, concurrency, tensor_parallel,
        kv_cache_dtype, gpu_memory_utilization, runtime,
    )  # fmt: skip
    try:
        return _analyse_cached(*args)
    except TypeError:  # an unhashable inline spec: compute it afresh
        return _analyse(*args)


def _analyse(
    hw: HardwareSpec,
    model: ModelSpec,
    quant: QuantSpec,
    prompt_tokens: float | None,
    output_tokens: float | None,
    kv_depth_tokens: float,
    concurrency: float,
    tensor_parallel: int,
    kv_cache_dtype: str,
    gpu_memory_utilization: float,
    runtime: str | None = None,
) -> Roofline:
    """The whole roofline for one setup and workload.

    * Context: ``context_tokens = kv_depth + prompt + output`` (what a sequence must fit);
      the decode ceilings use the mean context over the decode, ``kv_depth + prompt + output/2``.
    * Tensor parallelism multiplies bandwidth, compute and memory by ``tensor_parallel`` (see
      :data:`TP_BANDWIDTH_EFFICIENCY`).
    * Prefill runs in ``quant.compute_dtype(hw)`` at the published dense rate, or an estimate
      (``prefill_tflops_estimated``) when the device publishes none.
    * Without ``prompt_tokens`` the prefill ceiling is the long-prompt asymptote of the linear
      term, ``T / (2 × active_params)``, and ``ttft_floor_ms`` is None.

    Token counts and concurrency may be means (floats); they are rounded. Raises ``ValueError``
    for non-positive bandwidth/params/bits/concurrency/TP, negative token counts, an unknown
    ``kv_cache_dtype`` or a utilisation outside (0, 1].
    """
    _positive("hardware.mem_bandwidth_gb_s", hw.mem_bandwidth_gb_s)
    _positive("model.params_b", model.params_b)
    _positive("model.active_params_b", model.active_params_b)
    _positive("quantization.bits_per_weight", quant.bits_per_weight)
    if concurrency < 1 or tensor_parallel < 1:
        raise ValueError("concurrency and tensor_parallel must be at least 1")
    if not 0 < gpu_memory_utilization <= 1:
        raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization!r}")
    for name, tokens in (("prompt_tokens", prompt_tokens), ("output_tokens", output_tokens)):
        if tokens is not None and tokens < 0:
            raise ValueError(f"{name} must not be negative")
    if kv_depth_tokens < 0:
        raise ValueError("kv_depth_tokens must not be negative")
    kv_bytes_per_element(kv_cache_dtype)  # reject an unknown dtype even when the shape is unknown
    # Workloads carry means (2047.6 prompt tokens, concurrency 15.8): round to whole tokens/streams.
    prompt = round(prompt_tokens) if prompt_tokens is not None else None
    output = round(output_tokens) if output_tokens is not None else None
    depth = round(kv_depth_tokens)
    streams = max(round(concurrency), 1)

    tp = tensor_parallel
    bandwidth = tensor_parallel_scale(hw.mem_bandwidth_gb_s, tp, TP_BANDWIDTH_EFFICIENCY)
    prefill_dtype = quant.compute_dtype(hw)
    device_tflops, estimated = hw.compute_tflops(prefill_dtype)
    tflops = tensor_parallel_scale(device_tflops, tp, TP_COMPUTE_EFFICIENCY)

    resident = weight_bytes(model, quant)
    active = weight_bytes(model, quant, active=True)
    prompt_count = prompt or 0
    output_count = output or 0
    context = depth + prompt_count + output_count
    decode_context = depth + prompt_count + output_count / 2.0

    per_token = kv_bytes_per_token(model, kv_cache_dtype)
    at_context = kv_bytes(model, context, kv_cache_dtype)
    kv_decode_known = kv_bytes(model, decode_context, kv_cache_dtype)
    kv_decode = kv_decode_known or 0.0
    flops_token = decode_flops_per_token(model, decode_context)

    single, _ = decode_ceiling_batch(
        mem_bandwidth_gb_s=bandwidth,
        tflops=tflops,
        weight_bytes_read=active,
        kv_bytes_per_sequence=kv_decode,
        flops_per_token=flops_token,
        batch=1,
    )
    per_stream, bound = decode_ceiling_batch(
        mem_bandwidth_gb_s=bandwidth,
        tflops=tflops,
        weight_bytes_read=weights_read_per_step(model, quant, streams),
        kv_bytes_per_sequence=kv_decode,
        flops_per_token=flops_token,
        batch=streams,
    )
    if model.is_moe and model.num_experts and model.num_experts_per_tok:
        crossover = _moe_crossover(
            model,
            quant,
            bandwidth_gb_s=bandwidth,
            tflops=tflops,
            kv_per_sequence=kv_decode,
            flops_per_token=flops_token,
        )
    else:
        crossover = crossover_batch(
            mem_bandwidth_gb_s=bandwidth,
            tflops=tflops,
            weight_bytes_read=active,
            kv_bytes_per_sequence=kv_decode,
            flops_per_token=flops_token,
        )

    ttft: float | None = None
    flops: float | None = None
    attention_flops: float | None = None
    prefill_bound: Literal["compute", "bandwidth"] = "compute"
    if prompt_count > 0:
        attention_flops = prefill_attention_flops(model, prompt_count, depth)
        flops = prefill_matmul_flops(model, prompt_count) + attention_flops
        # A prompt larger than the batch touches every expert, but never more than all weights.
        read = min(weights_read_per_step(model, quant, prompt_count), resident)
        seconds, prefill_bound = prefill_seconds(
            flops=flops, tflops=tflops, weight_bytes_read=read, mem_bandwidth_gb_s=bandwidth
        )
        prefill = prefill_ceiling(prompt_count, seconds)
        ttft = ttft_floor_ms(prompt_count, prefill)
    else:
        prefill = tflops * 1e12 / (2.0 * model.active_params_b * 1e9)

    memory = hw.memory_gb * GIB * tp if hw.memory_gb else None  # GiB, as the engine sees it
    pool_tokens: int | None = None
    max_sequences: int | None = None
    fits: bool | None = None
    if memory is not None:
        pool = kv_pool_bytes(
            memory_bytes=memory,
            gpu_memory_utilization=gpu_memory_utilization,
            weight_bytes_resident=resident,
            tensor_parallel=tp,
            runtime=runtime,
        )
        replication = kv_replication(model, tp)
        if per_token:
            pool_tokens = kv_pool_tokens(pool, per_token, replication)
        if at_context and context > 0:
            max_sequences = max_concurrent_sequences(pool, at_context, replication)
            fits = max_sequences >= 1
        else:
            fits = pool > 0

    return Roofline(
        weight_bytes=resident,
        active_weight_bytes=active,
        kv_bytes_per_token=per_token,
        kv_bytes_at_context=at_context,
        decode_ceiling_tok_s=single,
        decode_ceiling_batch_tok_s=per_stream,
        decode_aggregate_ceiling_tok_s=per_stream * streams,
        decode_bound=bound,
        crossover_batch=crossover,
        prefill_ceiling_tok_s=prefill,
        prefill_dtype=prefill_dtype,
        prefill_tflops=tflops,
        prefill_tflops_estimated=estimated,
        prefill_bound=prefill_bound,
        prefill_flops=flops,
        ttft_floor_ms=ttft,
        itl_floor_ms=1000.0 / per_stream,
        kv_pool_tokens=pool_tokens,
        max_concurrent_sequences=max_sequences,
        fits_in_memory=fits,
        mem_bandwidth_gb_s=bandwidth,
        memory_bytes=memory,
        context_tokens=context,
        decode_context_tokens=decode_context,
        prompt_tokens=prompt,
        output_tokens=output,
        kv_depth_tokens=depth,
        concurrency=streams,
        tensor_parallel=tp,
        kv_cache_dtype=kv_cache_dtype,
        gpu_memory_utilization=gpu_memory_utilization,
        prefill_attention_flops=attention_flops,
        decode_kv_bytes_per_sequence=kv_decode_known,
    )


_analyse_cached = functools.lru_cache(maxsize=4096)(_analyse)


def clear_cache() -> None:
    """Forget the memoised rooflines of :func:`analyse` (tests compare cold and warm analyses)."""
    _analyse_cached.cache_clear()
