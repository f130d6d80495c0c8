"""The fitted model's features: what a setup and workload look like to the regression.

Every feature comes from the physics bundle (:class:`advisor.physics.Roofline`) plus the runtime
and, when the caller has them, the hardware, model and quantization specs. Without those specs the
features that need them (vendor, bits per weight, quantization family, parameters, attention) are
missing, which the estimators handle (missing categories and NaNs), so a caller that knows only
the roofline still gets an answer.

The columns hold *physical* quantities (logs of sizes and rates, shares, flags); encoding,
imputation and scaling live in the scikit-learn Pipeline (:mod:`advisor.ml.pipeline`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from advisor.physics import HardwareSpec, ModelSpec, QuantSpec, Roofline

__all__ = [
    "CATEGORICAL",
    "FEATURES",
    "NUMERIC",
    "QUANT_KERNELS",
    "TREE_NEUTRAL",
    "FeatureInput",
    "feature_frame",
    "feature_row",
    "hardware_family",
    "neutral_columns",
    "quant_kernel",
    "runtime_family",
    "tree_frame",
    "tree_rows",
]

#: Categorical columns (strings; None = missing).
CATEGORICAL: tuple[str, ...] = (
    "runtime",
    "runtime_family",
    "hardware_kind",
    "vendor",
    "quant_family",
    "attention",
)
#: Numeric columns (floats; NaN = missing).
NUMERIC: tuple[str, ...] = (
    "bits_per_weight",
    "log_active_params_b",
    "moe",
    "log_prompt_tokens",
    "log_kv_depth_tokens",
    "log_context_tokens",
    "log_concurrency",
    "tensor_parallel",
    "log_bandwidth_gb_s",
    "log_tflops",
    "tflops_estimated",
    "log_weight_gb",
    "kv_read_share",
    "log_decode_ceiling",
    "decode_compute_bound",
    # Last, so the column positions of artifacts fitted before them are unchanged.
    "prefill_attention_share",
    "log_layers",
    "quant_kernel",
    "log_issue_rate",
)
FEATURES: tuple[str, ...] = CATEGORICAL + NUMERIC

#: Columns a head's trees see as a constant (nothing to split on), per target. Decode is bound by
#: bandwidth; compute enters it only through ``log_decode_ceiling`` and ``decode_compute_bound``.
#: A compute figure otherwise acts as a fingerprint of the device that does not carry to others:
#: with the catalog's vendor figures for Apple GPUs the decode trees split on it and
#: leave-one-source-out decode error rose from 14 % to 16 % (docs/model.md).
#: ``log_issue_rate`` is the decode base's alone (its issue-rate cap), for every head's trees.
#: Prefill is bound by compute: the decode's bytes per token, its ceiling, its KV share and its
#: bound describe another phase, and to the prefill trees they were a fingerprint of the training
#: sources' models (with them, prefill by held-out source 23.9 %, without 23.6 %; by device 19.9
#: → 18.2 %; docs/model.md, "Session 8").
_BASE_ONLY: tuple[str, ...] = ("log_issue_rate",)
TREE_NEUTRAL: dict[str, tuple[str, ...]] = {
    "decode_tok_s": ("log_tflops", "tflops_estimated", "log_layers", "quant_kernel", *_BASE_ONLY),
    "prefill_tok_s": (
        "log_layers",
        "quant_kernel",
        "log_weight_gb",
        "log_decode_ceiling",
        "kv_read_share",
        "decode_compute_bound",
        *_BASE_ONLY,
    ),
}
_NEUTRAL_INDEX = {target: tuple(FEATURES.index(c) for c in cols) for target, cols in TREE_NEUTRAL.items()}
_BASE_ONLY_INDEX = tuple(FEATURES.index(c) for c in _BASE_ONLY)

#: Runtime → engine family. The family lets what is learnt about one continuous-batching server
#: carry to another with few runs of its own (TGI has no public rows at all).
_FAMILY: dict[str, str] = {
    "vllm": "server",
    "sglang": "server",
    "tgi": "server",
    "trtllm": "server",
    "llamacpp": "llamacpp",
    "ollama": "llamacpp",
    "mlx": "mlx",
}


#: How a weight format is turned back into 16-bit values inside the decode matmul, from the
#: cheapest to the costliest per weight (the codes of the ``quant_kernel`` column):
#: ``float`` (nothing to unpack: F16/BF16, FP8 on FP8 units), ``affine`` (one scale, maybe a
#: minimum, per small group: GGUF Q4_0…Q8_0, MLX n-bit, AWQ/GPTQ), ``k`` (GGUF k-quants:
#: 6-bit sub-block scales inside 256-weight super-blocks), ``lookup`` (GGUF i-quants: lattice
#: codebooks and non-linear tables, IQ2_XXS…IQ4_NL), ``microscaled`` (MXFP4/NVFP4: E2M1 values
#: through a table, a shared exponent per 32 or 16). The decode base gives each its own
#: unpacking cost per weight (:mod:`advisor.ml.base`): ggml's CPU and Metal i-quant kernels
#: decode a codebook index per few weights, its k-quant kernels unpack the sub-block scales
#: first (ggml-quants.c), so on hardware with little compute per byte they run well below the
#: bandwidth the bits alone would allow.
QUANT_KERNELS: tuple[str, ...] = ("float", "affine", "k", "lookup", "microscaled")
_K_QUANT = re.compile(r"(?:^|[^a-z])q\d_k(?:$|[^a-z0-9])")
_I_QUANT = re.compile(r"(?:^|[^a-z])iq\d")
_AFFINE = re.compile(r"(?:^|[^a-z])q\d_[01](?:$|[^0-9])")


def quant_kernel(quant: QuantSpec | None) -> int | None:
    """The :data:`QUANT_KERNELS` code of a weight format (None when unknown), from its family
    and its GGUF type name (``Q4_K_M``, ``gguf-iq2_xxs``, ``GGUF Q4_0``)."""
    if quant is None:
        return None
    family = quant.family.strip().lower()
    if family == "float":
        return 0
    if family in ("mx", "nv"):
        return 4
    if family in ("int", "custom"):
        return 1
    text = f"{quant.id} {quant.name}".lower()
    if _I_QUANT.search(text):
        return 3
    if _K_QUANT.search(text):
        return 2
    if _AFFINE.search(text):
        return 1
    return None


def runtime_family(runtime: str | None) -> str | None:
    """``server``, ``llamacpp`` or ``mlx`` for a canonical runtime; None for others/unknown."""
    if runtime is None:
        return None
    return _FAMILY.get(runtime.strip().lower())


@dataclass(frozen=True, slots=True)
class FeatureInput:
    """What one prediction is about: the roofline plus whatever the caller knows."""

    roofline: Roofline
    runtime: str | None
    hardware_kind: str | None
    hardware: HardwareSpec | None = None
    model: ModelSpec | None = None
    quant: QuantSpec | None = None


def _log(value: float | None) -> float:
    return math.log(value) if value is not None and value > 0 else math.nan


def _log1p(value: float | None) -> float:
    return math.log1p(value) if value is not None and value >= 0 else math.nan


def _share(value: float | None) -> float:
    # Without a prompt the prefill ceiling is the long-prompt asymptote of the matmul term alone
    # (advisor.physics.analyse): no attention in it.
    return value if value is not None and math.isfinite(value) else 0.0


def feature_row(item: FeatureInput) -> tuple[object, ...]:
    """One row of :data:`FEATURES` (categoricals as str/None, numerics as float/NaN).

    * ``log_context_tokens``: log(1 + mean context over the decode) = depth + prompt + output/2.
    * ``log_bandwidth_gb_s``/``log_tflops``: per device (the roofline scales them by TP);
      ``tflops_estimated`` says the compute figure is the physics' stand-in (no datasheet value).
    * ``log_weight_gb``: weights read per decoded token (active parameters × bits).
    * ``kv_read_share``: the share of bytes a batch-1 decode step reads that is KV cache.
    * ``log_decode_ceiling``: the per-stream ceiling itself; a fixed per-token cost weighs more as
      the ceiling rises (small models on fast GPUs reach a smaller share of it).
    * ``prefill_attention_share``: the attention part of the prefill FLOPs
      (:attr:`advisor.physics.Roofline.prefill_attention_share`), which grows with KV depth and
      prompt length; the prefill base gives it its own efficiency (:mod:`advisor.ml.base`); 0
      without a prompt (the ceiling is then the matmul asymptote).
    * ``log_layers``: log of the model's transformer layers (NaN when the spec lacks it). A
      llama.cpp decode step launches the same kernels once per layer, so its fixed cost grows
      with the depth of the model, not with its size (the decode base, :mod:`advisor.ml.base`;
      an engine that pipelines the host's work behind the device's pays its overhead per step,
      ``PER_STEP_FAMILIES``).
    * ``quant_kernel``: the :data:`QUANT_KERNELS` code of the weight format (NaN when unknown).
    * ``log_issue_rate``: ``log(SMs × boost clock in GHz)`` of an NVIDIA GPU (NaN otherwise or
      without both figures): the decode base's issue-rate cap (:mod:`advisor.ml.base`); no
      head's trees see it (:data:`TREE_NEUTRAL`).
    """
    roof = item.roofline
    tp = max(roof.tensor_parallel, 1)
    runtime = item.runtime.strip().lower() if item.runtime else None
    kv_share = math.nan
    kv = roof.decode_kv_bytes_per_sequence
    if roof.kv_bytes_per_token is not None and kv is not None:
        # Bytes, not time: the same share whether the step is bandwidth- or compute-bound (a
        # share that went missing when more bandwidth made a step compute-bound let the trees
        # predict less decode for more bandwidth).
        kv_share = min(max(kv / (roof.active_weight_bytes + kv), 0.0), 1.0) if kv > 0 else 0.0
    model, quant, hw = item.model, item.quant, item.hardware
    return (
        runtime,
        runtime_family(runtime),
        item.hardware_kind or (hw.kind if hw is not None else None),
        hw.vendor.strip().lower() if hw is not None and hw.vendor else None,
        quant.family if quant is not None else None,
        model.attention if model is not None else None,
        quant.bits_per_weight if quant is not None else math.nan,
        _log(model.active_params_b) if model is not None else math.nan,
        float(model.is_moe) if model is not None else math.nan,
        _log1p(roof.prompt_tokens) if roof.prompt_tokens is not None else math.nan,
        _log1p(roof.kv_depth_tokens),
        _log1p(roof.decode_context_tokens),
        _log(roof.concurrency),
        float(tp),
        _log(roof.mem_bandwidth_gb_s / tp),
        _log(roof.prefill_tflops / tp) if roof.prefill_tflops is not None else math.nan,
        float(roof.prefill_tflops_estimated),
        _log(roof.active_weight_bytes / 1e9),
        kv_share,
        _log(roof.decode_ceiling_batch_tok_s),
        float(roof.decode_bound == "compute"),
        _share(roof.prefill_attention_share),
        _log(model.num_hidden_layers) if model is not None and model.num_hidden_layers else math.nan,
        float(kernel) if (kernel := quant_kernel(quant)) is not None else math.nan,
        _issue_rate(hw),
    )


def _issue_rate(hw: HardwareSpec | None) -> float:
    """``log(SMs × boost clock in GHz)``: an NVIDIA GPU's SM-cycles per ns, i.e. the GB/s it
    moves at one byte per SM per cycle (NaN without both figures or for another vendor)."""
    if hw is None or hw.sm_count is None or hw.boost_clock_mhz is None:
        return math.nan
    if (hw.vendor or "").strip().lower() != "nvidia" or hw.kind != "gpu":
        return math.nan
    return _log(hw.sm_count * hw.boost_clock_mhz / 1000.0)


def hardware_family(kind: object, vendor: object) -> str:
    """``gpu/nvidia``, ``apple_soc/apple``, ``gpu/amd``: a hardware kind and vendor (as
    :func:`feature_row` spells them; ``?`` when missing). What leave-one-family-out CV holds out
    and what a head's fallback checks (:class:`advisor.ml.model.Fallback`)."""
    return f"{kind if isinstance(kind, str) else '?'}/{vendor if isinstance(vendor, str) else '?'}"


