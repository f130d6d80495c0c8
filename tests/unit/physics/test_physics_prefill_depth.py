"""Prefill with depth: matmul FLOPs plus attention FLOPs that grow with the KV depth, each term
with its own efficiency (issue #17 item 2)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.physics import HardwareSpec, ModelSpec, QuantSpec, analyse, prefill_flops
from advisor.physics.roofline import (
    prefill_attention_flops,
    prefill_efficiency,
    prefill_matmul_flops,
    prefill_seconds_split,
)

Q8_0 = QuantSpec("gguf-q8_0", "Q8_0", 8.5, "gguf")
SPARK = HardwareSpec("nvidia-dgx-spark-gb10", "DGX Spark", "gpu", "NVIDIA", 273, 128, 125.0, 125.0)
LLAMA_8B = ModelSpec("llama-3.1-8b", 8.03, 8.03, 32, 4096, 32, 8, 128)
# gpt-oss-20b: 24 layers, 64 query heads of 64, every other layer a 128-token sliding window.
GPT_OSS_20B = ModelSpec(
    "gpt-oss-20b", 20.9, 3.6, 24, 2880, 64, 8, 64, attention="sliding+global", sliding_window=128, sliding_layers=12
)


def test_llama_8b_pp2048_at_32k_depth_by_hand() -> None:
    # llama-bench "pp2048 @ d32768": 2048 new tokens after 32,768 cached. Each new token t
    # (t = 32,769 ... 34,816) attends over t positions in all 32 layers: Σ t = 2048 × (32769 +
    # 34816) / 2 = 69,206,016, times 4 × 32 heads × 128 = 16,384 FLOPs per attended position.
    matmul = 2 * 8.03e9 * 2048
    attention = 4 * 4096 * 32 * 2048 * (32769 + 34816) / 2
    assert prefill_matmul_flops(LLAMA_8B, 2048) == pytest.approx(matmul)
    assert prefill_attention_flops(LLAMA_8B, 2048, 32768) == pytest.approx(attention)
    assert prefill_flops(LLAMA_8B, 2048, 32768) == pytest.approx(matmul + attention)
    roof = analyse(SPARK, LLAMA_8B, Q8_0, prompt_tokens=2048, kv_depth_tokens=32768)
    assert roof.prefill_flops == pytest.approx(matmul + attention)
    assert roof.prefill_attention_flops == pytest.approx(attention)
    # At 32k depth attention is about half of Llama-8B's prefill work (0.8 % at depth 0, 512 tokens).
    assert roof.prefill_attention_share == pytest.approx(attention / (matmul + attention))
    assert 0.5 < (roof.prefill_attention_share or 0) < 0.55
    shallow = analyse(SPARK, LLAMA_8B, Q8_0, prompt_tokens=512)
    assert shallow.prefill_attention_share is not None and shallow.prefill_attention_share < 0.02
    assert analyse(SPARK, LLAMA_8B, Q8_0).prefill_attention_share is None  # no prompt


def test_sliding_layers_stop_the_attention_term_growing() -> None:
    # Half of gpt-oss's layers attend 128 tokens at most: only the 12 global layers grow with depth.
    deep = prefill_attention_flops(GPT_OSS_20B, 2048, 32768)
    global_part = 4 * 64 * 64 * 12 * 2048 * (32769 + 34816) / 2
    local_part = 4 * 64 * 64 * 12 * 2048 * 128
    assert deep == pytest.approx(global_part + local_part)


def test_split_time_is_the_ceiling_at_full_efficiency_and_the_harmonic_mean_otherwise() -> None:
    matmul, attention = 3.0e13, 1.0e13
    assert prefill_seconds_split(matmul_flops=matmul, attention_flops=attention, tflops=100) == pytest.approx(0.4)
    slow = prefill_seconds_split(
        matmul_flops=matmul, attention_flops=attention, tflops=100, matmul_efficiency=0.5, attention_efficiency=0.25
    )
    assert slow == pytest.approx(0.3 / 0.5 + 0.1 / 0.25)
    # The share of the ceiling reached: 1 / ((1 − a)/e_m + a/e_a) with a = 0.25.
    assert 0.4 / slow == pytest.approx(prefill_efficiency(0.25, 0.5, 0.25))
    assert prefill_efficiency(0.0, 0.5, 0.1) == pytest.approx(0.5)
    assert prefill_efficiency(1.0, 0.5, 0.1) == pytest.approx(0.1)
    with pytest.raises(ValueError, match="attention_efficiency"):
        prefill_seconds_split(matmul_flops=1, attention_flops=1, tflops=1, attention_efficiency=0)


@settings(max_examples=200, deadline=None)
@given(
    prompt=st.integers(min_value=1, max_value=65_536),
    depth=st.integers(min_value=0, max_value=131_072),
    extra=st.integers(min_value=1, max_value=65_536),
    matmul_efficiency=st.floats(min_value=0.05, max_value=1.0),
    attention_efficiency=st.floats(min_value=0.01, max_value=1.0),
)
def test_prefill_time_grows_with_depth(
    prompt: int, depth: int, extra: int, matmul_efficiency: float, attention_efficiency: float
) -> None:
    # More cached tokens never make the same prompt cheaper: attention FLOPs, the ceiling's time
    # and the time at any pair of efficiencies all grow (strictly for global attention).
    for model in (LLAMA_8B, GPT_OSS_20B):
        shallow = prefill_attention_flops(model, prompt, depth)
        deep = prefill_attention_flops(model, prompt, depth + extra)
        assert deep > shallow
        assert prefill_matmul_flops(model, prompt) == 2 * model.active_params_b * 1e9 * prompt

        def seconds(flops: float, *, m: ModelSpec = model) -> float:
            return prefill_seconds_split(
                matmul_flops=prefill_matmul_flops(m, prompt),
                attention_flops=flops,
                tflops=125.0,
                matmul_efficiency=matmul_efficiency,
                attention_efficiency=attention_efficiency,
            )

        assert seconds(deep) > seconds(shallow)
        a = analyse(SPARK, model, Q8_0, prompt_tokens=prompt, kv_depth_tokens=depth)
        b = analyse(SPARK, model, Q8_0, prompt_tokens=prompt, kv_depth_tokens=depth + extra)
        assert a.prefill_ceiling_tok_s is not None and b.prefill_ceiling_tok_s is not None
        assert b.prefill_ceiling_tok_s <= a.prefill_ceiling_tok_s
        assert a.prefill_attention_share is not None and b.prefill_attention_share is not None
        assert b.prefill_attention_share > a.prefill_attention_share
        assert 0 < a.prefill_attention_share < 1
        assert math.isclose(
            (a.prefill_flops or 0) - (a.prefill_attention_flops or 0),
            prefill_matmul_flops(model, prompt),
            rel_tol=1e-9,
        )
