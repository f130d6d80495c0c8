"""DEC001's expected gain: the run's own step physics times the format's kernel efficiency, capped
by the documented figure (issue #13, "the gain varies with batch and generation")."""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest

from advisor.catalog.capabilities import weight_quant_choice
from advisor.catalog.quant_gains import kernel_efficiency
from advisor.rules.engine import Recommendation
from tests.unit.rules.harness import RuleCase, build_case_context, deep_merge, run_case

_BASE: dict[str, Any] = {
    "setup": {"runtime": "vllm", "runtime_version": "0.11.0", "hardware": "nvidia-h100-sxm",
              "model": "meta-llama/Llama-3.1-8B-Instruct", "quantization": "bf16"},
    "workload": {"num_requests": 200, "concurrency": 1, "prompt_tokens_mean": 2000, "output_tokens_mean": 256},
}  # fmt: skip


def _advise(over: dict[str, Any], decode_efficiency: float = 0.86) -> Recommendation:
    """DEC001 on the base run changed by ``over``, its decode at ``decode_efficiency`` of the
    per-stream ceiling (a probe run first finds that ceiling), under an SLO it misses."""
    run = deep_merge(_BASE, over)
    probe = RuleCase("DEC001", "probe", deep_merge(run, {"metrics": {"decode_tok_s": 1.0}}), None, [], {}, None, {})
    ceiling = build_case_context(probe).roofline
    assert ceiling is not None
    decode = ceiling.decode_ceiling_batch_tok_s * decode_efficiency
    case = RuleCase(
        "DEC001", "gain", deep_merge(run, {"metrics": {"decode_tok_s": decode}}),
        {"decode_tok_s_min": decode * 10}, [], {}, None, {},
    )  # fmt: skip
    _ctx, rec = run_case(case)
    assert rec is not None and rec.expected_gain is not None, over
    return rec


def _speedup(rec: Recommendation, metric: str = "expected_speedup") -> float:
    row = next(e for e in rec.evidence if e.metric == metric)
    assert isinstance(row.found, float)
    return row.found


@pytest.mark.parametrize(
    ("runtime", "hardware"),
    [("vllm", "nvidia-h100-sxm"), ("vllm", "nvidia-a10g"), ("tgi", "nvidia-a10g"), ("trtllm", "nvidia-h100-sxm")],
)
def test_the_gain_falls_with_concurrency(runtime: str, hardware: str) -> None:
    gains = [
        _speedup(_advise({"setup": {"runtime": runtime, "hardware": hardware}, "workload": {"concurrency": c}}))
        for c in (1, 8, 32, 64)
    ]
    assert all(a > b for a, b in itertools.pairwise(gains)), gains
    assert gains[0] > 1.4 and gains[-1] < 1.35, gains


@pytest.mark.parametrize("runtime", ["vllm", "llamacpp"])
def test_the_gain_falls_with_context_at_one_stream(runtime: str) -> None:
    setup = {"setup": {"runtime": runtime, "hardware": "nvidia-rtx-4090"}}
    short = _speedup(_advise(deep_merge(setup, {"workload": {"prompt_tokens_mean": 500}})))
    long = _speedup(_advise(deep_merge(setup, {"workload": {"prompt_tokens_mean": 32000}})))
    assert long < short


def test_weight_only_gives_no_prefill_gain_and_w8a8_does() -> None:
    ampere = _advise({"setup": {"hardware": "nvidia-a10g"}})  # FP8 Marlin, W8A16
    assert next(e for e in ampere.evidence if e.metric == "quant_support").found == "fp8 weight-only"
    assert _speedup(ampere, "prefill_speedup") == pytest.approx(1.0)
    hopper = _advise({})  # W8A8 on FP8 tensor cores
    assert next(e for e in hopper.evidence if e.metric == "quant_support").found == "fp8 w8a8"
    assert _speedup(hopper, "prefill_speedup") > 1.9


def _figure(text: str) -> float:
    """The first "N.Nx" figure a source quotes (``~2x`` included)."""
    match = re.search(r"(\d+(?:\.\d+)?)x", text)
    assert match is not None, text
    return float(match.group(1))


@pytest.mark.parametrize(
    ("runtime", "generation", "bits", "figure"),
    [
        ("vllm", "hopper", 8, 1.6),  # vLLM FP8 docs: "up to a 1.6x improvement"
        ("vllm", "ampere", 4, 2.0),  # vllm-project/vllm#2497: "~2x speedup over FP16"
        ("trtllm", "hopper", 8, 1.51),  # TensorRT-LLM quantization blog, batch 1
        ("trtllm", "hopper", 4, 1.61),  # Model Optimizer benchmark.md, INT4 AWQ
    ],
)
def test_each_documented_cap_is_the_figure_its_source_quotes(
    runtime: str, generation: str, bits: int, figure: float
) -> None:
    choice = weight_quant_choice(runtime, generation, bits)
    assert choice is not None
    eff = kernel_efficiency(runtime, choice, "gpu")
    assert eff is not None and eff.basis == "documented"
    assert eff.cap == figure and eff.cap_source is not None and "https://" in eff.cap_source
    assert _figure(eff.cap_source) == figure


