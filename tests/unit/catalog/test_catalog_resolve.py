"""Name resolution: aliases, repo ids, Ollama tags, llama-bench strings, and refusals."""

from __future__ import annotations

import pytest

from advisor.catalog import Catalog
from advisor.errors import Conflict, InvalidInput, NotFound, UnknownName


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.default()


# Device strings as tools print them. The llama-bench gpu_info values are verbatim from the real
# files in /work/shared/formats/real/llama.cpp (lhl-b6865-rocm-gfx1151-*, asoldano-*-strixhalo-*,
# orionzhen-b7951-vulkan-radv-7900xtx-*, brayniac-b5606-cuda-rtx4090-*); the nvidia-smi names are
# NVML product names.
@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("nvidia-h100-sxm", "nvidia-h100-sxm"),
        ("NVIDIA H100 80GB HBM3", "nvidia-h100-sxm"),
        ("H100-SXM-80GB", "nvidia-h100-sxm"),
        ("h100 sxm", "nvidia-h100-sxm"),
        ("NVIDIA H100 PCIe", "nvidia-h100-pcie"),
        ("NVIDIA GeForce RTX 4090", "nvidia-rtx-4090"),
        ("RTX 4090 24GB", "nvidia-rtx-4090"),
        ("NVIDIA A10G", "nvidia-a10g"),
        ("NVIDIA A10", "nvidia-a10"),
        ("AMD Instinct MI300X", "amd-mi300x"),
        ("NVIDIA A100-SXM4-80GB", "nvidia-a100-80gb-sxm"),
        ("NVIDIA A100 80GB PCIe", "nvidia-a100-80gb-pcie"),
        ("A100 40GB", "nvidia-a100-40gb-pcie"),
        ("NVIDIA RTX 6000 Ada Generation", "nvidia-rtx-6000-ada"),
        ("NVIDIA GH200 480GB", "nvidia-gh200-96gb"),
        ("Tesla T4", "nvidia-t4"),
        ("NVIDIA L40S", "nvidia-l40s"),
        ("Intel(R) Arc(TM) A770 Graphics", "intel-arc-a770-16gb"),
        ("Radeon 8060S Graphics", "amd-ryzen-ai-max-plus-395"),
        ("AMD Radeon 8060S Graphics", "amd-ryzen-ai-max-plus-395"),
        ("AMD Radeon RX 7900 XTX (RADV NAVI31)", "amd-radeon-rx-7900-xtx"),
        (
            "AMD Radeon RX 7900 XTX, AMD Ryzen 9 7950X 16-Core Processor (RADV RAPHAEL_MENDOCINO)",
            "amd-radeon-rx-7900-xtx",
        ),
        ("Apple M2 Ultra (76-core GPU, 192GB)", "apple-m2-ultra"),
        ("Apple M1 Pro (14-core GPU)", "apple-m1-pro"),
        ("Apple M4 Max (16-core CPU / 40-core GPU, 48GB)", "apple-m4-max"),
        ("Apple M3 Max (30-core GPU)", "apple-m3-max-14c"),
        ("Apple M1 (7-core GPU, 8GB)", "apple-m1"),  # Apple memory_gb is the maximum
        ("H100 94GB", "nvidia-h100-nvl"),  # the size picks the NVL out of the H100s
        ("H100 SXM5 (80GB HBM3)", "nvidia-h100-sxm"),  # the catalog's own name
    ],
)
def test_hardware_aliases(catalog: Catalog, name: str, expected: str) -> None:
    assert catalog.resolve_hardware(name).id == expected


