"""The kernel efficiencies learnt from the reference dataset's same-device pairs, and the step
physics that turns them into a gain (advisor/catalog/quant_gains.py)."""

from __future__ import annotations

import csv
import itertools
from importlib import resources

import pytest

from advisor.catalog import Catalog
from advisor.catalog.capabilities import weight_quant_choice
from advisor.catalog.quant_gains import (
    LEARNT_PAIRS,
    decode_step_gain,
    gain_model,
    kernel_efficiency,
    learnt_efficiencies,
    prefill_step_gain,
)
from advisor.physics import HardwareSpec, ModelSpec, QuantSpec, analyse


def test_every_learnt_key_has_pairs_with_sources_and_a_pooled_row() -> None:
    table = learnt_efficiencies()
    for key in LEARNT_PAIRS:
        pooled = table[key, "*"]
        assert pooled.pairs >= 1 and pooled.sources and pooled.devices >= 1
        assert 0.3 < pooled.low <= pooled.efficiency <= pooled.high < 1.2
        assert "public_runs.csv" in pooled.describe()
    # The GGUF ladders have many pairs: the CUDA Q4_K_M rows of XD_L3_2024, the Apple Q8_0 rows of LCPP_4167.
    assert table["q4_k_m", "gpu"].pairs >= 40 and table["q4_k_m", "gpu"].sources == ("XD_L3_2024",)
    assert table["q8_0", "apple_soc"].pairs >= 20 and table["q8_0", "apple_soc"].sources == ("LCPP_4167",)


def test_a_pair_by_hand_rtx_4090_q4_k_m_tg512() -> None:
    """XD_L3_2024 RTX 4090, Llama 3 8B, tg512 from an empty prompt: F16 54.8 vs Q4_K_M 130.6 tok/s
    (rows read from the CSV). k = W_q / ((W_16 + kv) / gain − kv), kv the F16 cache at 256 tokens."""
    text = resources.files("advisor.ml").joinpath("data/public_runs.csv").read_text(encoding="utf-8")
    rows = [
        r for r in csv.DictReader(text.splitlines())
        if r["source_id"] == "XD_L3_2024" and r["hardware"] == "RTX 4090" and r["model"] == "Llama 3 8B"
        and r["output_tokens"] == "512.0"
    ]  # fmt: skip
    by_quant = {r["quant"]: r for r in rows}
    gain = float(by_quant["Q4_K_M"]["decode_tok_s"]) / float(by_quant["F16"]["decode_tok_s"])
    params = float(by_quant["F16"]["active_params_b"]) * 1e9
    w16, wq = params * 2.0, params * float(by_quant["Q4_K_M"]["bits_per_weight"]) / 8
    kv = 2 * 32 * 8 * 128 * 2 * 256  # layers x KV heads x head dim x K and V x 2 bytes x mean context
    k = wq / ((w16 + kv) / gain - kv)
    assert k == pytest.approx(0.724, abs=0.005)
    table = learnt_efficiencies()["q4_k_m", "gpu"]
    assert table.low <= k <= table.high


def test_learnt_rows_are_used_for_gguf_and_the_pooled_row_for_an_unpaired_kind() -> None:
    q8 = weight_quant_choice("llamacpp", "ampere", 8)
    assert q8 is not None and q8.key == "q8_0"
    cuda = kernel_efficiency("llamacpp", q8, "gpu")  # no CUDA Q8_0/F16 pair: every kind pooled
    apple = kernel_efficiency("llamacpp", q8, "apple_soc")
    assert cuda is not None and apple is not None and cuda.basis == apple.basis == "learnt"
    assert cuda.efficiency == learnt_efficiencies()["q8_0", "*"].efficiency
    assert apple.efficiency == learnt_efficiencies()["q8_0", "apple_soc"].efficiency
    ollama = kernel_efficiency("ollama", q8, "apple_soc")
    assert ollama is not None and ollama.efficiency == apple.efficiency  # Ollama runs llama.cpp's kernels


def test_documented_efficiency_is_the_figure_over_the_bytes_ratio() -> None:
    fp8 = weight_quant_choice("vllm", "hopper", 8)
    assert fp8 is not None
    eff = kernel_efficiency("vllm", fp8, "gpu")
    assert eff is not None and eff.basis == "documented" and eff.efficiency == pytest.approx(1.6 / 2.0)


def _setup() -> tuple[HardwareSpec, ModelSpec, QuantSpec, QuantSpec]:
    cat = Catalog.default()
    model, _ = cat.resolve_model("meta-llama/Llama-3.1-8B-Instruct")
    return (
        cat.resolve_hardware("nvidia-h100-sxm"),
        model,
        cat.resolve_quantization("bf16"),
        cat.resolve_quantization("fp8"),
    )


@pytest.mark.parametrize("prompt", [128, 4000])
def test_step_gain_falls_with_concurrency_and_is_the_efficiency_ratio_at_batch_one(prompt: int) -> None:
    hw, model, bf16, fp8 = _setup()
    gains = []
    for c in (1, 4, 16, 64, 256):
        cur = analyse(hw, model, bf16, prompt_tokens=prompt, output_tokens=256, concurrency=c)
        new = analyse(hw, model, fp8, prompt_tokens=prompt, output_tokens=256, concurrency=c)
        gains.append(decode_step_gain(cur, model, bf16, fp8, k_now=1.0, k_new=0.8, new_tflops=new.prefill_tflops))
    assert all(a > b for a, b in itertools.pairwise(gains)), gains
    assert gains[0] <= 1.6 and gains[-1] >= 1.0


def test_weight_only_prefill_gains_nothing_when_compute_bound() -> None:
    hw, model, bf16, fp8 = _setup()
    cur = analyse(hw, model, bf16, prompt_tokens=4000)
    new = analyse(hw, model, fp8, prompt_tokens=4000)
    assert prefill_step_gain(cur, new, new_tflops=cur.prefill_tflops) == pytest.approx(1.0)  # W8A16
    assert prefill_step_gain(cur, new, new_tflops=new.prefill_tflops) == pytest.approx(2.0, rel=0.01)  # W8A8


def test_from_8_bits_the_cap_is_the_ratio_of_the_documented_figures() -> None:
    cat = Catalog.default()
    awq = weight_quant_choice("vllm", "ampere", 4)
    assert awq is not None
    model = gain_model("vllm", "ampere", cat.resolve_quantization("fp8"), awq, "gpu", 4.15625)
    assert model is not None and model.cap == pytest.approx(2.0 / 1.6)
    assert model.k_now == pytest.approx(0.8) and model.k_new == pytest.approx(2.0 / (16 / 4.15625))
