"""Table-driven checks of the roofline arithmetic against hand-computed values (DESIGN §1)."""

from __future__ import annotations

import pytest

from advisor.physics import (
    ACTIVATION_RESERVE_BYTES_PER_DEVICE,
    HardwareSpec,
    ModelSpec,
    QuantSpec,
    analyse,
    attended_tokens_sum,
    decode_flops_per_token,
    kv_bytes,
    kv_bytes_per_token,
    kv_pool_bytes,
    kv_replication,
    prefill_flops,
    weight_bytes,
    weights_read_per_step,
)

F16 = QuantSpec("f16-bf16", "F16 / BF16", 16.0, "float")
FP8 = QuantSpec("fp8-e4m3", "FP8", 8.0, "float")
Q4_K_M = QuantSpec("gguf-q4_k_m", "Q4_K_M", 4.89, "gguf")
AWQ = QuantSpec("awq-int4-g128", "AWQ", 4.15625, "int")
W8A8 = QuantSpec("int8-w8a8-smoothquant", "INT8 W8A8", 8.0, "int")

H100 = HardwareSpec("nvidia-h100-sxm", "H100 SXM", "gpu", "NVIDIA", 3350, 80, 989.5, 989.5, 1979, 1979)
A100 = HardwareSpec("nvidia-a100-80gb-sxm", "A100", "gpu", "NVIDIA", 2039, 80, 312, 312, None, 624)
RTX4090 = HardwareSpec("nvidia-rtx-4090", "RTX 4090", "gpu", "NVIDIA", 1008, 24, 165.2, 165.2, 330.3, 660.6)
RADEON = HardwareSpec("amd-radeon-rx-7900-xtx", "RX 7900 XTX", "gpu", "AMD", 960, 24, 122.8)
TPU = HardwareSpec("google-tpu-v5e", "TPU v5e", "accelerator", "Google", 819, 16, None, 197, None, 393)
RTX6000ADA = HardwareSpec("nvidia-rtx-6000-ada", "RTX 6000 Ada", "gpu", "NVIDIA", 960, 48, None, None, 728.5)
M2_ULTRA = HardwareSpec("apple-m2-ultra", "M2 Ultra", "apple_soc", "Apple", 800, 192)
ARC = HardwareSpec("intel-arc-a770-16gb", "Arc A770", "gpu", "Intel", 560, 16)
CPU = HardwareSpec("cpu-desktop-2ch-ddr5-5600", "DDR5", "cpu", "generic", 89.6)

LLAMA_8B = ModelSpec("llama-3.1-8b", 8.03, 8.03, 32, 4096, 32, 8, 128, max_position_embeddings=131072)
MIXTRAL = ModelSpec("mixtral-8x7b", 46.7, 12.9, 32, 4096, 32, 8, 128, num_experts=8, num_experts_per_tok=2)
DEEPSEEK_V3 = ModelSpec(
    "deepseek-v3", 671, 37, 61, 7168, 128, 128, 192, attention="mla", kv_lora_rank=512, qk_rope_head_dim=64
)
GEMMA3_1B = ModelSpec(
    "gemma-3-1b",
    1.0,
    1.0,
    26,
    1152,
    4,
    1,
    256,
    attention="sliding+global",
    sliding_window=512,
    sliding_layers=22,
)


def _device(bandwidth: float, tflops: float | None = None) -> HardwareSpec:
    return HardwareSpec("test", "test", "gpu", "test", bandwidth, 80, tflops, tflops)


# The seed's check table: an 8.0B-parameter model at 16 bits, batch 1, empty context.
@pytest.mark.parametrize(
    ("bandwidth", "expected"),
    [(90, 5.6), (600, 37.5), (864, 54.0), (1008, 63.0), (2039, 127.4), (3350, 209.4)],
    ids=["ddr5-dual", "a10g", "l40s", "rtx4090", "a100-sxm", "h100-sxm"],
)
def test_seed_decode_table(bandwidth: float, expected: float) -> None:
    roof = analyse(_device(bandwidth), ModelSpec("seed-8b", 8.0, 8.0), F16)
    assert round(roof.decode_ceiling_tok_s, 1) == expected
    assert roof.decode_bound == "bandwidth"