@pytest.mark.parametrize(
    ("name", "suggested"),
    [
        # Ambiguous: devices with different figures share the name. Never guess.
        ("A100", {"nvidia-a100-40gb-pcie", "nvidia-a100-80gb-pcie", "nvidia-a100-80gb-sxm"}),
        ("A100 80GB", {"nvidia-a100-80gb-pcie", "nvidia-a100-80gb-sxm"}),
        ("H100 80GB", {"nvidia-h100-pcie", "nvidia-h100-sxm"}),
        ("Apple M3 Max", {"apple-m3-max", "apple-m3-max-14c"}),
        ("M4 Max", {"apple-m4-max", "apple-m4-max-14c"}),
        ("GH200", {"nvidia-gh200-96gb", "nvidia-gh200-144gb"}),
    ],
)
def test_ambiguous_hardware_is_refused_with_the_candidates(catalog: Catalog, name: str, suggested: set[str]) -> None:
    with pytest.raises(UnknownName) as info:
        catalog.resolve_hardware(name, field_prefix="setup.hardware")
    assert set(info.value.matches) == suggested
    assert info.value.field == "setup.hardware"
    assert info.value.status == 422


@pytest.mark.parametrize(
    ("name", "near"),
    [
        ("A100-SXM4-40GB", "nvidia-a100-80gb-sxm"),  # a 40 GB SXM is not the 80 GB one
        ("RTX 4090 48GB", "nvidia-rtx-4090"),  # memory contradicts the catalog
        ("RTX 4080", "nvidia-rtx-4090"),
        ("H10O SXM", "nvidia-h100-sxm"),
        ("H100 SXM (94GB)", "nvidia-h100-sxm"),  # a size in parentheses must agree too
        ("Apple M2 Ultra (76-core GPU, 256GB)", "apple-m2-ultra"),  # above the 192 GB maximum
    ],
)
def test_unknown_hardware_suggests_but_does_not_map(catalog: Catalog, name: str, near: str) -> None:
    with pytest.raises(UnknownName) as info:
        catalog.resolve_hardware(name)
    assert near in info.value.matches
    assert len(info.value.matches) <= 5
    assert "did you mean" in info.value.detail


def test_two_different_gpus_in_one_string_are_ambiguous(catalog: Catalog) -> None:
    with pytest.raises(UnknownName) as info:
        catalog.resolve_hardware("NVIDIA GeForce RTX 4090, NVIDIA GeForce RTX 3090")
    assert set(info.value.matches) == {"nvidia-rtx-4090", "nvidia-rtx-3090"}


