"""The value types of the roofline physics: hardware, model, quantization and the result bundle.

Everything here is a frozen, slotted dataclass with no I/O and no imports from the rest of
advisor (DESIGN §3: physics imports nothing else from the project). The catalog builds these from
its shipped data, inline spec objects and Hugging Face ``config.json`` bodies; the rules and the
fitted model read :class:`Roofline`.

Units: bytes, GB/s (1e9 B/s), TFLOPS (1e12 FLOP/s), tokens, tokens per second, milliseconds.
Parameter counts are in billions (``params_b``), as in the catalog.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

__all__ = [
    "ESTIMATED_OPS_PER_BYTE",
    "HardwareKind",
    "HardwareSpec",
    "ModelSpec",
    "QuantSpec",
    "Roofline",
    "normalise_compute_dtype",
]

HardwareKind = Literal["gpu", "cpu", "apple_soc", "accelerator"]

#: Conservative 16-bit matmul FLOPs per byte of memory bandwidth, used to *estimate* peak TFLOPS
#: when a device publishes no tensor throughput (Apple GPUs, CPUs, some GPUs; data/README.md).
#: Prefill is compute-bound, so without a compute figure it would have no ceiling at all; a
#: device's ops:byte ratio is far more stable within a kind than its absolute TFLOPS.
#: Derivation (published FP16 figures ÷ bandwidth, dense):
#:
#: * ``apple_soc`` 30: Apple GPUs run FP16 at their FP32 rate, 34-49 FLOP/B across M1-M4
#:   (M1 2.6 TFLOPS / 68 GB/s = 38; M2 Ultra 27.2 / 800 = 34; M4 Max 18.4 / 546 = 34). 30 sits at
#:   the low end; llama.cpp Metal measures pp512 at ~24 FLOP/B on M2 Ultra.
#: * ``cpu`` 20: Zen 4 desktop AVX-512 ~2.6 TFLOPS FP32 / 83 GB/s = 31, Genoa 96-core
#:   10.7 / 461 = 23; CPUs without AMX rarely reach their FP32 peak in GEMM. (AMX parts are far
#:   higher; give ``fp16_tflops`` inline for those.)
#: * ``gpu`` 100: published GPU ratios run from 76 (RTX 3090 71/936) through ~110-130
#:   (MI210, A10G, RTX 5090, RX 7900 XTX) to 400+ (L4, L40S); 100 is about the 10th percentile
#:   of the catalogued GPUs, so it understates most parts. The GPUs that need it (DGX Spark GB10,
#:   Arc A770, Strix Halo) are really ~230-460, so llama.cpp prefill on them can exceed this
#:   estimated ceiling (``Roofline.prefill_tflops_estimated`` says so).
#: * ``accelerator`` 100: same reasoning (TPU v5e 197/819 = 240, Gaudi 2 432/2460 = 176).
ESTIMATED_OPS_PER_BYTE: dict[str, float] = {
    "apple_soc": 30.0,
    "cpu": 20.0,
    "gpu": 100.0,
    "accelerator": 100.0,
}

_DTYPE_ALIASES: dict[str, str] = {
    "fp16": "fp16",
    "float16": "fp16",
    "half": "fp16",
    "f16": "fp16",
    "bf16": "bf16",
    "bfloat16": "bf16",
    "fp8": "fp8",
    "float8": "fp8",
    "fp8_e4m3": "fp8",
    "fp8_e5m2": "fp8",
    "int8": "int8",
    "i8": "int8",
    "fp32": "fp32",
    "float32": "fp32",
    "f32": "fp32",
}


def normalise_compute_dtype(dtype: str) -> str:
    """Map a compute dtype spelling to one of ``fp16``, ``bf16``, ``fp8``, ``int8``, ``fp32``.

    Raises ``ValueError`` for anything else (the catalog turns names into these first).
    """
    key = dtype.strip().lower()
    try:
        return _DTYPE_ALIASES[key]
    except KeyError:
        raise ValueError(f"unknown compute dtype {dtype!r}") from None


@dataclass(frozen=True, slots=True)
class HardwareSpec:
    """One device (or, for CPUs, one memory configuration). Figures are per device, dense.

    ``mem_bandwidth_gb_s`` is required; every TFLOPS figure is optional (None = not published).
    """

    id: str
    name: str
    kind: str
    vendor: str
    mem_bandwidth_gb_s: float
    memory_gb: float | None = None
    fp16_tflops: float | None = None
    bf16_tflops: float | None = None
    fp8_tflops: float | None = None
    int8_tops: float | None = None
    #: Streaming multiprocessors and boost clock (MHz) of an NVIDIA GPU (None = not catalogued):
    #: what caps the rate at which llama.cpp's decode kernels issue loads (advisor.ml.base).
    sm_count: int | None = None
    boost_clock_mhz: float | None = None

    def _sixteen_bit(self, prefer: str) -> float | None:
        # data/README.md: if one 16-bit figure is empty the other may be used (Radeon lists only
        # FP16, TPU/Gaudi only BF16); the tensor units run both at the same rate on every
        # catalogued part that lists both.
        first, second = (
            (self.bf16_tflops, self.fp16_tflops) if prefer == "bf16" else (self.fp16_tflops, self.bf16_tflops)
        )
        return first if first is not None else second

    def dense_tflops(self, dtype: str) -> float | None:
        """Published dense tensor throughput for ``dtype`` (TFLOPS, or TOPS for int8), or None.

        Fallbacks (only between *published* figures): bf16 ↔ fp16; fp8 and int8 fall back to the
        16-bit rate when the device has no fp8/int8 units (the runtime then computes in 16 bits);
        fp32 is taken as half the 16-bit tensor rate (TF32 on NVIDIA tensor cores).
        """
        kind = normalise_compute_dtype(dtype)
        if kind in ("fp16", "bf16"):
            return self._sixteen_bit(kind)
        if kind == "fp8":
            return self.fp8_tflops if self.fp8_tflops is not None else self._sixteen_bit("bf16")
        if kind == "int8":
            return self.int8_tops if self.int8_tops is not None else self._sixteen_bit("fp16")
        sixteen = self._sixteen_bit("bf16")
        return sixteen / 2.0 if sixteen is not None else None

    def estimated_tflops(self, dtype: str) -> float:
        """A conservative stand-in for :meth:`dense_tflops` when nothing usable is published.

        In order: half a published fp8/int8 rate stands in for 16 bits (8-bit tensor units run at
        twice the 16-bit rate on every catalogued part that lists both); otherwise
        ``mem_bandwidth_gb_s × ESTIMATED_OPS_PER_BYTE[kind] / 1000``. 8-bit dtypes without 8-bit
        units get the 16-bit estimate; fp32 half of it.
        """
        kind = normalise_compute_dtype(dtype)
        eight_bit = self.fp8_tflops if self.fp8_tflops is not None else self.int8_tops
        if eight_bit is not None:
            sixteen = eight_bit / 2.0
        else:
            ratio = ESTIMATED_OPS_PER_BYTE.get(self.kind, ESTIMATED_OPS_PER_BYTE["gpu"])
            sixteen = self.mem_bandwidth_gb_s * ratio / 1000.0
        if kind == "fp32":
            return sixteen / 2.0
        if kind == "fp8" and self.fp8_tflops is not None:
            return self.fp8_tflops
        if kind == "int8" and self.int8_tops is not None:
            return self.int8_tops
        return sixteen

    def compute_tflops(self, dtype: str) -> tuple[float, bool]:
        """``(tflops, estimated)``: the published figure if any, else :meth:`estimated_tflops`."""
        published = self.dense_tflops(dtype)
        if published is not None and published > 0:
            return published, False
        return self.estimated_tflops(dtype), True

    def has_native(self, dtype: str) -> bool:
        """Whether the device publishes a tensor rate for exactly this 8-bit dtype."""
        kind = normalise_compute_dtype(dtype)
        if kind == "fp8":
            return self.fp8_tflops is not None
        if kind == "int8":
            return self.int8_tops is not None
        return True

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A model architecture. Only ``params_b``/``active_params_b`` are required; shape fields that
    are unknown stay None and whatever depends on them (KV bytes, the KV pool) is None too.

    * ``attention``: ``mha``, ``gqa``, ``mqa``, ``mla`` or ``sliding+global``.
    * MLA (DeepSeek-V2/V3): the cache holds ``kv_lora_rank + qk_rope_head_dim`` values per layer.
    * ``sliding_window`` with ``sliding_layers`` = how many of the layers are windowed/local
      (Gemma 2: half, Gemma 3: 5 of 6, gpt-oss: half); the rest are global.
    * ``num_experts``/``num_experts_per_tok`` (MoE routed experts) are optional; they let batched
      decode account for a batch touching more experts than one token does.
    """

    id: str
    params_b: float
    active_params_b: float
    num_hidden_layers: int | None = None
    hidden_size: int | None = None
    num_attention_heads: int | None = None
    num_key_value_heads: int | None = None
    head_dim: int | None = None
    attention: str = "gqa"
    kv_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    sliding_window: int | None = None
    sliding_layers: int = 0
    max_position_embeddings: int | None = None
    vocab_size: int | None = None
    family: str | None = None
    hf_repo: str | None = None
    num_experts: int | None = None
    num_experts_per_tok: int | None = None

    def expert_split(self) -> tuple[float, float] | None:
        """``(routed expert parameters in all, routed expert parameters per token)``, in
        billions, from the totals and the expert counts: an expert holds
        ``(params − active) / (E − k)``; None for a dense model or unknown counts (or totals that
        leave no room for the non-expert tensors)."""
        experts, per_tok = self.num_experts, self.num_experts_per_tok
        if not experts or not per_tok or experts <= per_tok or self.params_b <= self.active_params_b:
            return None
        expert = (self.params_b - self.active_params_b) / (experts - per_tok)
        if per_tok * expert > self.active_params_b:
            return None
        return experts * expert, per_tok * expert

    @property
    def is_moe(self) -> bool:
        """True when fewer parameters are used per token than exist (mixture of experts)."""
        # 1% tolerance: dense rows sometimes round the two counts differently.
        return self.active_params_b < self.params_b * 0.99 or (self.num_experts is not None and self.num_experts > 1)

    @property
    def effective_head_dim(self) -> int | None:
        """Explicit ``head_dim``, else ``hidden_size / num_attention_heads`` (DESIGN §1)."""
        if self.head_dim is not None:
            return self.head_dim
        if self.hidden_size and self.num_attention_heads:
            return self.hidden_size // self.num_attention_heads
        return None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class QuantSpec:
    """A weight format. ``bits_per_weight`` is the effective storage cost including scales.

    ``family``: ``float``, ``int``, ``gguf``, ``mx``, ``nv`` (quantization.csv).

    ``dense_bits_per_weight``: for a format that quantizes only a mixture-of-experts model's
    routed expert tensors, what the other tensors (attention, router, shared layers, embeddings)
    are stored at: 8.5 for llama.cpp's ``MXFP4_MOE`` file type (the other tensors Q8_0), the
    declared type's width for a GGUF lighter than its type (gpt-oss "F16": MXFP4 experts). None:
    every tensor at ``bits_per_weight``.
    It applies to MoE models whose expert counts are known; a dense model is stored uniformly.
    """

    id: str
    name: str
    bits_per_weight: float
    family: str
    dense_bits_per_weight: float | None = None

    @property
    def native_compute(self) -> str:
        """The dtype the matmuls *could* run in on hardware with matching tensor units.

        FP8 checkpoints (W8A8 or weight-only FP8 in vLLM/TRT-LLM) use the fp8 tensor rate; INT8
        W8A8 (SmoothQuant) the int8 rate; F32 the fp32 rate. Weight-only formats (AWQ/GPTQ int4,
        every GGUF type, MXFP4/NVFP4 as served by today's mainstream kernels) dequantise to 16 bits,
        so prefill runs at the 16-bit rate. GGUF is fp16 (ggml's compute type), the rest bf16.
        """
        if self.family == "float" and self.bits_per_weight >= 24:
            return "fp32"
        if self.family == "float" and self.bits_per_weight <= 8:
            return "fp8"
        if self.family == "int" and self.bits_per_weight >= 8:
            return "int8"
        if self.family == "gguf":
            return "fp16"
        return "bf16"

    def compute_dtype(self, hardware: HardwareSpec) -> str:
        """The dtype prefill actually runs in on ``hardware``: :attr:`native_compute` when the
        device has the 8-bit units for it, else 16 bits."""
        native = self.native_compute
        if native in ("fp8", "int8") and not hardware.has_native(native):
            return "bf16"
        return native

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