def tree_frame(target: str, frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` as ``target``'s trees see it (:data:`TREE_NEUTRAL` columns set to 0)."""
    neutral = TREE_NEUTRAL.get(target, _BASE_ONLY)
    return frame.assign(**dict.fromkeys(neutral, 0.0))


def neutral_columns(target: str) -> tuple[int, ...]:
    """The positions in :data:`FEATURES` of ``target``'s :data:`TREE_NEUTRAL` columns."""
    return _NEUTRAL_INDEX.get(target, _BASE_ONLY_INDEX)


def tree_rows(target: str, rows: Sequence[tuple[object, ...]]) -> list[tuple[object, ...]]:
    """Feature rows as ``target``'s trees see them (the same as :func:`tree_frame`)."""
    index = neutral_columns(target)
    out = []
    for row in rows:
        values = list(row)
        for i in index:
            values[i] = 0.0
        out.append(tuple(values))
    return out


def feature_frame(items: Iterable[FeatureInput] | Sequence[tuple[object, ...]]) -> pd.DataFrame:
    """A DataFrame of :data:`FEATURES` from inputs (or from rows already built)."""
    rows = [feature_row(i) if isinstance(i, FeatureInput) else i for i in items]
    frame = pd.DataFrame.from_records(rows, columns=list(FEATURES))
    for name in CATEGORICAL:
        frame[name] = frame[name].astype(object).where(frame[name].notna(), None)
    for name in NUMERIC:
        frame[name] = frame[name].astype(np.float64)
    return frame
