"""Inline spec objects and Hugging Face config.json bodies.

The config bodies below reproduce the architecture keys of the public ``config.json`` files named
in each case (https://huggingface.co/<repo>/blob/main/config.json); their layer/head figures match
advisor/catalog/data/models.csv. Irrelevant keys (rope scaling, token ids, ...) are left out.
"""

from __future__ import annotations

from typing import Any

import pytest

from advisor.catalog import Catalog, hardware_from_dict, model_from_hf_config, quant_from_dict
from advisor.errors import InvalidInput
from advisor.physics import kv_bytes, kv_bytes_per_token

LLAMA_31_8B: dict[str, Any] = {  # meta-llama/Llama-3.1-8B-Instruct
    "_name_or_path": "meta-llama/Llama-3.1-8B-Instruct",
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "max_position_embeddings": 131072,
    "vocab_size": 128256,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}
MIXTRAL_8X7B: dict[str, Any] = {  # mistralai/Mixtral-8x7B-v0.1
    "architectures": ["MixtralForCausalLM"],
    "model_type": "mixtral",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
    "sliding_window": None,
    "max_position_embeddings": 32768,
    "vocab_size": 32000,
    "tie_word_embeddings": False,
}
QWEN3_30B_A3B: dict[str, Any] = {  # Qwen/Qwen3-30B-A3B
    "architectures": ["Qwen3MoeForCausalLM"],
    "model_type": "qwen3_moe",
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "moe_intermediate_size": 768,
    "num_hidden_layers": 48,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "decoder_sparse_step": 1,
    "sliding_window": None,
    "use_sliding_window": False,
    "max_position_embeddings": 40960,
    "vocab_size": 151936,
    "tie_word_embeddings": False,
}
DEEPSEEK_V3: dict[str, Any] = {  # deepseek-ai/DeepSeek-V3
    "architectures": ["DeepseekV3ForCausalLM"],
    "model_type": "deepseek_v3",
    "hidden_size": 7168,
    "intermediate_size": 18432,
    "moe_intermediate_size": 2048,
    "num_hidden_layers": 61,
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "n_routed_experts": 256,
    "n_shared_experts": 1,
    "num_experts_per_tok": 8,
    "first_k_dense_replace": 3,
    "moe_layer_freq": 1,
    "q_lora_rank": 1536,
    "kv_lora_rank": 512,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "v_head_dim": 128,
    "max_position_embeddings": 163840,
    "vocab_size": 129280,
    "tie_word_embeddings": False,
    "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]},
}
GEMMA_3_27B: dict[str, Any] = {  # google/gemma-3-27b-it (multimodal: text_config)
    "architectures": ["Gemma3ForConditionalGeneration"],
    "model_type": "gemma3",
    "text_config": {
        "model_type": "gemma3_text",
        "hidden_size": 5376,
        "intermediate_size": 21504,
        "num_hidden_layers": 62,
        "num_attention_heads": 32,
        "num_key_value_heads": 16,
        "head_dim": 128,
        "sliding_window": 1024,
        "sliding_window_pattern": 6,
        "max_position_embeddings": 131072,
        "vocab_size": 262208,
    },
    "vision_config": {"hidden_size": 1152, "num_hidden_layers": 27},
    "tie_word_embeddings": True,
}
GPT_OSS_20B: dict[str, Any] = {  # openai/gpt-oss-20b
    "architectures": ["GptOssForCausalLM"],
    "model_type": "gpt_oss",
    "hidden_size": 2880,
    "intermediate_size": 2880,
    "num_hidden_layers": 24,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "head_dim": 64,
    "num_local_experts": 32,
    "num_experts_per_tok": 4,
    "experts_per_token": 4,
    "sliding_window": 128,
    "layer_types": ["sliding_attention", "full_attention"] * 12,
    "max_position_embeddings": 131072,
    "vocab_size": 201088,
    "tie_word_embeddings": False,
    "quantization_config": {"quant_method": "mxfp4"},
}
LLAMA_4_SCOUT: dict[str, Any] = {  # meta-llama/Llama-4-Scout-17B-16E-Instruct (text_config)
    "architectures": ["Llama4ForConditionalGeneration"],
    "model_type": "llama4",
    "text_config": {
        "model_type": "llama4_text",
        "hidden_size": 5120,
        "intermediate_size": 8192,
        "intermediate_size_mlp": 16384,
        "num_hidden_layers": 48,
        "num_attention_heads": 40,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "num_local_experts": 16,
        "num_experts_per_tok": 1,
        "interleave_moe_layer_step": 1,
        "attention_chunk_size": 8192,
        "max_position_embeddings": 10485760,
        "vocab_size": 202048,
    },
    "tie_word_embeddings": False,
}


