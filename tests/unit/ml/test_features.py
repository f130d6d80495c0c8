"""Feature rows: what a setup looks like to the regression, by hand."""

from __future__ import annotations

import math

import pytest

from advisor.catalog import Catalog
from advisor.ml.features import (
    CATEGORICAL,
    FEATURES,
    NUMERIC,
    QUANT_KERNELS,
    FeatureInput,
    feature_frame,
    feature_row,
    quant_kernel,
)
from advisor.physics import HardwareSpec, ModelSpec, QuantSpec, analyse

H100 = HardwareSpec("nvidia-h100-sxm", "H100", "gpu", "NVIDIA", 3350, 80, 989.5, 989.5, 1979, 1979)
SPARK = HardwareSpec("nvidia-dgx-spark-gb10", "DGX Spark", "gpu", "NVIDIA", 273, 128)
LLAMA_8B = ModelSpec("llama-3.1-8b", 8.03, 8.03, 32, 4096, 32, 8, 128)
MOE = ModelSpec("qwen3-30b-a3b", 30.5, 3.3, 48, 2048, 32, 4, 128)
BF16 = QuantSpec("f16-bf16", "BF16", 16, "float")
Q4 = QuantSpec("gguf-q4_k_m", "Q4_K_M", 4.89, "gguf")


def _row(item: FeatureInput) -> dict[str, object]:
    return dict(zip(FEATURES, feature_row(item), strict=True))


def test_by_hand_tp2_batched() -> None:
    roof = analyse(H100, LLAMA_8B, BF16, prompt_tokens=2000, output_tokens=200, concurrency=8, tensor_parallel=2)
    row = _row(FeatureInput(roof, "VLLM", "gpu", H100, LLAMA_8B, BF16))
    assert row["runtime"] == "vllm" and row["runtime_family"] == "server"
    assert row["vendor"] == "nvidia" and row["quant_family"] == "float" and row["attention"] == "gqa"
    assert row["bits_per_weight"] == 16
    assert row["log_active_params_b"] == pytest.approx(math.log(8.03))
    assert row["moe"] == 0.0
    assert row["log_prompt_tokens"] == pytest.approx(math.log1p(2000))
    assert row["log_context_tokens"] == pytest.approx(math.log1p(2100))  # prompt + output / 2
    assert row["log_concurrency"] == pytest.approx(math.log(8))
    assert row["tensor_parallel"] == 2.0
    # per device, although the roofline holds the TP group's bandwidth and compute
    assert row["log_bandwidth_gb_s"] == pytest.approx(math.log(3350))
    assert row["log_tflops"] == pytest.approx(math.log(989.5))
    assert row["tflops_estimated"] == 0.0
    assert row["log_weight_gb"] == pytest.approx(math.log(8.03 * 2))
    assert row["log_decode_ceiling"] == pytest.approx(math.log(roof.decode_ceiling_batch_tok_s))
    # batch-1 step: weights 16.06 GB + KV 2100 tokens x 131072 B over 6700 GB/s
    kv = 2100 * 131072
    assert row["kv_read_share"] == pytest.approx(kv / (16.06e9 + kv), rel=1e-3)


def test_estimated_compute_moe_and_quantized() -> None:
    roof = analyse(SPARK, MOE, Q4, prompt_tokens=512, output_tokens=32)
    row = _row(FeatureInput(roof, "llamacpp", "gpu", SPARK, MOE, Q4))
    assert row["tflops_estimated"] == 1.0
    assert row["log_tflops"] == pytest.approx(math.log(273 * 100 / 1000))  # ESTIMATED_OPS_PER_BYTE gpu
    assert row["moe"] == 1.0 and row["quant_family"] == "gguf" and row["runtime_family"] == "llamacpp"


def test_without_specs_the_spec_features_are_missing() -> None:
    roof = analyse(H100, LLAMA_8B, BF16, output_tokens=128)
    row = _row(FeatureInput(roof, None, "gpu"))
    for name in ("runtime", "runtime_family", "vendor", "quant_family", "attention"):
        assert row[name] is None, name
    for name in ("bits_per_weight", "log_active_params_b", "moe", "log_prompt_tokens"):
        assert math.isnan(row[name]), name  # type: ignore[arg-type]
    # what the roofline alone says is still there
    assert row["hardware_kind"] == "gpu"
    assert math.isfinite(row["log_bandwidth_gb_s"])  # type: ignore[arg-type]