@pytest.mark.parametrize(
    ("model", "kv_dtype", "expected"),
    [
        (LLAMA_8B, "auto", 131_072),  # 2 x 32 x 8 x 128 x 2
        (LLAMA_8B, "bf16", 131_072),
        (LLAMA_8B, "fp8", 65_536),  # 1 byte per element
        (LLAMA_8B, "q8_0", 69_632),  # 2 x 32 x 8 x 128 x 34/32
        (LLAMA_8B, "q4_0", 36_864),  # ... x 18/32
        (DEEPSEEK_V3, "auto", 70_272),  # MLA: 61 x (512 + 64) x 2
        (GEMMA3_1B, "auto", 26_624),  # 2 x 26 x 1 x 256 x 2 (all layers)
        (ModelSpec("partial", 7.0, 7.0), "auto", None),  # shape unknown
    ],
)
def test_kv_bytes_per_token(model: ModelSpec, kv_dtype: str, expected: float | None) -> None:
    assert kv_bytes_per_token(model, kv_dtype) == expected


def test_llama_8k_conversation_holds_about_a_gigabyte() -> None:
    assert kv_bytes(LLAMA_8B, 8000) == 131_072 * 8000
    assert analyse(H100, LLAMA_8B, F16, prompt_tokens=8000).kv_bytes_at_context == pytest.approx(1.048576e9)


@pytest.mark.parametrize(
    ("context", "expected"),
    [
        # per layer per token: 2 x 1 x 256 x 2 = 1024 B; 4 global layers, 22 local with window 512
        (100, 26 * 1024 * 100),
        (512, 26 * 1024 * 512),
        (10_000, 4 * 1024 * 10_000 + 22 * 1024 * 512),
    ],
)
def test_sliding_window_layers_stop_growing(context: int, expected: int) -> None:
    assert kv_bytes(GEMMA3_1B, context) == expected


@pytest.mark.parametrize(
    ("model", "quant", "active", "expected"),
    [
        (LLAMA_8B, F16, False, 16.06e9),
        (LLAMA_8B, Q4_K_M, False, 8.03e9 * 4.89 / 8),
        (MIXTRAL, F16, False, 93.4e9),
        (MIXTRAL, F16, True, 25.8e9),
        (MIXTRAL, AWQ, True, 12.9e9 * 4.15625 / 8),
    ],
)
def test_weight_bytes(model: ModelSpec, quant: QuantSpec, active: bool, expected: float) -> None:
    assert weight_bytes(model, quant, active=active) == pytest.approx(expected)


def test_moe_decodes_from_active_params() -> None:
    roof = analyse(H100, MIXTRAL, F16)
    assert roof.decode_ceiling_tok_s == pytest.approx(3350e9 / 25.8e9)  # 129.8, not 35.9
    assert roof.active_weight_bytes == pytest.approx(25.8e9)
    assert roof.weight_bytes == pytest.approx(93.4e9)


@pytest.mark.parametrize(
    ("batch", "expected"),
    [
        (1, 25.8e9),
        # expert e = (93.4 - 25.8) / 6 GB = 11.2667 GB; shared = 25.8 - 2e = 3.2667 GB
        # b = 2: touched = 1 - 0.75^2 = 0.4375 -> 3.2667 + 8 x 11.2667 x 0.4375 GB
        (2, 3.26667e9 + 8 * 11.26667e9 * 0.4375),
        (1000, 93.4e9),
    ],
)
def test_moe_batch_touches_more_experts(batch: int, expected: float) -> None:
    assert weights_read_per_step(MIXTRAL, F16, batch) == pytest.approx(expected, rel=1e-5)


def test_ten_times_compute_same_decode_ten_times_prefill() -> None:
    slow = _device(1000, 100.0)
    fast = _device(1000, 1000.0)
    for prompt in (None, 4000):
        a = analyse(slow, LLAMA_8B, F16, prompt_tokens=prompt, output_tokens=256)
        b = analyse(fast, LLAMA_8B, F16, prompt_tokens=prompt, output_tokens=256)
        assert a.decode_ceiling_tok_s == b.decode_ceiling_tok_s
        assert a.prefill_ceiling_tok_s is not None and b.prefill_ceiling_tok_s is not None
        assert b.prefill_ceiling_tok_s == pytest.approx(10 * a.prefill_ceiling_tok_s)