@pytest.mark.parametrize(
    ("config", "catalog_id", "active_tolerance"),
    [
        (LLAMA_31_8B, "llama-3.1-8b", 0.01),
        (MIXTRAL_8X7B, "mixtral-8x7b", 0.02),
        (QWEN3_30B_A3B, "qwen3-30b-a3b", 0.03),
        (DEEPSEEK_V3, "deepseek-v3", 0.02),
        (GEMMA_3_27B, "gemma-3-27b", 0.03),  # catalog params include the 0.4B vision tower
        # OpenAI's 3.6B active excludes the 0.58B embedding matrix; we count it (as Mixtral's
        # card does), so allow the difference.
        (GPT_OSS_20B, "gpt-oss-20b", 0.17),
        (LLAMA_4_SCOUT, "llama-4-scout", 0.03),
    ],
    ids=[
        "llama-3.1-8b",
        "mixtral",
        "qwen3-moe",
        "deepseek-v3-mla",
        "gemma3-text-config",
        "gpt-oss",
        "llama4",
    ],
)
def test_hf_config_matches_the_catalog_row(config: dict[str, Any], catalog_id: str, active_tolerance: float) -> None:
    row = Catalog.default().get_model(catalog_id)
    spec = model_from_hf_config(config)
    assert spec.num_hidden_layers == row.num_hidden_layers
    assert spec.num_key_value_heads == row.num_key_value_heads
    assert spec.head_dim == row.head_dim
    assert spec.params_b == pytest.approx(row.params_b, rel=0.03)
    assert spec.active_params_b == pytest.approx(row.active_params_b, rel=active_tolerance)
    assert spec.is_moe == row.is_moe
    assert kv_bytes_per_token(spec) == kv_bytes_per_token(row)
    for context in (100, 5000, 100_000):
        assert kv_bytes(spec, context) == kv_bytes(row, context)
    assert spec.attention == row.attention


def test_hf_config_derives_head_dim_and_names() -> None:
    spec = model_from_hf_config(LLAMA_31_8B)
    assert spec.head_dim == 128  # 4096 / 32, no explicit key
    assert spec.id == "meta-llama/Llama-3.1-8B-Instruct"
    assert spec.hf_repo == "meta-llama/Llama-3.1-8B-Instruct"
    assert kv_bytes_per_token(spec) == 131_072


def test_hf_config_mla_and_moe_fields() -> None:
    spec = model_from_hf_config(DEEPSEEK_V3)
    assert (spec.kv_lora_rank, spec.qk_rope_head_dim, spec.head_dim) == (512, 64, 192)
    assert kv_bytes_per_token(spec) == 70_272
    assert (spec.num_experts, spec.num_experts_per_tok) == (256, 8)


def test_hf_config_sliding_layers() -> None:
    gemma = model_from_hf_config(GEMMA_3_27B)
    assert (gemma.sliding_window, gemma.sliding_layers) == (1024, 52)
    oss = model_from_hf_config(GPT_OSS_20B)
    assert (oss.sliding_window, oss.sliding_layers) == (128, 12)
    qwen = model_from_hf_config({**QWEN3_30B_A3B, "sliding_window": 4096})  # use_sliding_window false
    assert qwen.sliding_window is None and qwen.sliding_layers == 0
    mistral_v01 = model_from_hf_config({**LLAMA_31_8B, "model_type": "mistral", "sliding_window": 4096})
    assert (mistral_v01.sliding_window, mistral_v01.sliding_layers) == (4096, 32)


def test_resolve_model_with_config_body_implies_its_quantization() -> None:
    spec, quant = Catalog.default().resolve_model(DEEPSEEK_V3)
    assert spec.kv_lora_rank == 512
    assert quant is not None and quant.id == "fp8-e4m3"
    _, oss_quant = Catalog.default().resolve_model(GPT_OSS_20B)
    assert oss_quant is not None and oss_quant.id == "mxfp4"
    compressed = {
        **LLAMA_31_8B,
        "quantization_config": {
            "quant_method": "compressed-tensors",
            "config_groups": {"group_0": {"weights": {"num_bits": 8, "type": "float"}}},
        },
    }
    assert Catalog.default().resolve_model(compressed)[1].id == "fp8-e4m3"  # type: ignore[union-attr]
    assert Catalog.default().resolve_model(LLAMA_31_8B)[1] is None


def test_hf_config_without_shape_needs_params() -> None:
    with pytest.raises(InvalidInput) as info:
        model_from_hf_config({"model_type": "mystery"}, field_prefix="setup.model")
    assert info.value.field == "setup.model.params_b"
    spec = model_from_hf_config({"model_type": "mystery", "params_b": 3.0})
    assert spec.params_b == 3.0 and kv_bytes_per_token(spec) is None