@pytest.mark.parametrize(
    ("name", "model", "quant"),
    [
        ("llama-3.1-8b", "llama-3.1-8b", None),
        ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b", None),
        ("meta-llama/Meta-Llama-3.1-8B-Instruct", "llama-3.1-8b", None),
        ("Llama 3.1 8B", "llama-3.1-8b", None),
        # Llama 3 keeps its generation (8k context), never folded into 3.1 (issue 14).
        ("Meta-Llama-3-8B-Instruct", "llama-3-8b", None),
        ("meta-llama/Meta-Llama-3-70B-Instruct", "llama-3-70b", None),
        ("llama3:8b", "llama-3-8b", "gguf-q4_0"),
        ("Meta-Llama-3-8B-Instruct.Q4_K_M.gguf", "llama-3-8b", "gguf-q4_k_m"),
        ("Llama-3.1-8B-Instruct.i1-Q4_K_M", "llama-3.1-8b", "gguf-q4_k_m"),
        ("unsloth/Llama-3.1-8B-Instruct-UD-Q4_K_XL", "llama-3.1-8b", None),
        ("hugging-quants/Meta-Llama-3.1-8B-Instruct-AWQ-INT4", "llama-3.1-8b", "awq-int4-g128"),
        ("neuralmagic/Meta-Llama-3.1-8B-Instruct-FP8", "llama-3.1-8b", "fp8-e4m3"),
        ("RedHatAI/Llama-3.1-8B-Instruct-FP8-dynamic", "llama-3.1-8b", "fp8-e4m3"),
        ("RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w8a8", "llama-3.1-8b", "int8-w8a8-smoothquant"),
        ("unsloth/Llama-3.1-8B-Instruct-GGUF", "llama-3.1-8b", None),  # which file is not said
        ("Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf", "llama-3.1-8b", "gguf-q4_k_m"),
        ("Llama-3.1-8B-Instruct-Q4_K_S.gguf", "llama-3.1-8b", None),  # format not catalogued
        ("mistralai/Mistral-7B-Instruct-v0.3", "mistral-7b-v0.3", None),
        ("mistralai/Mixtral-8x7B-Instruct-v0.1", "mixtral-8x7b", None),
        ("TheBloke/Mixtral-8x7B-Instruct-v0.1-GPTQ", "mixtral-8x7b", "gptq-int4-g128"),
        ("Qwen/Qwen2.5-7B-Instruct-AWQ", "qwen2.5-7b", "awq-int4-g128"),
        ("Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4", "qwen2.5-7b", "gptq-int4-g128"),
        ("Qwen/Qwen3-30B-A3B-Instruct-2507", "qwen3-30b-a3b", None),
        ("Qwen/Qwen3-8B-FP8", "qwen3-8b", "fp8-e4m3"),
        ("google/gemma-2-9b-it", "gemma-2-9b", None),
        ("mistralai/Mistral-Small-24B-Instruct-2501", "mistral-small-24b", None),
        ("allenai/OLMo-2-1124-7B-Instruct", "olmo-2-7b", None),
        ("openai/gpt-oss-20b", "gpt-oss-20b", None),
        ("deepseek-ai/DeepSeek-R1-Distill-Llama-8B", "deepseek-r1-distill-llama-8b", None),
        # Ollama tags: bare tags imply the library's default file type
        ("llama3.1:8b", "llama-3.1-8b", "gguf-q4_k_m"),
        ("llama3.1:8b-instruct-q4_K_M", "llama-3.1-8b", "gguf-q4_k_m"),
        ("llama3.1:8b-instruct-fp16", "llama-3.1-8b", "f16-bf16"),
        ("llama3.1:70b-instruct-q8_0", "llama-3.1-70b", "gguf-q8_0"),
        ("llama3.1:8b-instruct-q4_K_S", "llama-3.1-8b", None),
        ("qwen2.5:7b", "qwen2.5-7b", "gguf-q4_k_m"),
        ("mistral:latest", "mistral-7b-v0.3", "gguf-q4_k_m"),
        ("mistral", "mistral-7b-v0.3", "gguf-q4_k_m"),  # Ollama's untagged name
        ("gemma2:9b", "gemma-2-9b", "gguf-q4_0"),
        ("gpt-oss:20b", "gpt-oss-20b", "mxfp4"),
        ("qwen3:30b-a3b-q4_K_M", "qwen3-30b-a3b", "gguf-q4_k_m"),
        ("hf.co/bartowski/Llama-3.2-3B-Instruct-GGUF:Q4_K_M", "llama-3.2-3b", "gguf-q4_k_m"),
        # llama-bench model_type (verbatim from the real llama.cpp files)
        ("llama 1B Q4_K - Medium", "llama-3.2-1b", "gguf-q4_k_m"),
        ("gpt-oss 20B MXFP4 MoE", "gpt-oss-20b", "gguf-mxfp4_moe"),
        ("gpt-oss 20B F16", "gpt-oss-20b", "f16-bf16"),
        ("llama 8B Q4_K - Medium", "llama-3.1-8b", "gguf-q4_k_m"),
        # v0.2 has its own row (models_added.csv): the v0.3 shapes with a 32,000-token vocabulary
        ("TheBloke/Mistral-7B-Instruct-v0.2-GGUF", "mistral-7b-v0.2", None),
        # real files' model names (issue 14): a model path with a W8A8 suffix, a llama-bench file name
        ("/data/models/MiniMax-M2.5-W8A8", "minimax-m2.5", "int8-w8a8-smoothquant"),
        ("Qwen3.6-27B", "qwen3.6-27b", None),
        ("qwen_qwen3.5-4b-gguf:q4_k_m", "qwen3.5-4b", "gguf-q4_k_m"),  # bartowski's "<org>_<model>-GGUF"
        ("qwen3.5:4b", "qwen3.5-4b", None),
        ("qwen2.5-coder:7b", "qwen2.5-coder-7b", None),
    ],
)
def test_model_names(catalog: Catalog, name: str, model: str, quant: str | None) -> None:
    spec, implied = catalog.resolve_model(name)
    assert spec.id == model
    assert (implied.id if implied else None) == quant