Bound = Literal["bandwidth", "compute"]


@dataclass(frozen=True, slots=True)
class Roofline:
    """Everything the physics says about one setup and workload (the bundle rules read).

    Ceilings are upper bounds at 100 % of spec-sheet bandwidth and compute; ``None`` means "cannot
    be computed from what is known" (e.g. an inline model without its shape has no KV figures).

    * ``weight_bytes``: resident weights (all parameters). ``active_weight_bytes``: weights read
      per decoded token (active parameters).
    * ``context_tokens`` = kv_depth + prompt + output: the longest context a sequence reaches;
      KV capacity is sized for it. ``decode_context_tokens`` = kv_depth + prompt + output/2: the
      mean context over the decode, which the decode ceilings use.
    * ``decode_ceiling_tok_s``: one stream alone (batch 1). ``decode_ceiling_batch_tok_s``: per
      stream with ``concurrency`` streams decoding together; ``decode_aggregate_ceiling_tok_s`` =
      that × concurrency. ``decode_bound`` is the binding resource at ``concurrency``;
      ``crossover_batch`` the batch where decode turns compute-bound (None if never).
    * ``prefill_ceiling_tok_s``: prompt tokens per second for this prompt (linear + quadratic
      attention FLOPs), floored by one read of the weights: ``prefill_bound`` is "compute" for any
      realistic prompt and "bandwidth" only for prompts too short to amortise that read;
      ``ttft_floor_ms`` = prompt / that (None without a prompt).
    * ``itl_floor_ms`` = 1000 / decode_ceiling_batch_tok_s.
    * ``kv_pool_tokens``: tokens the KV pool holds (counting every layer at full per-token cost);
      ``max_concurrent_sequences``: sequences of ``context_tokens`` that fit (sliding windows
      capped).
    """

    weight_bytes: float
    active_weight_bytes: float
    kv_bytes_per_token: float | None
    kv_bytes_at_context: float | None
    decode_ceiling_tok_s: float
    decode_ceiling_batch_tok_s: float
    decode_aggregate_ceiling_tok_s: float
    decode_bound: Bound
    crossover_batch: float | None
    prefill_ceiling_tok_s: float | None
    prefill_dtype: str
    prefill_tflops: float | None
    prefill_tflops_estimated: bool
    prefill_bound: Literal["compute", "bandwidth"]
    prefill_flops: float | None
    ttft_floor_ms: float | None
    itl_floor_ms: float
    kv_pool_tokens: int | None
    max_concurrent_sequences: int | None
    fits_in_memory: bool | None
    mem_bandwidth_gb_s: float
    memory_bytes: float | None
    context_tokens: int
    decode_context_tokens: float
    prompt_tokens: int | None
    output_tokens: int | None
    kv_depth_tokens: int
    concurrency: int
    tensor_parallel: int
    kv_cache_dtype: str
    gpu_memory_utilization: float
    #: The attention (quadratic) part of ``prefill_flops``; the rest is the matmuls
    #: (``2 × active_params × prompt``). None without a prompt.
    prefill_attention_flops: float | None = None
    #: KV bytes one stream reads per decode step at ``decode_context_tokens`` (sliding windows
    #: capped); None when the model's shape is unknown.
    decode_kv_bytes_per_sequence: float | None = None

    @property
    def prefill_attention_share(self) -> float | None:
        """``prefill_attention_flops / prefill_flops``: how much of the prefill is attention
        (grows with KV depth and prompt length); None without a prompt."""
        if self.prefill_attention_flops is None or not self.prefill_flops:
            return None
        return self.prefill_attention_flops / self.prefill_flops

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
