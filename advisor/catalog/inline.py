"""Inline spec objects: hardware, model and quantization given as JSON objects instead of names.

DESIGN §4: ``hardware``, ``model`` and ``quantization`` accept an inline object. Partial objects
are fine (what cannot be computed stays None); an invalid one raises :class:`InvalidInput`
naming the failing field under ``field_prefix`` (e.g. ``setup.hardware.mem_bandwidth_gb_s``).

A model object that looks like a Hugging Face ``config.json`` (it has ``architectures`` or
``model_type``) is read as one: see :func:`model_from_hf_config`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from advisor.errors import InvalidInput
from advisor.physics import HardwareSpec, ModelSpec, QuantSpec

__all__ = [
    "HARDWARE_KINDS",
    "hardware_from_dict",
    "is_hf_config",
    "model_from_dict",
    "model_from_hf_config",
    "quant_from_dict",
]

HARDWARE_KINDS = ("gpu", "cpu", "apple_soc", "accelerator")

# Catalog CSV column names are accepted as synonyms so rows round-trip.
_HW_SYNONYMS = {
    "fp16_dense_tflops": "fp16_tflops",
    "bf16_dense_tflops": "bf16_tflops",
    "fp8_dense_tflops": "fp8_tflops",
    "int8_dense_tops": "int8_tops",
}
_HW_NUMBERS = ("mem_bandwidth_gb_s", "memory_gb", "fp16_tflops", "bf16_tflops", "fp8_tflops", "int8_tops")
_HW_TEXT = ("id", "name", "kind", "vendor")
_HW_IGNORED = frozenset({"tdp_w", "interconnect", "source", "notes", "aliases", "description"})

_MODEL_INTS = (
    "num_hidden_layers",
    "hidden_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "kv_lora_rank",
    "qk_rope_head_dim",
    "sliding_window",
    "sliding_layers",
    "max_position_embeddings",
    "vocab_size",
    "num_experts",
    "num_experts_per_tok",
)
_MODEL_TEXT = ("id", "name", "family", "hf_repo", "attention")
_MODEL_IGNORED = frozenset({"source", "notes", "aliases", "kv_bytes_per_token_fp16", "description"})
_ATTENTION = ("mha", "gqa", "mqa", "mla", "sliding+global", "sliding")

_QUANT_IGNORED = frozenset({"notes", "source", "aliases", "description"})
_QUANT_FAMILIES = ("float", "int", "gguf", "mx", "nv", "custom")


def _path(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _number(data: Mapping[str, Any], key: str, prefix: str, *, positive: bool = False) -> float | None:
    value = data.get(key)
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InvalidInput(f"must be a number, got {value!r}", field=_path(prefix, key))
    try:
        number = float(value)
    except ValueError:
        raise InvalidInput(f"must be a number, got {value!r}", field=_path(prefix, key)) from None
    if not math.isfinite(number) or number < 0 or (positive and number == 0):
        raise InvalidInput(
            f"must be a {'positive' if positive else 'non-negative'} finite number, got {value!r}",
            field=_path(prefix, key),
        )
    return number


def _integer(data: Mapping[str, Any], key: str, prefix: str) -> int | None:
    number = _number(data, key, prefix)
    if number is None:
        return None
    if number != int(number):
        raise InvalidInput(f"must be a whole number, got {data[key]!r}", field=_path(prefix, key))
    return int(number)


def _text(data: Mapping[str, Any], key: str, prefix: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"must be a string, got {value!r}", field=_path(prefix, key))
    return value.strip() or None


def _reject_unknown(data: Mapping[str, Any], known: set[str], prefix: str, what: str) -> None:
    unknown = sorted(k for k in data if k not in known)
    if unknown:
        raise InvalidInput(
            f"unknown {what} field {unknown[0]!r}; expected some of {', '.join(sorted(known))}",
            field=_path(prefix, unknown[0]),
        )


def hardware_from_dict(data: Mapping[str, Any], *, field_prefix: str = "hardware") -> HardwareSpec:
    """An inline device: ``{"name", "mem_bandwidth_gb_s", "fp16_tflops", "memory_gb", "kind",
    "vendor", ...}``. ``mem_bandwidth_gb_s`` is required and must be positive; ``kind`` defaults
    to ``gpu``."""
    fields = {_HW_SYNONYMS.get(k, k): v for k, v in data.items()}
    _reject_unknown(fields, {*_HW_NUMBERS, *_HW_TEXT, *_HW_IGNORED}, field_prefix, "hardware")
    bandwidth = _number(fields, "mem_bandwidth_gb_s", field_prefix, positive=True)
    if bandwidth is None:
        raise InvalidInput(
            "is required: decode speed is set by memory bandwidth (GB/s)",
            field=_path(field_prefix, "mem_bandwidth_gb_s"),
        )
    kind = _text(fields, "kind", field_prefix) or "gpu"
    if kind not in HARDWARE_KINDS:
        raise InvalidInput(
            f"must be one of {', '.join(HARDWARE_KINDS)}, got {kind!r}", field=_path(field_prefix, "kind")
        )
    name = _text(fields, "name", field_prefix) or f"custom {kind} ({bandwidth:g} GB/s)"
    return HardwareSpec(
        id=_text(fields, "id", field_prefix) or "inline",
        name=name,
        kind=kind,
        vendor=_text(fields, "vendor", field_prefix) or "custom",
        mem_bandwidth_gb_s=bandwidth,
        memory_gb=_number(fields, "memory_gb", field_prefix, positive=True),
        fp16_tflops=_number(fields, "fp16_tflops", field_prefix, positive=True),
        bf16_tflops=_number(fields, "bf16_tflops", field_prefix, positive=True),
        fp8_tflops=_number(fields, "fp8_tflops", field_prefix, positive=True),
        int8_tops=_number(fields, "int8_tops", field_prefix, positive=True),
    )


def quant_from_dict(data: Mapping[str, Any], *, field_prefix: str = "quantization") -> QuantSpec:
    """An inline weight format: ``{"bits_per_weight": 4.5}`` plus optional ``id``, ``name`` and
    ``family``. Without a family, 16+ bits is ``float`` and anything else ``custom`` (treated as
    weight-only: prefill computes in 16 bits)."""
    _reject_unknown(data, {"id", "name", "bits_per_weight", "family", *_QUANT_IGNORED}, field_prefix, "quantization")
    bits = _number(data, "bits_per_weight", field_prefix, positive=True)
    if bits is None:
        raise InvalidInput("is required", field=_path(field_prefix, "bits_per_weight"))
    if bits > 64:
        raise InvalidInput(f"must be at most 64, got {bits:g}", field=_path(field_prefix, "bits_per_weight"))
    family = _text(data, "family", field_prefix) or ("float" if bits >= 16 else "custom")
    if family not in _QUANT_FAMILIES:
        raise InvalidInput(
            f"must be one of {', '.join(_QUANT_FAMILIES)}, got {family!r}",
            field=_path(field_prefix, "family"),
        )
    return QuantSpec(
        id=_text(data, "id", field_prefix) or "inline",
        name=_text(data, "name", field_prefix) or f"{bits:g} bits per weight",
        bits_per_weight=bits,
        family=family,
    )


def is_hf_config(data: Mapping[str, Any]) -> bool:
    """A Hugging Face ``config.json`` body (rather than an advisor inline model)."""
    return "architectures" in data or "model_type" in data


def model_from_dict(data: Mapping[str, Any], *, field_prefix: str = "model") -> ModelSpec:
    """An inline model: ``{"params_b", "active_params_b", "num_hidden_layers",
    "num_key_value_heads", "head_dim", ...}`` or a Hugging Face ``config.json`` body.

    ``params_b`` is required unless the shape (layers, hidden size, intermediate size, vocab) lets
    it be computed; ``active_params_b`` defaults to ``params_b`` (dense).
    """
    if is_hf_config(data):
        return model_from_hf_config(data, field_prefix=field_prefix)
    known = {"params_b", "active_params_b", "intermediate_size", *_MODEL_INTS, *_MODEL_TEXT, *_MODEL_IGNORED}
    _reject_unknown(data, known, field_prefix, "model")
    ints = {key: _integer(data, key, field_prefix) for key in _MODEL_INTS}
    for key in ("num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim"):
        if ints[key] == 0:
            raise InvalidInput("must be positive", field=_path(field_prefix, key))
    params = _number(data, "params_b", field_prefix, positive=True)
    if params is None:
        intermediate = _integer(data, "intermediate_size", field_prefix)
        estimate = _dense_param_count(
            layers=ints["num_hidden_layers"],
            hidden=ints["hidden_size"],
            heads=ints["num_attention_heads"],
            kv_heads=ints["num_key_value_heads"],
            head_dim=ints["head_dim"],
            intermediate=intermediate,
            vocab=ints["vocab_size"],
            tied=False,
        )
        if estimate is None:
            raise InvalidInput(
                "is required (or give num_hidden_layers, hidden_size, intermediate_size and vocab_size)",
                field=_path(field_prefix, "params_b"),
            )
        params = estimate / 1e9
    active = _number(data, "active_params_b", field_prefix, positive=True) or params
    if active > params * 1.0001:
        raise InvalidInput(
            f"must not exceed params_b ({params:g}), got {active:g}",
            field=_path(field_prefix, "active_params_b"),
        )
    attention = _text(data, "attention", field_prefix)
    if attention is not None and attention not in _ATTENTION:
        raise InvalidInput(
            f"must be one of {', '.join(_ATTENTION)}, got {attention!r}",
            field=_path(field_prefix, "attention"),
        )
    if attention is None:
        attention = _infer_attention(ints)
    layers = ints["num_hidden_layers"]
    sliding_layers = ints["sliding_layers"]
    if sliding_layers is None:
        # A window with no layer count means every layer is windowed (Mistral v0.1 style).
        sliding_layers = layers if ints["sliding_window"] and layers else 0
    if layers is not None and sliding_layers > layers:
        raise InvalidInput(f"must not exceed num_hidden_layers ({layers})", field=_path(field_prefix, "sliding_layers"))
    return ModelSpec(
        id=_text(data, "id", field_prefix) or _text(data, "name", field_prefix) or "inline",
        params_b=params,
        active_params_b=active,
        num_hidden_layers=layers,
        hidden_size=ints["hidden_size"],
        num_attention_heads=ints["num_attention_heads"],
        num_key_value_heads=ints["num_key_value_heads"],
        head_dim=ints["head_dim"],
        attention=attention,
        kv_lora_rank=ints["kv_lora_rank"],
        qk_rope_head_dim=ints["qk_rope_head_dim"],
        sliding_window=ints["sliding_window"],
        sliding_layers=sliding_layers,
        max_position_embeddings=ints["max_position_embeddings"],
        vocab_size=ints["vocab_size"],
        family=_text(data, "family", field_prefix),
        hf_repo=_text(data, "hf_repo", field_prefix),
        num_experts=ints["num_experts"],
        num_experts_per_tok=ints["num_experts_per_tok"],
    )


def _infer_attention(ints: Mapping[str, int | None]) -> str:
    if ints.get("kv_lora_rank"):
        return "mla"
    if ints.get("sliding_window"):
        return "sliding+global"
    heads, kv_heads = ints.get("num_attention_heads"), ints.get("num_key_value_heads")
    if heads and kv_heads:
        if kv_heads == 1:
            return "mqa"
        if kv_heads == heads:
            return "mha"
    return "gqa"


def _dense_param_count(
    *,
    layers: int | None,
    hidden: int | None,
    heads: int | None,
    kv_heads: int | None,
    head_dim: int | None,
    intermediate: int | None,
    vocab: int | None,
    tied: bool,
) -> float | None:
    """Parameters of a dense decoder: embeddings (+ untied head) + per layer q/k/v/o projections
    and a gated MLP (3 × hidden × intermediate). Norms and biases are ignored (< 0.1 %)."""
    if not (layers and hidden and intermediate and vocab):
        return None
    heads = heads or max(hidden // (head_dim or 128), 1)
    head_dim = head_dim or hidden // heads
    kv_heads = kv_heads or heads
    attention = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2
    mlp = 3 * hidden * intermediate
    embeddings = vocab * hidden * (1 if tied else 2)
    return float(embeddings + layers * (attention + mlp))


def _first(config: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        value = config.get(key)
        if value is not None:
            return value
    return None


def _int_or_none(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def model_from_hf_config(config: Mapping[str, Any], *, field_prefix: str = "model") -> ModelSpec:
    """A :class:`ModelSpec` from a Hugging Face ``config.json`` body.

    * Multimodal repos: the language model's fields are read from ``text_config``.
    * ``head_dim`` when explicit, else ``hidden_size / num_attention_heads``; KV heads default to
      the attention heads (MHA) or 1 with ``multi_query``.
    * MLA (DeepSeek-V2/V3): ``kv_lora_rank`` + ``qk_rope_head_dim``; head_dim = qk_nope + qk_rope.
    * Sliding windows: ``layer_types`` (count of ``sliding_attention``), else
      ``sliding_window_pattern`` (every N-th layer global), else Gemma 2's alternation, else a
      window on every layer (Mistral v0.1). ``use_sliding_window: false`` (Qwen2) or a window at
      least as long as the context means no window. Llama 4's ``attention_chunk_size`` counts as a
      window on 3 of every 4 layers.
    * MoE: experts from ``num_local_experts``/``num_experts``/``n_routed_experts``, per-token from
      ``num_experts_per_tok``/``experts_per_token``, expert width ``moe_intermediate_size`` (else
      ``intermediate_size``), shared experts ``n_shared_experts``/``shared_expert_intermediate_size``,
      dense leading layers ``first_k_dense_replace``, interleaving ``interleave_moe_layer_step``.
    * Parameter counts are computed from the shapes (gated MLPs; norms and biases ignored) unless
      the body carries ``params_b``/``num_parameters``.
    """
    top = dict(config)
    text = config.get("text_config")
    if isinstance(text, Mapping) and text.get("num_hidden_layers") is not None:
        merged = {k: v for k, v in top.items() if k != "text_config"}
        merged.update(text)
        cfg: dict[str, Any] = merged
    else:
        cfg = top
    model_type = str(cfg.get("model_type") or top.get("model_type") or "").lower()

    layers = _int_or_none(_first(cfg, "num_hidden_layers", "n_layer", "num_layers", "n_layers"))
    hidden = _int_or_none(_first(cfg, "hidden_size", "n_embd", "d_model", "dim"))
    heads = _int_or_none(_first(cfg, "num_attention_heads", "n_head", "n_heads"))
    kv_heads = _int_or_none(_first(cfg, "num_key_value_heads", "num_kv_heads", "n_kv_heads"))
    if kv_heads is None and cfg.get("multi_query"):
        kv_heads = 1
    if kv_heads is None:
        kv_heads = heads
    vocab = _int_or_none(cfg.get("vocab_size"))
    intermediate = _int_or_none(_first(cfg, "intermediate_size", "ffn_dim", "n_inner"))
    tied = bool(cfg.get("tie_word_embeddings", top.get("tie_word_embeddings", False)))

    kv_lora = _int_or_none(cfg.get("kv_lora_rank"))
    rope_dim = _int_or_none(cfg.get("qk_rope_head_dim"))
    nope_dim = _int_or_none(cfg.get("qk_nope_head_dim"))
    v_head_dim = _int_or_none(cfg.get("v_head_dim"))
    head_dim = _int_or_none(cfg.get("head_dim"))
    if kv_lora and head_dim is None and nope_dim is not None:
        head_dim = nope_dim + (rope_dim or 0)
    if head_dim is None and hidden and heads:
        head_dim = hidden // heads

    max_pos = _int_or_none(_first(cfg, "max_position_embeddings", "n_positions", "max_seq_len"))
    window, local = _sliding(cfg, model_type, layers, max_pos)

    experts = _int_or_none(_first(cfg, "num_local_experts", "num_experts", "n_routed_experts"))
    per_tok = _int_or_none(_first(cfg, "num_experts_per_tok", "experts_per_token", "moe_topk"))
    if experts is not None and experts <= 1:
        experts = None

    for key, value in (
        ("num_hidden_layers", layers),
        ("hidden_size", hidden),
        ("num_attention_heads", heads),
    ):
        if value is not None and value <= 0:
            raise InvalidInput("must be positive", field=_path(field_prefix, key))

    params, active = _hf_param_counts(
        cfg,
        layers=layers,
        hidden=hidden,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate=intermediate,
        vocab=vocab,
        tied=tied,
        experts=experts,
        per_tok=per_tok,
        mla=(kv_lora, rope_dim, nope_dim, v_head_dim),
    )
    given = _first(top, "params_b")
    if given is not None:
        params = _number(top, "params_b", field_prefix, positive=True)
        active = _number(top, "active_params_b", field_prefix, positive=True) or params
    elif top.get("num_parameters") is not None:
        total = _number(top, "num_parameters", field_prefix, positive=True)
        if total is not None and params:
            active = (active or params) * (total / 1e9) / params
        params = total / 1e9 if total is not None else params
    if params is None or active is None:
        raise InvalidInput(
            "config.json lacks the shape needed to count parameters "
            "(num_hidden_layers, hidden_size, intermediate_size, vocab_size); add params_b",
            field=_path(field_prefix, "params_b"),
        )

    # Llama 4's chunked layers are windowed for KV purposes, but the catalog (and Meta) call the
    # architecture GQA; keep the label consistent with models.csv.
    if kv_lora:
        attention = "mla"
    elif window and local and not model_type.startswith("llama4"):
        attention = "sliding+global"
    elif kv_heads == 1:
        attention = "mqa"
    elif kv_heads == heads:
        attention = "mha"
    else:
        attention = "gqa"
    name = _first(top, "_name_or_path", "name_or_path")
    return ModelSpec(
        id=str(name) if name else f"custom-{model_type or 'model'}",
        params_b=params,
        active_params_b=min(active, params),
        num_hidden_layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        attention=attention,
        kv_lora_rank=kv_lora,
        qk_rope_head_dim=rope_dim if kv_lora else None,
        sliding_window=window if local else None,
        sliding_layers=local,
        max_position_embeddings=max_pos,
        vocab_size=vocab,
        family=model_type or None,
        hf_repo=str(name) if name and "/" in str(name) else None,
        num_experts=experts,
        num_experts_per_tok=per_tok if experts else None,
    )


def _sliding(
    cfg: Mapping[str, Any], model_type: str, layers: int | None, max_pos: int | None
) -> tuple[int | None, int]:
    """``(window, local_layers)`` from a config (see :func:`model_from_hf_config`)."""
    chunk = _int_or_none(cfg.get("attention_chunk_size"))
    if chunk and model_type.startswith("llama4") and layers:
        step = _int_or_none(cfg.get("no_rope_layer_interval")) or 4
        return chunk, layers - layers // step
    window = _int_or_none(cfg.get("sliding_window"))
    if not window or cfg.get("use_sliding_window") is False or not layers:
        return None, 0
    if max_pos is not None and window >= max_pos:
        return None, 0
    layer_types = cfg.get("layer_types")
    if isinstance(layer_types, list) and layer_types:
        local = sum(1 for t in layer_types if isinstance(t, str) and "sliding" in t)
        return (window, local) if local else (None, 0)
    pattern = _int_or_none(cfg.get("sliding_window_pattern"))
    if pattern and pattern > 1:
        return window, layers - layers // pattern
    if model_type.startswith("gemma2"):
        return window, layers // 2
    if model_type.startswith(("phi3", "qwen")):
        # Phi-3 configs carry a window the runtimes ignore; Qwen2 gates it on use_sliding_window.
        return None, 0
    return window, layers


def _hf_param_counts(
    cfg: Mapping[str, Any],
    *,
    layers: int | None,
    hidden: int | None,
    heads: int | None,
    kv_heads: int | None,
    head_dim: int | None,
    intermediate: int | None,
    vocab: int | None,
    tied: bool,
    experts: int | None,
    per_tok: int | None,
    mla: tuple[int | None, int | None, int | None, int | None],
) -> tuple[float | None, float | None]:
    """``(params_b, active_params_b)`` computed from the shapes, or ``(None, None)``."""
    if not (layers and hidden and vocab and heads):
        return None, None
    kv_lora, rope_dim, nope_dim, v_head_dim = mla
    if kv_lora:
        q_lora = _int_or_none(cfg.get("q_lora_rank"))
        qk_dim = (nope_dim or 0) + (rope_dim or 0)
        v_dim = v_head_dim or nope_dim or 0
        q = hidden * q_lora + q_lora * heads * qk_dim if q_lora else hidden * heads * qk_dim
        kv = hidden * (kv_lora + (rope_dim or 0)) + kv_lora * heads * ((nope_dim or 0) + v_dim)
        attention = q + kv + heads * v_dim * hidden
    else:
        hd = head_dim or hidden // heads
        attention = hidden * heads * hd * 2 + hidden * (kv_heads or heads) * hd * 2
    embeddings = vocab * hidden * (1 if tied else 2)

    if not experts:
        if not intermediate:
            return None, None
        total = embeddings + layers * (attention + 3 * hidden * intermediate)
        return total / 1e9, total / 1e9

    expert_width = _int_or_none(cfg.get("moe_intermediate_size")) or intermediate
    if not expert_width:
        return None, None
    k = per_tok or 1
    shared_count = _int_or_none(cfg.get("n_shared_experts")) or 0
    shared_width = _int_or_none(cfg.get("shared_expert_intermediate_size")) or 0
    shared = 3 * hidden * (shared_count * expert_width + shared_width)
    if str(cfg.get("model_type") or "").startswith("llama4"):
        shared = 3 * hidden * expert_width  # one shared expert of the expert width on MoE layers
    expert = 3 * hidden * expert_width
    router = hidden * experts
    moe_total = experts * expert + shared + router
    moe_active = k * expert + shared + router

    dense_leading = _int_or_none(cfg.get("first_k_dense_replace")) or 0
    step = _int_or_none(_first(cfg, "interleave_moe_layer_step", "moe_layer_freq", "decoder_sparse_step")) or 1
    moe_layers = sum(1 for i in range(dense_leading, layers) if (i - dense_leading + 1) % step == 0)
    dense_layers = layers - moe_layers
    dense_width = _int_or_none(_first(cfg, "intermediate_size_mlp", "intermediate_size")) or expert_width
    dense_mlp = 3 * hidden * dense_width

    base = embeddings + layers * attention + dense_layers * dense_mlp
    total = base + moe_layers * moe_total
    active = base + moe_layers * moe_active
    return total / 1e9, active / 1e9
