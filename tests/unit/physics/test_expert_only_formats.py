"""Formats that quantize only a mixture-of-experts model's routed experts (gpt-oss's own MXFP4
checkpoint, llama.cpp's MXFP4_MOE files): the other tensors are read at their own width."""

from __future__ import annotations

import pytest

from advisor.catalog import Catalog
from advisor.physics import ModelSpec, QuantSpec, analyse
from advisor.physics.roofline import weight_bytes, weights_read_per_step


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.default()


def test_gpt_oss_reads_its_bf16_attention_and_output_every_token(catalog: Catalog) -> None:
    model = catalog.get_model("gpt-oss-20b")
    split = model.expert_split()
    assert split is not None
    experts_all, experts_active = split
    # 32 experts of (21 - 3.6) / 28 B parameters, 4 per token; 1.11 B others
    assert experts_all == pytest.approx(32 * 17.4 / 28)
    assert experts_active == pytest.approx(4 * 17.4 / 28)
    hf = catalog.resolve_quantization("mxfp4")
    gguf = catalog.resolve_quantization("MXFP4 MoE")
    others = 3.6 - experts_active
    assert weight_bytes(model, hf, active=True) == pytest.approx((experts_active * 4.25 + others * 16) * 1e9 / 8)
    assert weight_bytes(model, gguf, active=True) == pytest.approx((experts_active * 4.25 + others * 8.5) * 1e9 / 8)
    # What gpt-oss-20b's checkpoint weighs: 13.8 GB on Hugging Face (embedding rows included)
    assert weight_bytes(model, hf) / 1e9 == pytest.approx(13.8, rel=0.08)
    # ggml-org/gpt-oss-20b-GGUF's mxfp4 file: 12.1 GB
    assert weight_bytes(model, gguf) / 1e9 == pytest.approx(12.1, rel=0.05)
    # and the decode ceiling follows: about half the ceiling of 3.6 B parameters at 4.25 bits
    uniform = QuantSpec("u", "uniform", 4.25, "mx")
    h100 = catalog.get_hardware("nvidia-h100-sxm")
    split_roof = analyse(h100, model, hf, prompt_tokens=512, output_tokens=128)
    uniform_roof = analyse(h100, model, uniform, prompt_tokens=512, output_tokens=128)
    assert 1.7 < uniform_roof.decode_ceiling_tok_s / split_roof.decode_ceiling_tok_s < 1.95


def test_the_batched_expert_union_keeps_the_others_once(catalog: Catalog) -> None:
    model = catalog.get_model("gpt-oss-120b")
    quant = catalog.resolve_quantization("mxfp4")
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
