"""Hypothesis properties: the roofline moves the right way and never returns nonsense."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.physics import HardwareSpec, ModelSpec, QuantSpec, Roofline, analyse

bandwidths = st.floats(min_value=10, max_value=20_000, allow_nan=False)
tflops = st.one_of(st.none(), st.floats(min_value=1, max_value=10_000, allow_nan=False))
bits = st.floats(min_value=1.5, max_value=32, allow_nan=False)
tokens = st.integers(min_value=0, max_value=500_000)
kinds = st.sampled_from(["gpu", "cpu", "apple_soc", "accelerator"])
families = st.sampled_from(["float", "int", "gguf", "mx", "nv"])


@st.composite
def models(draw: st.DrawFn) -> ModelSpec:
    params = draw(st.floats(min_value=0.05, max_value=2000, allow_nan=False))
    active = params * draw(st.floats(min_value=0.01, max_value=1.0))
    shaped = draw(st.booleans())
    if not shaped:
        return ModelSpec("m", params, active)
    layers = draw(st.integers(min_value=1, max_value=160))
    heads = draw(st.integers(min_value=1, max_value=128))
    kv_heads = draw(st.integers(min_value=1, max_value=heads))
    head_dim = draw(st.sampled_from([64, 96, 128, 256]))
    window = draw(st.one_of(st.none(), st.integers(min_value=16, max_value=8192)))
    local = draw(st.integers(min_value=0, max_value=layers)) if window else 0
    experts = draw(st.one_of(st.none(), st.integers(min_value=2, max_value=256)))
    per_tok = draw(st.integers(min_value=1, max_value=experts - 1)) if experts else None
    return ModelSpec(
        "m",
        params,
        active,
        layers,
        heads * head_dim,
        heads,
        kv_heads,
        head_dim,
        sliding_window=window,
        sliding_layers=local,
        num_experts=experts if active < params else None,
        num_experts_per_tok=per_tok if active < params else None,
    )


@st.composite
def hardware(draw: st.DrawFn) -> HardwareSpec:
    fp16 = draw(tflops)
    return HardwareSpec(
        "h",
        "h",
        draw(kinds),
        "v",
        draw(bandwidths),
        draw(st.one_of(st.none(), st.floats(min_value=1, max_value=2000))),
        fp16,
        fp16,
        draw(st.one_of(st.none(), st.floats(min_value=1, max_value=20_000))),
    )


def _finite_non_negative(roof: Roofline) -> None:
    for name in (
        "weight_bytes",
        "active_weight_bytes",
        "kv_bytes_per_token",
        "kv_bytes_at_context",
        "decode_ceiling_tok_s",
        "decode_ceiling_batch_tok_s",
        "decode_aggregate_ceiling_tok_s",
        "crossover_batch",
        "prefill_ceiling_tok_s",
        "prefill_tflops",
        "ttft_floor_ms",
        "itl_floor_ms",
        "kv_pool_tokens",
        "max_concurrent_sequences",
    ):
        value = getattr(roof, name)
        if value is not None:
            assert math.isfinite(value) and value >= 0, (name, value)


@settings(max_examples=300)
@given(
    hw=hardware(),
    model=models(),
    bpw=bits,
    family=families,
    prompt=st.one_of(st.none(), tokens),
    output=st.one_of(st.none(), tokens),
    depth=st.integers(min_value=0, max_value=100_000),
    concurrency=st.integers(min_value=1, max_value=1024),
    tp=st.integers(min_value=1, max_value=16),
    kv_dtype=st.sampled_from(["auto", "fp8", "q8_0", "q4_0", "bf16"]),
)
def test_never_negative_or_nan(
    *,
    hw: HardwareSpec,
    model: ModelSpec,
    bpw: float,
    family: str,
    prompt: int | None,
    output: int | None,
    depth: int,
    concurrency: int,
    tp: int,
    kv_dtype: str,
) -> None:
    roof = analyse(
        hw,
        model,
        QuantSpec("q", "q", bpw, family),
        prompt_tokens=prompt,
        output_tokens=output,
        kv_depth_tokens=depth,
        concurrency=concurrency,
        tensor_parallel=tp,
        kv_cache_dtype=kv_dtype,
    )
    _finite_non_negative(roof)
    assert roof.decode_ceiling_batch_tok_s <= roof.decode_ceiling_tok_s * (1 + 1e-9)
    assert roof.decode_aggregate_ceiling_tok_s >= roof.decode_ceiling_batch_tok_s * (1 - 1e-9)
    assert roof.prefill_ceiling_tok_s is not None


@given(hardware(), models(), bits, tokens, st.floats(min_value=1.01, max_value=10))
def test_decode_rises_with_bandwidth(
    hw: HardwareSpec, model: ModelSpec, bpw: float, prompt: int, factor: float
) -> None:
    quant = QuantSpec("q", "q", bpw, "int")
    faster = HardwareSpec(
        hw.id,
        hw.name,
        hw.kind,
        hw.vendor,
        hw.mem_bandwidth_gb_s * factor,
        hw.memory_gb,
        hw.fp16_tflops,
        hw.bf16_tflops,
        hw.fp8_tflops,
    )
    # Hold compute fixed so only bandwidth changes (the estimate would otherwise scale with it).
    if hw.fp16_tflops is None:
        hw = HardwareSpec(hw.id, hw.name, hw.kind, hw.vendor, hw.mem_bandwidth_gb_s, hw.memory_gb, 1e4, 1e4)
        faster = HardwareSpec(hw.id, hw.name, hw.kind, hw.vendor, faster.mem_bandwidth_gb_s, hw.memory_gb, 1e4, 1e4)
    slow_roof = analyse(hw, model, quant, prompt_tokens=prompt)
    fast_roof = analyse(faster, model, quant, prompt_tokens=prompt)
    assert fast_roof.decode_ceiling_tok_s >= slow_roof.decode_ceiling_tok_s


@given(hardware(), models(), bits, st.floats(min_value=0.5, max_value=16), tokens)
def test_decode_falls_with_bits(hw: HardwareSpec, model: ModelSpec, bpw: float, extra: float, prompt: int) -> None:
    low = analyse(hw, model, QuantSpec("q", "q", bpw, "int"), prompt_tokens=prompt)
    high = analyse(hw, model, QuantSpec("q", "q", bpw + extra, "int"), prompt_tokens=prompt)
    assert high.decode_ceiling_tok_s <= low.decode_ceiling_tok_s


@given(hardware(), models(), bits, tokens, st.integers(min_value=1, max_value=200_000))
def test_decode_falls_with_context(hw: HardwareSpec, model: ModelSpec, bpw: float, prompt: int, more: int) -> None:
    quant = QuantSpec("q", "q", bpw, "gguf")
    short = analyse(hw, model, quant, prompt_tokens=prompt)
    long = analyse(hw, model, quant, prompt_tokens=prompt + more)
    assert long.decode_ceiling_tok_s <= short.decode_ceiling_tok_s


@given(
    model=models(),
    bpw=bits,
    bandwidth=bandwidths,
    compute=st.floats(min_value=1, max_value=5000),
    factor=st.floats(min_value=1.01, max_value=10),
    prompt=st.one_of(st.none(), st.integers(min_value=1, max_value=200_000)),
)
def test_prefill_rises_with_compute(
    *, model: ModelSpec, bpw: float, bandwidth: float, compute: float, factor: float, prompt: int | None
) -> None:
    quant = QuantSpec("q", "q", bpw, "gguf")
    slow = analyse(
        HardwareSpec("a", "a", "gpu", "v", bandwidth, None, compute, compute),
        model,
        quant,
        prompt_tokens=prompt,
    )
    fast = analyse(
        HardwareSpec("b", "b", "gpu", "v", bandwidth, None, compute * factor, compute * factor),
        model,
        quant,
        prompt_tokens=prompt,
    )
    assert slow.prefill_ceiling_tok_s is not None and fast.prefill_ceiling_tok_s is not None
    assert fast.prefill_ceiling_tok_s >= slow.prefill_ceiling_tok_s
    if prompt is None or slow.prefill_bound == "compute":
        assert fast.prefill_ceiling_tok_s > slow.prefill_ceiling_tok_s


@given(bandwidths, st.floats(min_value=1, max_value=1000), st.floats(min_value=0.01, max_value=0.99), bits)
def test_moe_uses_active_params(bandwidth: float, params: float, share: float, bpw: float) -> None:
    hw = HardwareSpec("h", "h", "gpu", "v", bandwidth, None, 1000.0, 1000.0)
    quant = QuantSpec("q", "q", bpw, "int")
    moe = analyse(hw, ModelSpec("moe", params, params * share), quant)
    dense_same_active = analyse(hw, ModelSpec("dense", params * share, params * share), quant)
    dense_total = analyse(hw, ModelSpec("dense", params, params), quant)
    assert moe.decode_ceiling_tok_s == dense_same_active.decode_ceiling_tok_s
    assert moe.decode_ceiling_tok_s > dense_total.decode_ceiling_tok_s
