"""Physical guarantees of every expectation: bands never past their bound, decode monotone in
bandwidth and bits per weight, and a kind of device the model never saw answered by a baseline."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.catalog import Catalog
from advisor.ml.dataset import Observation
from advisor.ml.expectations import Band, Expectations, physical_band
from advisor.ml.features import FeatureInput, feature_row
from advisor.ml.model import FALLBACK_SHIFT, FALLBACK_WIDENING, Fallback
from advisor.ml.prior import ESTIMATED_WIDENING, PREFILL_EFFICIENCY, attention_factor, prior_expectations
from advisor.ml.store import dumps, loads
from advisor.ml.train import FitResult, build_training_sets, hardware_families, losing_groupings, weighted_median
from advisor.physics import HardwareSpec, QuantSpec, Roofline, analyse

CATALOG = Catalog.default()
LLAMA_8B, _ = CATALOG.resolve_model("llama-3.1-8b")
QWEN_MOE, _ = CATALOG.resolve_model("qwen3-30b-a3b")
MODELS = {"llama-3.1-8b": LLAMA_8B, "qwen3-30b-a3b": QWEN_MOE}
RUNTIMES = ("vllm", "llamacpp", "ollama", "mlx", "sglang", None)
KINDS = ("gpu", "apple_soc", "cpu")

finite = st.floats(min_value=1e-3, max_value=1e6, allow_nan=False, allow_infinity=False)


@given(expected=finite, low=finite, high=finite, bound=finite, rate=st.booleans())
def test_physical_band_orders_and_respects_its_bound(
    expected: float, low: float, high: float, bound: float, rate: bool
) -> None:
    band = physical_band(expected, low, high, bound, rate=rate)
    assert band.low <= band.expected <= band.high
    if rate:
        assert band.high <= bound
    else:
        assert band.low >= bound
    assert band.ceiling == bound


def test_physical_band_moves_values_onto_the_bound() -> None:
    # A rate band 80-120-150 under a ceiling of 100: high and expected land on 100, low stays.
    assert physical_band(120.0, 80.0, 150.0, 100.0, rate=True) == Band(100.0, 80.0, 100.0, 100.0)
    # A latency band 5-8-20 over a floor of 10: low and expected land on 10.
    assert physical_band(8.0, 5.0, 20.0, 10.0, rate=False) == Band(10.0, 10.0, 20.0, 10.0)


def _check(exp: Expectations, roof: Roofline) -> None:
    for rate in (exp.decode_tok_s, exp.prefill_tok_s):
        if rate is not None:
            assert rate.ceiling is not None
            assert 0 < rate.low <= rate.expected <= rate.high <= rate.ceiling * (1 + 1e-12)
    for latency in (exp.itl_ms, exp.ttft_ms, exp.ttft_p99_ms, exp.itl_p99_ms):
        if latency is not None and latency.ceiling is not None:
            assert latency.ceiling * (1 - 1e-12) <= latency.low <= latency.expected <= latency.high


setups = st.fixed_dictionaries(
    {
        "bandwidth": st.floats(min_value=50.0, max_value=8000.0),
        "tflops": st.one_of(st.none(), st.floats(min_value=1.0, max_value=2500.0)),
        "kind": st.sampled_from(KINDS),
        "vendor": st.sampled_from(("NVIDIA", "AMD", "Apple", "Intel")),
        "bits": st.floats(min_value=2.5, max_value=16.0),
        "model": st.sampled_from(sorted(MODELS)),
        "runtime": st.sampled_from(RUNTIMES),
        "prompt": st.integers(min_value=1, max_value=65_536),
        "depth": st.integers(min_value=0, max_value=65_536),
        "concurrency": st.integers(min_value=1, max_value=256),
    }
)


def _setup(s: dict[str, object]) -> tuple[HardwareSpec, QuantSpec, Roofline]:
    tflops = s["tflops"]
    hw = HardwareSpec("h", "h", s["kind"], s["vendor"], s["bandwidth"], 4096.0, tflops, tflops)  # type: ignore[arg-type]
    quant = QuantSpec("q", "q", s["bits"], "gguf")  # type: ignore[arg-type]
    roof = analyse(
        hw,
        MODELS[str(s["model"])],
        quant,
        prompt_tokens=s["prompt"],  # type: ignore[arg-type]
        kv_depth_tokens=s["depth"],  # type: ignore[arg-type]
        concurrency=s["concurrency"],  # type: ignore[arg-type]
    )
    return hw, quant, roof


@settings(max_examples=150, deadline=None)
@given(s=setups)
def test_the_prior_never_exceeds_its_ceilings(s: dict[str, object]) -> None:
    hw, _, roof = _setup(s)
    exp = prior_expectations(roof, runtime=s["runtime"], hardware_kind=hw.kind)  # type: ignore[arg-type]
    _check(exp, roof)
    assert exp.carried_by == "prior"


@settings(max_examples=150, deadline=None)
@given(s=setups)
def test_the_fitted_model_never_exceeds_its_ceilings(public_fit: FitResult, s: dict[str, object]) -> None:
    hw, quant, roof = _setup(s)
    model = MODELS[str(s["model"])]
    exp = public_fit.model(roof, runtime=s["runtime"], hardware_kind=hw.kind, hardware=hw, model=model, quant=quant)  # type: ignore[arg-type]
    _check(exp, roof)


def _decode(fitted: FitResult, s: dict[str, object]) -> float:
    hw, quant, roof = _setup(s)
    exp = fitted.model(
        roof,
        runtime=s["runtime"],  # type: ignore[arg-type]
        hardware_kind=hw.kind,
        hardware=hw,
        model=MODELS[str(s["model"])],
        quant=quant,
    )
    assert exp.decode_tok_s is not None
    return exp.decode_tok_s.expected


@settings(max_examples=120, deadline=None)
@given(s=setups, factor=st.floats(min_value=1.0, max_value=8.0))
def test_more_bandwidth_never_lowers_expected_decode(
    public_fit: FitResult, s: dict[str, object], factor: float
) -> None:
    faster = {**s, "bandwidth": float(s["bandwidth"]) * factor}  # type: ignore[arg-type]
    assert _decode(public_fit, faster) >= _decode(public_fit, s) * (1 - 1e-9)


@settings(max_examples=120, deadline=None)
@given(s=setups, extra=st.floats(min_value=0.0, max_value=8.0))
def test_more_bits_per_weight_never_raises_expected_decode(
    public_fit: FitResult, s: dict[str, object], extra: float
) -> None:
    heavier = {**s, "bits": float(s["bits"]) + extra}  # type: ignore[arg-type]
    assert _decode(public_fit, heavier) <= _decode(public_fit, s) * (1 + 1e-9)


def test_an_unseen_kind_of_device_is_answered_by_a_baseline(public_fit: FitResult) -> None:
    # The published runs have no accelerator (TPU, Gaudi, Trainium) rows: the decode head answers
    # those with its fallback, says so, and its band is the fallback's (wider than the gpu band).
    trainium = CATALOG.resolve_hardware("aws-trainium2")
    roof = analyse(trainium, LLAMA_8B, CATALOG.resolve_quantization("bf16"), prompt_tokens=512)
    exp = public_fit.model(roof, runtime="vllm", hardware_kind="accelerator", hardware=trainium, model=LLAMA_8B)
    head = public_fit.model.heads["decode_tok_s"]
    # Which baseline answers (the constant or the physics-shaped base alone) is chosen by the
    # fit on the rows whose family their CV fold lacked; on the published runs it is the base
    # since the decode base carries the CPU unpacking cost (docs/model.md).
    assert head.fallback is not None and head.fallback.mode in ("constant", "base")
    assert not any(family.startswith("accelerator/") for family in head.fallback.families)
    assert exp.carried_by == "baseline" and "baseline" in exp.source
    assert exp.decode_tok_s is not None
    low, _ = head.fallback.interval
    ratio = head.fallback.constant
    if head.fallback.mode == "base":
        assert head.base is not None
        row = feature_row(FeatureInput(roof, "vllm", "accelerator", trainium, LLAMA_8B, None))
        ratio = head.base.predict_row(row)
    ceiling = roof.decode_ceiling_batch_tok_s
    assert exp.decode_tok_s.expected == pytest.approx(min(ceiling * math.exp(ratio), ceiling))
    assert exp.decode_tok_s.low == pytest.approx(min(ceiling * math.exp(ratio + min(low, 0.0)), ceiling))
    gpu = CATALOG.resolve_hardware("nvidia-h100-sxm")
    seen = public_fit.model(
        analyse(gpu, LLAMA_8B, CATALOG.resolve_quantization("bf16"), prompt_tokens=512),
        runtime="vllm",
        hardware_kind="gpu",
        hardware=gpu,
        model=LLAMA_8B,
    )
    assert seen.carried_by == "model"


def test_a_runtime_family_seen_in_one_source_keeps_its_answer_but_gets_the_unseen_kind_band(
    public_fit: FitResult,
) -> None:
    """The published runs measure GPU servers in one source (NIM's rows): a vLLM prediction on an
    H100 is the model's, its band at least the unseen kind's, and it says so. llama.cpp on a GPU
    (two sources and more) keeps the GPU kind's conformal band."""
    head = public_fit.model.heads["decode_tok_s"]
    assert head.fallback is not None and head.fallback.cells is not None
    assert head.fallback.cells["gpu/server"] == 1 and head.fallback.thin("gpu/server") == 1
    assert head.fallback.thin("gpu/llamacpp") is None
    assert head.fallback.thin("gpu/mlx") == 0  # never measured there
    gpu = CATALOG.resolve_hardware("nvidia-h100-sxm")
    roof = analyse(gpu, LLAMA_8B, CATALOG.resolve_quantization("bf16"), prompt_tokens=512)
    kwargs = {"hardware_kind": "gpu", "hardware": gpu, "model": LLAMA_8B}
    server = public_fit.model(roof, runtime="vllm", **kwargs)
    local = public_fit.model(roof, runtime="llamacpp", **kwargs)
    assert server.carried_by == local.carried_by == "model"
    assert "measured on this kind of device in 1 source(s)" in server.source
    assert "source(s)" not in local.source
    fb_low, fb_high = head.fallback.interval
    gpu_low, gpu_high = head.offsets("gpu")
    assert (fb_low, fb_high) != (gpu_low, gpu_high)
    for exp, (low, high) in ((server, (min(fb_low, gpu_low), max(fb_high, gpu_high))), (local, (gpu_low, gpu_high))):
        band = exp.decode_tok_s
        assert band is not None
        assert band.low == pytest.approx(band.expected * math.exp(low))
        assert band.high == pytest.approx(min(band.expected * math.exp(high), roof.decode_ceiling_batch_tok_s))
    # An artifact fitted before the cells were recorded judges nothing thin.
    old = Fallback.from_dict({k: v for k, v in head.fallback.to_dict().items() if k != "cells"})
    assert old.cells is None and old.thin("gpu/server") is None


def test_the_fallback_survives_the_artifact(public_fit: FitResult) -> None:
    loaded = loads(dumps(public_fit.model, version="v-test", meta={}))
    for target, head in public_fit.model.heads.items():
        assert loaded.heads[target].fallback == head.fallback
    assert Fallback.from_dict(Fallback(0.1, (-0.2, 0.3), frozenset({"gpu"}), "base").to_dict()).mode == "base"
    with pytest.raises(ValueError, match="unknown fallback mode"):
        Fallback.from_dict({"constant": 0.0, "interval": [0, 0], "families": [], "mode": "trees"})


def test_fallback_is_the_weighted_median_with_a_shifted_band(
    public_fit: FitResult, public_observations: list[Observation]
) -> None:
    ts = build_training_sets(public_observations)["decode_tok_s"]
    head = public_fit.model.heads["decode_tok_s"]
    assert head.fallback is not None
    constant = weighted_median(ts.y, ts.weight)
    answer: object = constant
    if head.fallback.mode == "base":
        # The base alone answers; its band is the base's training residuals, moved out.
        assert head.base is not None
        answer = head.base.predict_frame(ts.frame)
    low, high = np.quantile(ts.y - answer, [0.1, 0.9])  # type: ignore[operator]
    assert head.fallback.constant == pytest.approx(constant)
    # Moved out on each side by the shift the leave-one-family-out rows chose (conformalized, not
    # the a priori log 1.5): an unseen family's own efficiency is an offset in log space.
    shift = public_fit.cv_metrics["targets"]["decode_tok_s"]["fallback_shift"]
    assert 0.0 < shift <= 2.0 and shift != pytest.approx(FALLBACK_SHIFT)
    assert head.fallback.interval == pytest.approx((min(low, 0.0) - shift, max(high, 0.0) + shift))
    assert head.fallback.families == frozenset(np.unique(hardware_families(ts)).tolist())
    assert head.fallback.families == {"apple_soc/apple", "cpu/amd", "cpu/apple", "gpu/nvidia"}


def test_every_grouping_beats_the_better_baseline_on_the_published_runs(public_fit: FitResult) -> None:
    assert losing_groupings(public_fit.cv_metrics) == []
    for target in ("decode_tok_s", "prefill_tok_s"):
        assert set(public_fit.cv_metrics["targets"][target]["schemes"]) == {"hardware", "source", "family"}


def test_losing_groupings_names_the_grouping_and_the_better_baseline() -> None:
    metrics = {
        "targets": {
            "prefill_tok_s": {
                "schemes": {
                    "source": {"mdape": {"model": 0.52, "roofline": 0.43, "constant": 0.40}},
                    "hardware": {"mdape": {"model": 0.20, "roofline": 0.43, "constant": 0.40}},
                }
            },
            "decode_tok_s": {
                "schemes": {
                    "family": {"mdape": {"model": 0.30, "roofline": 0.30, "constant": 0.35}},  # a tie
                    "source": {"mdape": {"model": 0.31, "roofline": 0.30, "constant": 0.35}},
                }
            },
        }
    }
    assert losing_groupings(metrics) == [
        "decode_tok_s by source: model 31.0% vs roofline 30.0%",
        "prefill_tok_s by source: model 52.0% vs roofline × constant 40.0%",
    ]


@pytest.mark.parametrize("scheme", ["hardware", "source"])
def test_bands_cover_80_percent_on_held_out_groupings(public_fit: FitResult, scheme: str) -> None:
    # The deployed band (pooled conformal over device and source groupings) on each grouping's
    # out-of-fold residuals: 80 % ± 5 %, or up to 92 % (the issue's acceptable range).
    for target in ("decode_tok_s", "prefill_tok_s"):
        coverage = public_fit.cv_metrics["targets"][target]["schemes"][scheme]["coverage_deployed"]
        assert 0.75 <= coverage <= 0.92, (target, scheme, coverage)


@pytest.mark.parametrize("scheme", ["hardware", "source", "family"])
def test_every_grouping_is_covered_within_the_issue_range_one_level_out(public_fit: FitResult, scheme: str) -> None:
    # The construction judged one level out (each fold's band chosen without its rows), unseen
    # families by the fallback's shifted band: inside the issue's 70-92 % on every grouping (with
    # a widening factor instead of the shift, prefill held out by family covered 66 %).
    for target in ("decode_tok_s", "prefill_tok_s"):
        coverage = public_fit.cv_metrics["targets"][target]["schemes"][scheme]["coverage"]
        assert 0.70 <= coverage <= 0.92, (target, scheme, coverage)


def test_a_device_known_by_its_bandwidth_alone_gets_a_wider_prefill_band(public_fit: FitResult) -> None:
    # An AMD APU given inline with bandwidth only: compute is the conservative stand-in (100 FLOP/B,
    # not raised to the datacenter median) and the prefill band's low side is 1.5× wider in log.
    apu = HardwareSpec("inline", "APU", "gpu", "AMD", 256.0, 128.0)
    quant = CATALOG.resolve_quantization("Q4_K_M")
    roof = analyse(apu, LLAMA_8B, quant, prompt_tokens=512)
    assert roof.prefill_tflops_estimated and roof.prefill_tflops == pytest.approx(25.6)
    head = public_fit.model.heads["prefill_tok_s"]
    exp = public_fit.model(roof, runtime="llamacpp", hardware_kind="gpu", hardware=apu, model=LLAMA_8B, quant=quant)
    assert exp.prefill_tok_s is not None
    # No AMD GPU in the published runs: the prefill head answers with its fallback (the base alone),
    # and the compute stand-in widens that band by 1.5 again.
    assert head.fallback is not None and head.fallback.mode == "base" and head.base is not None
    assert exp.carried_by == "baseline"
    row = feature_row(FeatureInput(roof, "llamacpp", "gpu", apu, LLAMA_8B, quant))
    ratio = head.base.predict_row(row)
    ceiling = roof.prefill_ceiling_tok_s
    assert ceiling is not None
    assert exp.prefill_tok_s.expected == pytest.approx(min(ceiling * math.exp(ratio), ceiling))
    low = min(head.fallback.interval[0], 0.0) * FALLBACK_WIDENING
    assert exp.prefill_tok_s.low == pytest.approx(ceiling * math.exp(ratio + low))
    prior = prior_expectations(roof, runtime="llamacpp", hardware_kind="gpu")
    cell = PREFILL_EFFICIENCY["llamacpp", "gpu"]
    assert prior.prefill_tok_s is not None and roof.prefill_ceiling_tok_s is not None
    # The prior's matmul efficiency, less the (small, 512-token) attention share at its slowdown.
    assert prior.prefill_tok_s.expected == pytest.approx(
        roof.prefill_ceiling_tok_s * cell.median * attention_factor(roof)
    )
    assert prior.prefill_tok_s.low == pytest.approx(
        prior.prefill_tok_s.expected * (cell.p10 / cell.median) ** ESTIMATED_WIDENING
    )


@pytest.mark.parametrize("quant_name", ["f16", "Q4_K_M"])
def test_llamacpp_on_an_h200_decodes_at_the_h100s_issue_rate(public_fit: FitResult, quant_name: str) -> None:
    # The H200 is the H100 SXM's GH100 die (132 SMs, 1.98 GHz) with HBM3e at 4.8 TB/s: llama.cpp's
    # issue-bound decode kernels reach the same effective bandwidth on both (hardware_sm.csv), so
    # the H200's 43 % higher bandwidth ceiling does not make it decode faster. Without its SM
    # row it was expected 1.7x faster than the H100 at F16.
    quant = CATALOG.resolve_quantization(quant_name)
    rates = {}
    for device in ("nvidia-h100-sxm", "nvidia-h200-sxm"):
        hw = CATALOG.resolve_hardware(device)
        assert hw.sm_count == 132 and hw.boost_clock_mhz == 1980.0
        roof = analyse(hw, LLAMA_8B, quant)
        band = public_fit.model(roof, runtime="llamacpp", hardware_kind="gpu", hardware=hw, model=LLAMA_8B, quant=quant)
        assert band.decode_tok_s is not None
        rates[device] = (band.decode_tok_s.expected, roof.decode_ceiling_tok_s)
    (h100, h100_ceiling), (h200, h200_ceiling) = rates["nvidia-h100-sxm"], rates["nvidia-h200-sxm"]
    assert h200_ceiling > 1.4 * h100_ceiling
    assert h200 == pytest.approx(h100, rel=0.02)