def test_attention_sums_by_hand() -> None:
    tiny = ModelSpec("tiny", 1.0, 1.0, 2, 32, 4, 1, 8)
    assert attended_tokens_sum(tiny, 0, 10) == 2 * 55  # sum 1..10 per layer
    assert attended_tokens_sum(tiny, 5, 3) == 2 * (6 + 7 + 8)
    windowed = ModelSpec("w", 1.0, 1.0, 2, 32, 4, 1, 8, sliding_window=4, sliding_layers=1)
    assert attended_tokens_sum(windowed, 0, 10) == 55 + (1 + 2 + 3 + 4 * 7)
    assert attended_tokens_sum(windowed, 2, 4) == (3 + 4 + 5 + 6) + (3 + 4 + 4 + 4)
    assert attended_tokens_sum(windowed, 10, 3) == (11 + 12 + 13) + 3 * 4


def test_prefill_flops_by_hand() -> None:
    tiny = ModelSpec("tiny", 1.0, 1.0, 2, 32, 4, 1, 8)  # 4 heads x 8 = width 32
    assert prefill_flops(tiny, 10) == 2e9 * 10 + 4 * 32 * 110
    assert prefill_flops(tiny, 3, kv_depth_tokens=5) == 2e9 * 3 + 4 * 32 * 42
    # decoding token 101 attends 101 positions in each of 2 layers
    assert decode_flops_per_token(tiny, 101) == 2e9 + 4 * 32 * 202


def test_prefill_quadratic_term_grows_faster_than_linear() -> None:
    short = prefill_flops(LLAMA_8B, 1000)
    long = prefill_flops(LLAMA_8B, 32_000)
    assert long > 32 * short
    # Llama-8B, 32k prompt: 2 x 8.03e9 x 32000 + 4 x 4096 x 32 x (32000 x 32001 / 2)
    assert long == pytest.approx(2 * 8.03e9 * 32000 + 4 * 4096 * 32 * 32000 * 32001 / 2)


@pytest.mark.parametrize(
    ("hw", "quant", "dtype", "tflops", "estimated"),
    [
        (H100, FP8, "fp8", 1979, False),
        (A100, FP8, "bf16", 312, False),  # no fp8 units: weight-only fp8, 16-bit compute
        (H100, F16, "bf16", 989.5, False),
        (RTX4090, Q4_K_M, "fp16", 165.2, False),
        (H100, AWQ, "bf16", 989.5, False),
        (A100, W8A8, "int8", 624, False),
        (RADEON, F16, "bf16", 122.8, False),  # bf16 falls back to the published fp16
        (TPU, Q4_K_M, "fp16", 197, False),  # fp16 falls back to the published bf16
        (RTX6000ADA, F16, "bf16", 364.25, True),  # half the published fp8
        (RTX6000ADA, FP8, "fp8", 728.5, False),
        (M2_ULTRA, Q4_K_M, "fp16", 24.0, True),  # 800 GB/s x 30 FLOP/B
        (ARC, F16, "bf16", 56.0, True),  # 560 GB/s x 100 FLOP/B
        (CPU, Q4_K_M, "fp16", 1.792, True),  # 89.6 GB/s x 20 FLOP/B
        (ARC, FP8, "bf16", 56.0, True),  # no fp8 units: 16-bit estimate
    ],
)
def test_prefill_dtype_and_rate(hw: HardwareSpec, quant: QuantSpec, dtype: str, tflops: float, estimated: bool) -> None:
    roof = analyse(hw, LLAMA_8B, quant, prompt_tokens=2048)
    assert roof.prefill_dtype == dtype
    assert roof.prefill_tflops == pytest.approx(tflops)
    assert roof.prefill_tflops_estimated is estimated


def test_prefill_ceiling_and_ttft_floor() -> None:
    roof = analyse(H100, LLAMA_8B, F16, prompt_tokens=2000)
    flops = 2 * 8.03e9 * 2000 + 4 * 4096 * 32 * 2000 * 2001 / 2
    assert roof.prefill_flops == pytest.approx(flops)
    assert roof.ttft_floor_ms == pytest.approx(flops / 989.5e12 * 1000)
    assert roof.prefill_ceiling_tok_s == pytest.approx(2000 / (flops / 989.5e12))
    assert roof.prefill_bound == "compute"


