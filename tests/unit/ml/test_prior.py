"""The physics prior: ceilings × calibrated efficiency, fallbacks, bands and the calibration."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from advisor.ml import (
    DECODE_EFFICIENCY,
    PREFILL_EFFICIENCY,
    PRIOR_MODEL_VERSION,
    Band,
    EfficiencyPrior,
    prior_expectations,
    runtime_family,
)
from advisor.ml.prior import PREFILL_ATTENTION_SLOWDOWN, TTFT_OVERHEAD_MS, calibrate, efficiency_prior, ttft_overhead
from advisor.physics import HardwareSpec, ModelSpec, QuantSpec, analyse

H100 = HardwareSpec("nvidia-h100-sxm", "H100", "gpu", "NVIDIA", 3350, 80, 989.5, 989.5, 1979, 1979)
SPARK = HardwareSpec("nvidia-dgx-spark-gb10", "DGX Spark", "gpu", "NVIDIA", 273, 128)
M2_ULTRA = HardwareSpec("apple-m2-ultra", "M2 Ultra", "apple_soc", "Apple", 800, 192)
TPU = HardwareSpec("google-tpu-v5e", "TPU v5e", "accelerator", "Google", 819, 16, None, 197)
LLAMA_8B = ModelSpec("llama-3.1-8b", 8.03, 8.03, 32, 4096, 32, 8, 128)
BF16 = QuantSpec("f16-bf16", "BF16", 16, "float")
Q4 = QuantSpec("gguf-q4_k_m", "Q4_K_M", 4.89, "gguf")


def test_vllm_on_h100_by_hand() -> None:
    roof = analyse(H100, LLAMA_8B, BF16, prompt_tokens=2000, output_tokens=200, concurrency=8)
    exp = prior_expectations(roof, runtime="vllm", hardware_kind="gpu")
    cell = DECODE_EFFICIENCY["server", "gpu"]
    assert exp.decode_tok_s is not None and exp.itl_ms is not None
    assert exp.decode_tok_s.expected == pytest.approx(roof.decode_ceiling_batch_tok_s * cell.median)
    assert exp.decode_tok_s.low == pytest.approx(roof.decode_ceiling_batch_tok_s * cell.p10)
    assert exp.decode_tok_s.high == pytest.approx(roof.decode_ceiling_batch_tok_s * cell.p90)
    assert exp.decode_tok_s.ceiling == roof.decode_ceiling_batch_tok_s
    assert exp.itl_ms.expected == pytest.approx(1000 / exp.decode_tok_s.expected)
    assert exp.itl_ms.low == pytest.approx(1000 / exp.decode_tok_s.high)
    assert exp.itl_ms.ceiling == roof.itl_floor_ms
    pre = PREFILL_EFFICIENCY["server", "gpu"]
    assert exp.prefill_tok_s is not None and exp.ttft_ms is not None
    assert roof.prefill_ceiling_tok_s is not None
    # Two efficiencies: the cell's for the matmuls, PREFILL_ATTENTION_SLOWDOWN times less for the
    # attention, which is 3.2 % of a 2,000-token prompt's FLOPs at depth 0.
    matmul, attention = 2 * 8.03e9 * 2000, 4 * 4096 * 32 * 2000 * 2001 / 2
    share = attention / (matmul + attention)
    assert roof.prefill_attention_share == pytest.approx(share)
    assert exp.prefill_tok_s.expected == pytest.approx(
        roof.prefill_ceiling_tok_s * pre.median / (1 + share * (PREFILL_ATTENTION_SLOWDOWN - 1))
    )
    assert exp.ttft_ms.expected == pytest.approx(2000 / exp.prefill_tok_s.expected * 1000 + TTFT_OVERHEAD_MS[0])
    # a server's first token waits on its front end too: the band's high end allows 100 ms of it
    assert exp.ttft_ms.high == pytest.approx(2000 / exp.prefill_tok_s.low * 1000 + ttft_overhead("vllm")[2])
    assert ttft_overhead("vllm")[2] == 100.0 and ttft_overhead("llamacpp") == TTFT_OVERHEAD_MS
    assert exp.model_version == PRIOR_MODEL_VERSION == "physics-prior-1"
    assert "server/gpu" in exp.source


@pytest.mark.parametrize(
    ("runtime", "family"),
    [
        ("vllm", "server"),
        ("sglang", "server"),
        ("tgi", "server"),
        ("trtllm", "server"),
        ("ollama", "llamacpp"),
        ("llamacpp", "llamacpp"),
        ("mlx", "mlx"),
        ("other", "*"),
        (None, "*"),
        ("VLLM", "server"),
        ("made-up", "*"),
    ],
)
def test_runtime_family(runtime: str | None, family: str) -> None:
    assert runtime_family(runtime) == family


@pytest.mark.parametrize(
    ("hw", "quant", "runtime", "decode_cell", "prefill_cell"),
    [
        (H100, BF16, "vllm", ("server", "gpu"), ("server", "gpu")),
        (H100, Q4, "ollama", ("llamacpp", "gpu"), ("llamacpp", "gpu")),
        (H100, BF16, None, ("*", "gpu"), ("*", "gpu")),
        # A device without a compute figure (SPARK here is built inline, with bandwidth only): no
        # published row is estimated any more (hardware_compute.csv), so the kind's cell answers.
        (SPARK, Q4, "llamacpp", ("llamacpp", "gpu"), ("llamacpp", "gpu")),
        (M2_ULTRA, Q4, "mlx", ("mlx", "apple_soc"), ("*", "apple_soc")),
        (M2_ULTRA, Q4, "vllm", ("*", "apple_soc"), ("*", "apple_soc")),
        (TPU, BF16, "vllm", ("server", "gpu"), ("server", "gpu")),  # no accelerator data: GPU cells
    ],
)
def test_cells_and_fallbacks(
    hw: HardwareSpec,
    quant: QuantSpec,
    runtime: str | None,
    decode_cell: tuple[str, str],
    prefill_cell: tuple[str, str],
) -> None:
    roof = analyse(hw, LLAMA_8B, quant, prompt_tokens=512, output_tokens=128)
    exp = prior_expectations(roof, runtime=runtime, hardware_kind=hw.kind)
    assert exp.decode_tok_s is not None and exp.prefill_tok_s is not None
    assert exp.decode_tok_s.expected == pytest.approx(
        roof.decode_ceiling_batch_tok_s * DECODE_EFFICIENCY[decode_cell].median
    )
    assert roof.prefill_ceiling_tok_s is not None
    share = roof.prefill_attention_share
    assert share is not None and 0 < share < 0.05  # a 512-token prompt: almost all matmul
    assert exp.prefill_tok_s.expected == pytest.approx(
        roof.prefill_ceiling_tok_s
        * PREFILL_EFFICIENCY[prefill_cell].median
        / (1 + share * (PREFILL_ATTENTION_SLOWDOWN - 1))
    )
    assert f"decode {decode_cell[0]}/{decode_cell[1]}" in exp.source


def test_no_prompt_means_no_ttft() -> None:
    exp = prior_expectations(analyse(H100, LLAMA_8B, BF16), runtime="vllm", hardware_kind="gpu")
    assert exp.ttft_ms is None
    assert exp.prefill_tok_s is not None


def test_to_dict_shape() -> None:
    roof = analyse(H100, LLAMA_8B, BF16, prompt_tokens=100)
    data = prior_expectations(roof, runtime="sglang", hardware_kind="gpu").to_dict()
    assert set(data) == {"decode_tok_s", "prefill_tok_s", "ttft_ms", "itl_ms", "model_version", "source", "carried_by"}
    assert data["carried_by"] == "prior"
    assert set(data["decode_tok_s"]) == {"ceiling", "expected", "low", "high"}


def test_band_rejects_disorder() -> None:
    with pytest.raises(ValueError):
        Band(expected=5, low=6, high=7)
    assert Band(expected=5, low=4, high=7).contains(6.5)


@pytest.mark.parametrize("table", [DECODE_EFFICIENCY, PREFILL_EFFICIENCY], ids=["decode", "prefill"])
def test_calibrated_tables_are_sane(table: dict[tuple[str, str], EfficiencyPrior]) -> None:
    assert ("*", "*") in table
    for (family, kind), cell in table.items():
        assert family in {"llamacpp", "mlx", "server", "*"}
        assert kind.split("+")[0] in {"gpu", "cpu", "apple_soc", "accelerator", "*"}
        assert 0 < cell.p10 <= cell.median <= cell.p90, (family, kind)
        assert cell.n >= 1
        if kind.split("+")[0] in {"gpu", "apple_soc"} and not kind.endswith("estimated"):
            assert cell.median < 1.0, (family, kind)  # a datasheet ceiling is an upper bound


def test_efficiency_prior_lookup_order() -> None:
    table = {
        ("*", "*"): EfficiencyPrior(0.5, 0.2, 0.8, 100),
        ("*", "gpu"): EfficiencyPrior(0.6, 0.3, 0.9, 50),
        ("vllm", "gpu"): EfficiencyPrior(0.7, 0.4, 0.9, 20),
    }
    assert efficiency_prior(table, "vllm", "gpu")[1] == ("vllm", "gpu")
    assert efficiency_prior(table, "mlx", "gpu")[1] == ("*", "gpu")
    assert efficiency_prior(table, "vllm", "gpu+estimated")[1] == ("vllm", "gpu")
    assert efficiency_prior(table, "vllm", "cpu")[1] == ("*", "*")
    assert efficiency_prior(table, "vllm", "accelerator")[1] == ("vllm", "gpu")


# ------------------------------------------------------------------ calibration on synthetic rows


def _row(**overrides: str) -> dict[str, str]:
    base = {
        "source_id": "XD_L3_2024",
        "hardware": "RTX 4090",
        "mem_bandwidth_gb_s": "1000.0",
        "peak_fp16_tflops": "100.0",
        "model": "toy",
        "params_b": "8.0",
        "active_params_b": "8.0",
        "quant": "F16",
        "bits_per_weight": "16.0",
        "runtime": "llama.cpp (CUDA)",
        "batch_size": "1.0",
        "prompt_tokens": "",
        "output_tokens": "",
        "prefill_tok_s": "",
        "decode_tok_s": "",
        "ttft_ms": "",
        "itl_ms": "",
        "notes": "",
    }
    base.update(overrides)
    return base


def test_calibrate_by_hand() -> None:
    # Shape-less 8B at 16 bits on 1000 GB/s: decode ceiling 1000e9 / 16e9 = 62.5 tok/s.
    # Prefill ceiling (no attention term without a shape): 100e12 / 16e9 = 6250 tok/s.
    rows = [_row(decode_tok_s=str(62.5 * eff)) for eff in (0.5, 0.6, 0.7, 0.8, 0.9)] + [
        _row(prefill_tok_s=str(6250 * eff), prompt_tokens="4096") for eff in (0.3, 0.4, 0.5)
    ]
    rows += [
        _row(runtime="TensorRT-LLM (PyTorch backend)", decode_tok_s="1000"),  # aggregate: skipped
        _row(runtime="ik_llama.cpp (CPU, iqk_mul_mat)", decode_tok_s="1"),  # fork: skipped
        _row(hardware="4x RTX 4090", decode_tok_s="1"),  # layer split: skipped
        _row(prefill_tok_s="1", prompt_tokens="512", notes="F16 figure looks anomalous in source"),
    ]
    tables = calibrate(rows, lambda _name: None)
    decode = tables["decode"]["llamacpp", "gpu"]
    assert decode.n == 5
    assert decode.median == pytest.approx(0.7)
    assert decode.p10 == pytest.approx(0.54)  # inclusive deciles of 0.5..0.9
    assert decode.p90 == pytest.approx(0.86)
    assert tables["decode"]["*", "*"].n == 5
    prefill = tables["prefill"]["llamacpp", "gpu"]
    assert prefill.n == 3 and prefill.median == pytest.approx(0.4)


def test_calibrate_widens_thin_cells() -> None:
    # A NIM row at concurrency 1 decoding at 0.64 x 62.5 tok/s (ITL = 1000 / 40 = 25 ms).
    rows = [_row(decode_tok_s=str(62.5 * eff)) for eff in (0.2, 0.5, 0.9)] + [
        _row(
            source_id="NIM_L33_70B", runtime="NVIDIA NIM 1.8.0", itl_ms="25.0", prompt_tokens="100", output_tokens="100"
        )
    ]
    tables = calibrate(rows, lambda _name: None)
    server = tables["decode"]["server", "gpu"]
    assert server.n == 1 and server.median == pytest.approx(0.64, rel=0.02)
    pooled = tables["decode"]["*", "gpu"]
    assert (server.p10, server.p90) == (pooled.p10, pooled.p90)


def test_rows_at_an_unknown_batch_only_lower_the_band() -> None:
    # SGLang/vLLM request-rate rows: TPOT at an unknown batch, judged against the batch-1 ceiling.
    nim = _row(
        source_id="NIM_L33_70B", runtime="NVIDIA NIM 1.8.0", itl_ms="25.0", prompt_tokens="100", output_tokens="100"
    )
    rate_rows = [
        _row(source_id="SGLANG_V030", runtime="SGLang v0.3.0", notes=f"median TPOT={tpot} ms") for tpot in (80.0, 160.0)
    ]
    rows = [_row(decode_tok_s=str(62.5 * eff)) for eff in (0.2, 0.5, 0.9)]
    with_rate = calibrate([*rows, nim, *rate_rows], lambda _name: None)["decode"]["server", "gpu"]
    without = calibrate([*rows, nim], lambda _name: None)["decode"]["server", "gpu"]
    assert with_rate.median == without.median  # the unknown-batch rows never move the median
    assert with_rate.n == without.n == 1
    assert with_rate.p10 == pytest.approx(1000 / 160.0 / 62.5)  # ... but they lower the band's low end
    assert with_rate.p90 == without.p90


def test_calibrate_uses_model_shapes_for_kv() -> None:
    shape = ModelSpec("toy", 8.0, 8.0, 32, 4096, 32, 8, 128)
    row = _row(decode_tok_s="50", output_tokens="8192")
    flat = calibrate([row], lambda _name: None)["decode"]["llamacpp", "gpu"].median
    shaped = calibrate([row], lambda _name: shape)["decode"]["llamacpp", "gpu"].median
    # mean context 4096 adds 4096 x 131072 B = 0.537 GB to the 16 GB read per token
    assert flat == pytest.approx(50 / 62.5)
    assert shaped == pytest.approx(50 / (1000e9 / (16e9 + 4096 * 131072)), rel=1e-3)


# ------------------------------------------------------------------ properties


@given(
    bandwidth=st.floats(min_value=20, max_value=10_000),
    tflops=st.one_of(st.none(), st.floats(min_value=1, max_value=5000)),
    kind=st.sampled_from(["gpu", "cpu", "apple_soc", "accelerator"]),
    runtime=st.sampled_from([None, "vllm", "sglang", "tgi", "trtllm", "ollama", "llamacpp", "mlx", "other"]),
    prompt=st.one_of(st.none(), st.integers(min_value=1, max_value=200_000)),
    concurrency=st.integers(min_value=1, max_value=512),
)
def test_bands_are_ordered_and_finite(
    *,
    bandwidth: float,
    tflops: float | None,
    kind: str,
    runtime: str | None,
    prompt: int | None,
    concurrency: int,
) -> None:
    hw = HardwareSpec("h", "h", kind, "v", bandwidth, 80, tflops, tflops)
    roof = analyse(hw, LLAMA_8B, Q4, prompt_tokens=prompt, output_tokens=128, concurrency=concurrency)
    exp = prior_expectations(roof, runtime=runtime, hardware_kind=kind)
    for band in (exp.decode_tok_s, exp.prefill_tok_s, exp.ttft_ms, exp.itl_ms):
        if band is None:
            continue
        assert 0 < band.low <= band.expected <= band.high
        assert all(math.isfinite(v) for v in (band.low, band.expected, band.high))
    assert (exp.ttft_ms is None) == (prompt is None)