@pytest.mark.parametrize(
    ("name", "near"),
    [
        ("TheBloke/Mistral-7B-Instruct-v0.1-GGUF", "mistral-7b-v0.3"),  # v0.1: 8k context, sliding window
        ("qwen35 27B Q8_0", "qwen3-32b"),
        ("qwen2.5-coder:32b", "qwen2.5-coder:7b"),  # only the size a real file names is mapped
        ("deepseek-r1:latest", "deepseek-r1:7b"),  # :latest moved to a Qwen3 distill
        ("llama-3.1-9b", "llama-3.1-8b"),
    ],
)
def test_unknown_models_are_refused_with_suggestions(catalog: Catalog, name: str, near: str) -> None:
    with pytest.raises(UnknownName) as info:
        catalog.resolve_model(name, field_prefix="setup.model")
    assert near in info.value.matches
    assert info.value.field == "setup.model"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("bf16", "f16-bf16"),
        ("fp16", "f16-bf16"),
        ("float16", "f16-bf16"),
        ("bfloat16", "f16-bf16"),
        ("auto", "f16-bf16"),
        ("fp8", "fp8-e4m3"),
        ("FP8-dynamic", "fp8-e4m3"),
        ("fp8_e4m3", "fp8-e4m3"),
        ("w8a8", "int8-w8a8-smoothquant"),
        ("int8", "int8-w8a8-smoothquant"),
        ("awq", "awq-int4-g128"),
        ("gptq", "gptq-int4-g128"),
        ("int4", "awq-int4-g128"),
        ("Q4_K_M", "gguf-q4_k_m"),
        ("q4_k_m", "gguf-q4_k_m"),
        ("Q4_K - Medium", "gguf-q4_k_m"),
        ("Q8_0", "gguf-q8_0"),
        ("Q2_K - Medium", "gguf-q2_k"),
        ("mxfp4", "mxfp4"),
        ("MXFP4 MoE", "gguf-mxfp4_moe"),
        ("nvfp4", "nvfp4"),
        ("F32", "f32"),
        ("gguf-q6_k", "gguf-q6_k"),
        ("GGUF Q5_K_M (mix)", "gguf-q5_k_m"),
    ],
)
def test_quantization_spellings(catalog: Catalog, name: str, expected: str) -> None:
    assert catalog.resolve_quantization(name).id == expected


def test_unknown_quantization(catalog: Catalog) -> None:
    with pytest.raises(UnknownName) as info:
        catalog.resolve_quantization("Q4_K_S", field_prefix="setup.quantization")
    assert "gguf-q4_k_m" in info.value.matches
    assert info.value.field == "setup.quantization"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, "auto"),
        ("auto", "auto"),
        ("fp8", "fp8"),
        ("FP8_E4M3", "fp8_e4m3"),
        ("fp8_e5m2", "fp8_e5m2"),
        ("q8_0", "q8_0"),
        ("Q4_0", "q4_0"),
        ("f16", "fp16"),
        ("bfloat16", "bf16"),
    ],
)
def test_kv_cache_dtype(catalog: Catalog, value: str | None, expected: str) -> None:
    assert catalog.resolve_kv_cache_dtype(value) == expected