def test_frame_types() -> None:
    roof = analyse(H100, LLAMA_8B, BF16, prompt_tokens=100)
    frame = feature_frame([FeatureInput(roof, "sglang", "gpu", H100, LLAMA_8B, BF16), FeatureInput(roof, None, "gpu")])
    assert list(frame.columns) == list(FEATURES)
    assert all(frame[c].dtype == object for c in CATEGORICAL)
    assert all(frame[c].dtype == float for c in NUMERIC)
    assert frame.loc[1, "vendor"] is None


def test_layers_and_the_quant_kernel() -> None:
    roof = analyse(SPARK, MOE, Q4, prompt_tokens=512, output_tokens=32)
    row = _row(FeatureInput(roof, "llamacpp", "gpu", SPARK, MOE, Q4))
    assert row["log_layers"] == pytest.approx(math.log(48))
    assert QUANT_KERNELS[int(row["quant_kernel"])] == "k"  # type: ignore[call-overload]
    bare = _row(FeatureInput(roof, "llamacpp", "gpu"))
    assert math.isnan(bare["log_layers"]) and math.isnan(bare["quant_kernel"])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("quant", "kernel"),
    [
        (QuantSpec("f16-bf16", "F16 / BF16", 16, "float"), "float"),
        (QuantSpec("fp8-e4m3", "FP8 E4M3", 8, "float"), "float"),
        (QuantSpec("gguf-q8_0", "GGUF Q8_0", 8.5, "gguf"), "affine"),
        (QuantSpec("Q4_0", "Q4_0", 4.55, "gguf"), "affine"),
        (QuantSpec("Q5_1", "Q5_1", 6.0, "gguf"), "affine"),
        (QuantSpec("awq-int4-g128", "AWQ 4-bit (group size 128)", 4.16, "int"), "affine"),
        (QuantSpec("MLX 4-bit", "MLX 4-bit", 4.5, "custom"), "affine"),
        (QuantSpec("gguf-q4_k_m", "GGUF Q4_K_M (mix)", 4.89, "gguf"), "k"),
        (QuantSpec("Q2_K_S", "Q2_K_S", 2.97, "gguf"), "k"),
        (QuantSpec("GGUF Q6_K", "GGUF Q6_K", 6.56, "gguf"), "k"),
        (QuantSpec("IQ2_XXS", "IQ2_XXS", 2.39, "gguf"), "lookup"),
        (QuantSpec("gguf-iq4_xs", "GGUF IQ4_XS", 4.25, "gguf"), "lookup"),
        (QuantSpec("mxfp4", "MXFP4 (OCP Microscaling)", 4.25, "mx"), "microscaled"),
        (QuantSpec("nvfp4", "NVFP4", 4.5, "nv"), "microscaled"),
    ],
)
def test_quant_kernel_classes(quant: QuantSpec, kernel: str) -> None:
    code = quant_kernel(quant)
    assert code is not None and QUANT_KERNELS[code] == kernel


def test_an_unknown_weight_format_has_no_kernel_class() -> None:
    assert quant_kernel(QuantSpec("q", "q", 4.0, "gguf")) is None
    assert quant_kernel(None) is None


def test_the_issue_rate_feature() -> None:
    a100 = Catalog.default().resolve_hardware("nvidia-a100-80gb-sxm")
    assert (a100.sm_count, a100.boost_clock_mhz) == (108, 1410.0)
    model, _ = Catalog.default().resolve_model("llama-3-8b")
    quant = Catalog.default().resolve_quantization("f16")
    row = feature_row(FeatureInput(analyse(a100, model, quant), "llama.cpp", "gpu", a100, model, quant))
    assert row[FEATURES.index("log_issue_rate")] == math.log(108 * 1.41)
    m1 = Catalog.default().resolve_hardware("apple-m1")
    row = feature_row(FeatureInput(analyse(m1, model, quant), "llama.cpp", "apple_soc", m1, model, quant))
    assert math.isnan(float(row[FEATURES.index("log_issue_rate")]))  # type: ignore[arg-type]