def test_tiny_prompt_prefill_is_floored_by_one_weight_read() -> None:
    roof = analyse(H100, LLAMA_8B, F16, prompt_tokens=4)
    assert roof.prefill_bound == "bandwidth"
    assert roof.ttft_floor_ms == pytest.approx(16.06e9 / 3350e9 * 1000)


def test_no_prompt_gives_asymptotic_prefill_and_no_ttft() -> None:
    roof = analyse(H100, LLAMA_8B, F16)
    assert roof.ttft_floor_ms is None
    assert roof.prefill_ceiling_tok_s == pytest.approx(989.5e12 / (2 * 8.03e9))


def test_kv_pool_and_concurrency() -> None:
    roof = analyse(H100, LLAMA_8B, F16, prompt_tokens=2000, output_tokens=48)
    # "80 GB" of HBM is 80 GiB as the engine sees it (85.9e9 bytes), not 80e9.
    pool = 80 * 1024**3 * 0.9 - 16.06e9 - ACTIVATION_RESERVE_BYTES_PER_DEVICE
    assert roof.kv_pool_tokens == int(pool // 131_072) == 450_911
    assert roof.max_concurrent_sequences == int(pool // (131_072 * 2048)) == 220
    assert roof.context_tokens == 2048
    assert roof.fits_in_memory is True


@pytest.mark.parametrize(
    ("runtime", "expected"),
    [
        # vLLM/TGI: 80 GiB × 0.9 − 16.06 GB weights − 2 GiB reserve inside the fraction.
        ("vllm", 80 * 1024**3 * 0.9 - 16.06e9 - 2 * 1024**3),
        ("tgi", 80 * 1024**3 * 0.9 - 16.06e9 - 2 * 1024**3),
        # SGLang: mem_fraction_static is weights + KV; activations live outside it.
        ("sglang", 80 * 1024**3 * 0.9 - 16.06e9),
        # TensorRT-LLM: the fraction is of what is left after weights and activations.
        ("trtllm", (80 * 1024**3 - 16.06e9 - 2 * 1024**3) * 0.9),
        ("llamacpp", 80 * 1024**3 * 0.9 - 16.06e9 - 0.5 * 1024**3),
    ],
)
def test_kv_pool_follows_each_runtime(runtime: str, expected: float) -> None:
    got = kv_pool_bytes(
        memory_bytes=80 * 1024**3, gpu_memory_utilization=0.9, weight_bytes_resident=16.06e9, runtime=runtime
    )
    assert got == pytest.approx(expected)


def test_model_that_does_not_fit() -> None:
    big = ModelSpec("llama-70b", 70.6, 70.6, 80, 8192, 64, 8, 128)
    roof = analyse(RTX4090, big, F16, prompt_tokens=100)
    assert roof.fits_in_memory is False
    assert roof.kv_pool_tokens == 0
    assert roof.max_concurrent_sequences == 0


def test_unknown_memory_or_shape_leaves_capacity_unknown() -> None:
    cpu = HardwareSpec("cpu", "cpu", "cpu", "generic", 89.6)
    roof = analyse(cpu, LLAMA_8B, Q4_K_M, prompt_tokens=512)
    assert roof.kv_pool_tokens is None and roof.fits_in_memory is None
    partial = analyse(H100, ModelSpec("partial", 7.0, 7.0), F16, prompt_tokens=512)
    assert partial.kv_bytes_per_token is None and partial.kv_pool_tokens is None
    assert partial.max_concurrent_sequences is None
    assert partial.fits_in_memory is True  # weights fit; KV size unknown


def test_tensor_parallel_scales_bandwidth_compute_memory() -> None:
    one = analyse(H100, LLAMA_8B, F16, prompt_tokens=2000)
    two = analyse(H100, LLAMA_8B, F16, prompt_tokens=2000, tensor_parallel=2)
    assert two.decode_ceiling_tok_s == pytest.approx(2 * one.decode_ceiling_tok_s)
    assert two.prefill_tflops == pytest.approx(2 * 989.5)
    assert two.memory_bytes == 160 * 1024**3
    pool = 160 * 1024**3 * 0.9 - 16.06e9 - 2 * ACTIVATION_RESERVE_BYTES_PER_DEVICE
    assert two.kv_pool_tokens == int(pool // 131_072)


@pytest.mark.parametrize(
    ("model", "tp", "expected"),
    [(LLAMA_8B, 1, 1), (LLAMA_8B, 8, 1), (LLAMA_8B, 16, 2), (DEEPSEEK_V3, 8, 8), (DEEPSEEK_V3, 1, 1)],
)
def test_kv_replication(model: ModelSpec, tp: int, expected: int) -> None:
    assert kv_replication(model, tp) == expected


def test_batch_decode_and_crossover() -> None:
    model = ModelSpec("seed-8b", 8.0, 8.0)  # no shape: no KV, compute = 2 x 8e9 per token
    roof = analyse(H100, model, F16, concurrency=64)
    # one 16 GB weight read serves all 64 streams; compute 64 x 16e9 / 989.5e12 < 16e9 / 3350e9
    assert roof.decode_ceiling_batch_tok_s == pytest.approx(3350e9 / 16e9)
    assert roof.decode_aggregate_ceiling_tok_s == pytest.approx(64 * 3350e9 / 16e9)
    assert roof.crossover_batch == pytest.approx(989.5e12 / 3350e9)  # 295.4
    big = analyse(H100, model, F16, concurrency=1000)
    assert big.decode_bound == "compute"
    assert big.decode_ceiling_batch_tok_s == pytest.approx(989.5e12 / (1000 * 16e9))
    assert big.itl_floor_ms == pytest.approx(1000 / big.decode_ceiling_batch_tok_s)


def test_long_context_decode_never_turns_compute_bound() -> None:
    # At 2k tokens each stream's KV read (270 MB) costs more time than its FLOPs.
    roof = analyse(H100, LLAMA_8B, F16, prompt_tokens=2000, output_tokens=128, concurrency=16)
    assert roof.crossover_batch is None
    assert roof.decode_bound == "bandwidth"
    kv = 131_072 * (2000 + 64)
    assert roof.decode_ceiling_batch_tok_s == pytest.approx(3350e9 / (16.06e9 + 16 * kv))


def test_moe_crossover_is_later_than_dense_estimate() -> None:
    roof = analyse(H100, MIXTRAL, F16, concurrency=8)
    dense_guess = (25.8e9 / 3350e9) / (2 * 12.9e9 / 989.5e12)
    assert roof.crossover_batch is not None and roof.crossover_batch > dense_guess
    assert roof.decode_ceiling_batch_tok_s < roof.decode_ceiling_tok_s


@pytest.mark.parametrize(
    "kwargs",
    [
        {"concurrency": 0},
        {"tensor_parallel": 0},
        {"gpu_memory_utilization": 0.0},
        {"gpu_memory_utilization": 1.5},
        {"prompt_tokens": -1},
        {"kv_depth_tokens": -5},
        {"kv_cache_dtype": "fp3"},
    ],
)
def test_invalid_workload_raises(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        analyse(H100, LLAMA_8B, F16, **kwargs)  # type: ignore[arg-type]


def test_unknown_kv_dtype_is_rejected_without_a_shape() -> None:
    with pytest.raises(ValueError, match="kv_cache_dtype"):
        analyse(H100, ModelSpec("partial", 7.0, 7.0), F16, kv_cache_dtype="fp3")


def test_workload_means_are_rounded() -> None:
    roof = analyse(H100, LLAMA_8B, F16, prompt_tokens=1999.6, output_tokens=127.5, concurrency=15.7)
    assert (roof.prompt_tokens, roof.output_tokens, roof.concurrency) == (2000, 128, 16)
    assert roof.context_tokens == 2128


def test_invalid_specs_raise() -> None:
    with pytest.raises(ValueError, match="mem_bandwidth"):
        analyse(_device(0), LLAMA_8B, F16)
    with pytest.raises(ValueError, match="bits_per_weight"):
        analyse(H100, LLAMA_8B, QuantSpec("x", "x", 0, "int"))
