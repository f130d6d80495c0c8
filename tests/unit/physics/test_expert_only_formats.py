"""Formats that quantize only a mixture-of-experts model's routed experts (llama.cpp's MXFP4_MOE
files): the other tensors are read at their own width."""

from __future__ import annotations

import pytest

from advisor.catalog import Catalog
from advisor.physics import ModelSpec, QuantSpec, analyse
from advisor.physics.roofline import weight_bytes, weights_read_per_step


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.default()


def test_llama_cpp_mxfp4_moe_files_read_their_q8_0_tensors_every_token(catalog: Catalog) -> None:
    model = catalog.get_model("gpt-oss-20b")
    split = model.expert_split()
    assert split is not None
    experts_all, experts_active = split
    # 32 experts of (21 - 3.6) / 28 B parameters, 4 per token; 1.11 B others
    assert experts_all == pytest.approx(32 * 17.4 / 28)
    assert experts_active == pytest.approx(4 * 17.4 / 28)
    gguf = catalog.resolve_quantization("MXFP4 MoE")
    assert (gguf.id, gguf.dense_bits_per_weight) == ("gguf-mxfp4_moe", 8.5)
    others = 3.6 - experts_active
    assert weight_bytes(model, gguf, active=True) == pytest.approx((experts_active * 4.25 + others * 8.5) * 1e9 / 8)
    # ggml-org/gpt-oss-20b-GGUF's mxfp4 file: 12.1 GB
    assert weight_bytes(model, gguf) / 1e9 == pytest.approx(12.1, rel=0.05)
    # the decode ceiling follows: 3.6 B parameters at 4.25 bits would claim 1.3x more
    uniform = QuantSpec("u", "uniform", 4.25, "mx")
    spark = catalog.get_hardware("nvidia-dgx-spark-gb10")
    split_roof = analyse(spark, model, gguf, prompt_tokens=512, output_tokens=128)
    uniform_roof = analyse(spark, model, uniform, prompt_tokens=512, output_tokens=128)
    assert 1.25 < uniform_roof.decode_ceiling_tok_s / split_roof.decode_ceiling_tok_s < 1.4
    # the Hugging Face checkpoint's "mxfp4" stays uniform (quantization.csv says why)
    assert catalog.resolve_quantization("mxfp4").dense_bits_per_weight is None


def test_the_batched_expert_union_keeps_the_others_once(catalog: Catalog) -> None:
    model = catalog.get_model("gpt-oss-120b")
    quant = catalog.resolve_quantization("MXFP4 MoE")
    one = weights_read_per_step(model, quant, 1)
    assert one == pytest.approx(weight_bytes(model, quant, active=True))
    many = weights_read_per_step(model, quant, 10_000)
    assert many == pytest.approx(weight_bytes(model, quant), rel=1e-6)
    assert one < weights_read_per_step(model, quant, 8) < many


def test_a_dense_model_or_unknown_expert_counts_store_every_tensor_alike() -> None:
    quant = QuantSpec("x", "experts only", 4.25, "mx", dense_bits_per_weight=16.0)
    dense = ModelSpec("dense", 8.0, 8.0)
    assert weight_bytes(dense, quant) == pytest.approx(8e9 * 4.25 / 8)
    unknown = ModelSpec("moe", 30.0, 3.0)  # MoE by its totals, expert counts unknown
    assert unknown.expert_split() is None
    assert weight_bytes(unknown, quant, active=True) == pytest.approx(3e9 * 4.25 / 8)