# ------------------------------------------------------------------ inline objects


def test_inline_hardware_from_the_design_example() -> None:
    hw = Catalog.default().resolve_hardware(
        {"name": "Strix Halo box", "mem_bandwidth_gb_s": 256, "fp16_tflops": 59, "memory_gb": 128}
    )
    assert (hw.mem_bandwidth_gb_s, hw.fp16_tflops, hw.memory_gb, hw.kind) == (256, 59, 128, "gpu")
    assert hw.dense_tflops("bf16") == 59


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"name": "x"}, "setup.hardware.mem_bandwidth_gb_s"),
        ({"mem_bandwidth_gb_s": -100}, "setup.hardware.mem_bandwidth_gb_s"),
        ({"mem_bandwidth_gb_s": 0}, "setup.hardware.mem_bandwidth_gb_s"),
        ({"mem_bandwidth_gb_s": "fast"}, "setup.hardware.mem_bandwidth_gb_s"),
        ({"mem_bandwidth_gb_s": float("nan")}, "setup.hardware.mem_bandwidth_gb_s"),
        ({"mem_bandwidth_gb_s": 100, "fp16_tflops": -1}, "setup.hardware.fp16_tflops"),
        ({"mem_bandwidth_gb_s": 100, "kind": "quantum"}, "setup.hardware.kind"),
        ({"mem_bandwidth_gb_s": 100, "bandwith": 3}, "setup.hardware.bandwith"),
        ({"mem_bandwidth_gb_s": True}, "setup.hardware.mem_bandwidth_gb_s"),
    ],
)
def test_invalid_inline_hardware_names_the_field(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as info:
        hardware_from_dict(spec, field_prefix="setup.hardware")
    assert info.value.field == field
    assert info.value.status == 422


def test_partial_inline_model_leaves_kv_unknown() -> None:
    spec, quant = Catalog.default().resolve_model({"params_b": 6.74})
    assert quant is None
    assert spec.active_params_b == 6.74
    assert kv_bytes_per_token(spec) is None


def test_inline_model_from_the_design_example() -> None:
    spec, _ = Catalog.default().resolve_model(
        {
            "params_b": 6.74,
            "active_params_b": 6.74,
            "num_hidden_layers": 32,
            "num_key_value_heads": 32,
            "head_dim": 128,
        }
    )
    assert kv_bytes_per_token(spec) == 2 * 32 * 32 * 128 * 2
    assert spec.attention == "gqa"  # heads unknown: not provably MHA


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"num_hidden_layers": 32}, "model.params_b"),
        ({"params_b": -1}, "model.params_b"),
        ({"params_b": 7, "active_params_b": 9}, "model.active_params_b"),
        ({"params_b": 7, "num_hidden_layers": 2.5}, "model.num_hidden_layers"),
        ({"params_b": 7, "num_hidden_layers": 0}, "model.num_hidden_layers"),
        ({"params_b": 7, "attention": "linear"}, "model.attention"),
        (
            {"params_b": 7, "num_hidden_layers": 4, "sliding_window": 64, "sliding_layers": 9},
            "model.sliding_layers",
        ),
        ({"params_b": 7, "layers": 32}, "model.layers"),
    ],
)
def test_invalid_inline_model_names_the_field(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as info:
        Catalog.default().resolve_model(spec)
    assert info.value.field == field


def test_inline_model_params_from_shape() -> None:
    spec, _ = Catalog.default().resolve_model(
        {
            "num_hidden_layers": 32,
            "hidden_size": 4096,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "intermediate_size": 14336,
            "vocab_size": 128256,
        }
    )
    assert spec.params_b == pytest.approx(8.03, rel=0.005)


@pytest.mark.parametrize(
    ("spec", "bits", "family"),
    [
        ({"bits_per_weight": 4.5}, 4.5, "custom"),
        ({"bits_per_weight": 16}, 16, "float"),
        ({"bits_per_weight": 8, "family": "float"}, 8, "float"),
    ],
)
def test_inline_quantization(spec: dict[str, Any], bits: float, family: str) -> None:
    quant = quant_from_dict(spec)
    assert (quant.bits_per_weight, quant.family) == (bits, family)


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({}, "setup.quantization.bits_per_weight"),
        ({"bits_per_weight": 0}, "setup.quantization.bits_per_weight"),
        ({"bits_per_weight": 400}, "setup.quantization.bits_per_weight"),
        ({"bits_per_weight": 4, "family": "magic"}, "setup.quantization.family"),
    ],
)
def test_invalid_inline_quantization(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput) as info:
        Catalog.default().resolve_quantization(spec, field_prefix="setup.quantization")
    assert info.value.field == field