def test_unknown_kv_cache_dtype(catalog: Catalog) -> None:
    with pytest.raises(UnknownName) as info:
        catalog.resolve_kv_cache_dtype("int4", field="setup.kv_cache_dtype")
    assert info.value.field == "setup.kv_cache_dtype"


def test_get_by_id(catalog: Catalog) -> None:
    assert catalog.get_hardware("nvidia-l40s").mem_bandwidth_gb_s == 864
    assert catalog.get_model("mixtral-8x7b").active_params_b == 12.9
    assert catalog.get_quantization("gguf-q4_0").bits_per_weight == 4.5
    with pytest.raises(NotFound):
        catalog.get_hardware("NVIDIA H100 80GB HBM3")  # get_* is exact; resolve_* takes aliases


def test_default_is_cached(catalog: Catalog) -> None:
    assert Catalog.default() is catalog


def test_with_entries_adds_user_devices_and_aliases(catalog: Catalog) -> None:
    extended = catalog.with_entries(
        hardware=[
            {
                "id": "acme-x1",
                "name": "Acme X1",
                "mem_bandwidth_gb_s": 1200,
                "fp16_tflops": 200,
                "memory_gb": 64,
                "aliases": ["ACME Accelerator X1"],
            }
        ],
        models=[
            {
                "id": "tiny-7b",
                "params_b": 7,
                "num_hidden_layers": 32,
                "num_key_value_heads": 8,
                "head_dim": 128,
            }
        ],
        quantizations=[{"id": "acme-q5", "name": "Acme Q5", "bits_per_weight": 5.25}],
    )
    assert extended.resolve_hardware("acme accelerator x1").mem_bandwidth_gb_s == 1200
    assert extended.resolve_model("tiny-7b")[0].num_key_value_heads == 8
    assert extended.resolve_quantization("acme-q5").bits_per_weight == 5.25
    # the original is untouched
    with pytest.raises(UnknownName):
        catalog.resolve_hardware("acme-x1")
    records = {(r["entry_kind"], r["id"]): r for r in extended.records()}
    assert records["hardware", "acme-x1"]["builtin"] is False
    assert records["hardware", "acme-x1"]["aliases"] == ["ACME Accelerator X1"]
    assert records["hardware", "nvidia-h100-sxm"]["builtin"] is True


def test_with_entries_model_from_hf_config(catalog: Catalog) -> None:
    body = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 2048,
        "intermediate_size": 8192,
        "num_hidden_layers": 16,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "vocab_size": 128256,
        "tie_word_embeddings": True,
    }
    extended = catalog.with_entries(models=[{"id": "my-1b", "config": body}])
    spec = extended.get_model("my-1b")
    assert spec.num_hidden_layers == 16
    assert spec.params_b == pytest.approx(1.24, rel=0.01)  # Llama-3.2-1B's shapes


def test_with_entries_rejects_duplicates_and_bad_rows(catalog: Catalog) -> None:
    with pytest.raises(Conflict) as conflict:
        catalog.with_entries(hardware=[{"id": "nvidia-h100-sxm", "mem_bandwidth_gb_s": 1}])
    assert conflict.value.field == "hardware[0].id"
    with pytest.raises(InvalidInput) as missing_id:
        catalog.with_entries(hardware=[{"mem_bandwidth_gb_s": 100}])
    assert missing_id.value.field == "hardware[0].id"
    with pytest.raises(InvalidInput) as bad:
        catalog.with_entries(hardware=[{"id": "x", "mem_bandwidth_gb_s": -5}])
    assert bad.value.field == "hardware[0].mem_bandwidth_gb_s"


@pytest.mark.parametrize("value", ["", "   ", 42])
def test_empty_or_non_string_names(catalog: Catalog, value: object) -> None:
    with pytest.raises(InvalidInput):
        catalog.resolve_hardware(value, field_prefix="setup.hardware")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        catalog.resolve_model(value)  # type: ignore[arg-type]