def test_the_cap_binds_when_the_physics_exceeds_it() -> None:
    """A format whose kernel efficiency came from its figure never beats it; removing the KV read
    (short prompt) brings the physics to the figure, and the expected gain stays at it."""
    rec = _advise({"workload": {"prompt_tokens_mean": 16, "output_tokens_mean": 16}})
    assert _speedup(rec) <= 1.6 + 1e-9
    assert _speedup(rec) == pytest.approx(1.6, abs=0.01)


def test_learnt_gguf_gain_carries_its_pairs_and_sources() -> None:
    rec = _advise({"setup": {"runtime": "llamacpp", "hardware": "nvidia-rtx-4090"}})
    row = next(e for e in rec.evidence if e.metric == "expected_speedup")
    assert "learnt:" in row.expected and "pairs" in row.expected and "public_runs.csv" in row.expected
    assert "the gain is an estimate" not in row.expected
    assert rec.confidence == pytest.approx(0.75)


def test_an_estimated_gain_says_so_with_less_confidence() -> None:
    rec = _advise({"setup": {"runtime": "sglang", "runtime_version": "0.5.5"}})
    row = next(e for e in rec.evidence if e.metric == "expected_speedup")
    assert "the gain is an estimate" in row.expected
    assert rec.confidence == pytest.approx(0.65)


def test_weight_only_on_a_device_with_fp8_units_keeps_the_16_bit_prefill_rate() -> None:
    """TGI runs fp8 checkpoints as W8A16 FP8 Marlin on Ada (layers/fp8.py) although the L40S has
    FP8 tensor cores: prefill does not speed up."""
    rec = _advise({"setup": {"runtime": "tgi", "runtime_version": "3.0.0", "hardware": "nvidia-l40s"}})
    assert next(e for e in rec.evidence if e.metric == "quant_support").found == "fp8 weight-only"
    assert _speedup(rec, "prefill_speedup") == pytest.approx(1.0)


def test_from_w8a8_fp8_to_weight_only_awq_prefill_slows_down() -> None:
    """FP8 W8A8 on an H100 runs prefill at the FP8 rate; AWQ (W4A16) at the 16-bit one."""
    rec = _advise({"setup": {"quantization": "fp8"}})
    method = next(e for e in rec.evidence if e.metric == "quant_support").found
    assert isinstance(method, str) and method.startswith("awq")
    assert _speedup(rec, "prefill_speedup") == pytest.approx(0.5, rel=0.02)
    assert _speedup(rec) > 1.0


@pytest.mark.parametrize(
    ("runtime", "version", "hardware", "now", "method"),
    [
        ("sglang", "0.5.5", "nvidia-h100-sxm", "bf16", "fp8 w8a8"),
        ("tgi", "3.0.0", "nvidia-h100-sxm", "bf16", "fp8 w8a8"),
        ("tgi", "3.0.0", "nvidia-a10g", "bf16", "fp8 weight-only"),
        ("sglang", "0.5.5", "nvidia-h100-sxm", "fp8", "awq weight-only"),
        ("tgi", "3.0.0", "nvidia-h100-sxm", "fp8", "awq weight-only"),
        ("trtllm", "1.0.0", "nvidia-a100-sxm-80gb", "bf16", "int8_weight_only weight-only"),
        ("trtllm", "1.0.0", "nvidia-b200", "fp8", "nvfp4 w8a8"),
        ("vllm", "0.11.0", "nvidia-b200", "fp8", "nvfp4 w8a8"),
        ("mlx", "0.26.0", "apple-m2-max", "bf16", "mlx weight-only"),
    ],
)
def test_every_estimated_row_says_so_and_costs_confidence(
    runtime: str, version: str, hardware: str, now: str, method: str
) -> None:
    """Each quant_support.toml row still marked "estimate:" (no published or measured figure, no
    same-device pairs): the finding names it an estimate and takes 0.1 off its confidence, while a
    documented row on the same kind of step keeps the full confidence."""
    rec = _advise(
        {"setup": {"runtime": runtime, "runtime_version": version, "hardware": hardware, "quantization": now}}
    )
    assert next(e for e in rec.evidence if e.metric == "quant_support").found == method
    row = next(e for e in rec.evidence if e.metric == "expected_speedup")
    assert "the gain is an estimate" in row.expected
    assert "estimate:" in row.expected  # the row's own reason, with its sources
    full = 0.75 if now == "bf16" else 0.55  # the 8-bit and the 4-bit step's confidence
    assert rec.confidence == pytest.approx(full - 0.1)


@pytest.mark.parametrize(("runtime", "hardware"), [("vllm", "nvidia-h100-sxm"), ("trtllm", "nvidia-h100-sxm")])
def test_a_documented_row_keeps_full_confidence(runtime: str, hardware: str) -> None:
    rec = _advise({"setup": {"runtime": runtime, "runtime_version": "0.11.0", "hardware": hardware}})
    row = next(e for e in rec.evidence if e.metric == "expected_speedup")
    assert "the gain is an estimate" not in row.expected
    assert rec.confidence == pytest.approx(0.75)
