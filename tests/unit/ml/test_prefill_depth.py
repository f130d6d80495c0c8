"""Prefill with two efficiencies in the fitted base and the prior, and CPU compute for the CPU rows
of the published runs (issue #17 items 2 and 3)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from advisor.catalog import Catalog
from advisor.ml.base import PhysicalBase, fit_base
from advisor.ml.dataset import Observation, catalog_hardware_lookup
from advisor.ml.features import FEATURES, FeatureInput, feature_frame, feature_row
from advisor.ml.prior import PREFILL_ATTENTION_SLOWDOWN, attention_factor, attention_slowdown, prior_expectations
from advisor.physics import HardwareSpec, ModelSpec, QuantSpec, analyse

SPARK = HardwareSpec("nvidia-dgx-spark-gb10", "DGX Spark", "gpu", "NVIDIA", 273, 128, 125.0, 125.0)
LLAMA_8B = ModelSpec("llama-3.1-8b", 8.03, 8.03, 32, 4096, 32, 8, 128)
Q8_0 = QuantSpec("gguf-q8_0", "Q8_0", 8.5, "gguf")


def _frame(kinds: np.ndarray, share: np.ndarray):  # type: ignore[no-untyped-def]
    frame = feature_frame([]).reindex(range(len(kinds)))
    frame["hardware_kind"] = kinds.astype(object)
    frame["runtime_family"] = "llamacpp"
    frame["prefill_attention_share"] = share
    frame["log_decode_ceiling"] = 0.0
    frame["log_concurrency"] = 0.0
    frame["tflops_estimated"] = 0.0
    return frame


def test_prefill_law_recovers_both_efficiencies() -> None:
    # measured / ceiling = 1 / ((1 − a)/e_m + a/e_a): matmuls at 0.6 on GPUs and 0.3 on CPUs,
    # attention 3× slower per FLOP on both (e_a = e_m / 3).
    rng = np.random.default_rng(1)
    n = 300
    kinds = rng.choice(["gpu", "cpu"], size=n)
    share = rng.uniform(0.0, 0.6, size=n)
    e_m = np.where(kinds == "gpu", 0.6, 0.3)
    y = np.log(1.0 / ((1 - share) / e_m + share / (e_m / 3.0))) + rng.normal(0, 0.01, size=n)
    frame = _frame(kinds, share)
    base = fit_base("prefill_tok_s", frame, y, np.ones(n))
    assert base.shape == "prefill"
    assert math.exp(base.params[1]) == pytest.approx(3.0, rel=0.05)
    np.testing.assert_allclose(base.predict_frame(frame), y, atol=0.04)
    rows = list(frame.itertuples(index=False, name=None))
    np.testing.assert_allclose(base.predict_rows(rows), base.predict_frame(frame), rtol=1e-12)
    assert PhysicalBase.from_dict(base.to_dict()) == base
    # Depth lowers the prediction through the attention term alone: at a = 0.5 a GPU row keeps
    # 1 / (0.5 + 0.5 × 3) = 1/2 of its depth-0 efficiency.
    shallow, deep = base.predict_frame(_frame(np.array(["gpu", "gpu"]), np.array([0.0, 0.5])))
    assert deep - shallow == pytest.approx(math.log(0.5), abs=0.03)


def test_attention_share_is_a_feature_and_zero_without_a_prompt() -> None:
    index = FEATURES.index("prefill_attention_share")
    # Appended after the columns artifacts fitted before it have (older artifacts keep their
    # column positions); only later additions follow it.
    assert FEATURES[index + 1 :] == ("log_layers", "quant_kernel", "log_issue_rate")
    deep = analyse(SPARK, LLAMA_8B, Q8_0, prompt_tokens=2048, kv_depth_tokens=32768)
    row = feature_row(FeatureInput(deep, "llamacpp", "gpu", SPARK, LLAMA_8B, Q8_0))
    assert row[index] == pytest.approx(deep.prefill_attention_share)
    bare = feature_row(FeatureInput(analyse(SPARK, LLAMA_8B, Q8_0), "llamacpp", "gpu"))
    assert bare[index] == 0.0


def test_kv_read_share_does_not_depend_on_which_resource_binds() -> None:
    # The same workload on a device whose decode is bandwidth-bound and on one where doubling the
    # bandwidth makes it compute-bound: the KV share of the bytes is a property of the bytes.
    slow = HardwareSpec("c", "c", "cpu", "AMD", 405.0, 4096.0, 2.0, 2.0)
    fast = HardwareSpec("c", "c", "cpu", "AMD", 810.0, 4096.0, 2.0, 2.0)
    quant = QuantSpec("q", "q", 4.5, "gguf")
    a = analyse(slow, LLAMA_8B, quant, prompt_tokens=512)
    b = analyse(fast, LLAMA_8B, quant, prompt_tokens=512)
    assert (a.decode_bound, b.decode_bound) == ("bandwidth", "compute")
    index = FEATURES.index("kv_read_share")
    share_a = feature_row(FeatureInput(a, "llamacpp", "cpu", slow, LLAMA_8B, quant))[index]
    share_b = feature_row(FeatureInput(b, "llamacpp", "cpu", fast, LLAMA_8B, quant))[index]
    kv = a.decode_kv_bytes_per_sequence
    assert kv is not None and share_a == pytest.approx(kv / (a.active_weight_bytes + kv)) == share_b


def test_prior_prefill_falls_with_depth_by_the_calibrated_slowdown() -> None:
    assert 1.5 < PREFILL_ATTENTION_SLOWDOWN < 10
    depths = [0, 4096, 16384, 65536]
    rooflines = [analyse(SPARK, LLAMA_8B, Q8_0, prompt_tokens=2048, kv_depth_tokens=d) for d in depths]
    expected = [prior_expectations(r, runtime="llamacpp", hardware_kind="gpu").prefill_tok_s for r in rooflines]
    values = [band.expected for band in expected if band is not None]
    assert len(values) == 4 and values == sorted(values, reverse=True)
    for roof, value in zip(rooflines, values, strict=True):
        share = roof.prefill_attention_share or 0.0
        assert attention_factor(roof) == pytest.approx(1 / (1 + share * (PREFILL_ATTENTION_SLOWDOWN - 1)))
        assert roof.prefill_ceiling_tok_s is not None and value <= roof.prefill_ceiling_tok_s
    # Falls faster than the ceiling: the attention runs at a smaller share of peak than the matmuls.
    ceilings = [r.prefill_ceiling_tok_s or 0.0 for r in rooflines]
    assert values[-1] / values[0] < ceilings[-1] / ceilings[0]


def test_attention_slowdown_recovers_a_known_ratio() -> None:
    rng = np.random.default_rng(2)
    cells = {}
    for key, e_m in ((("llamacpp", "gpu"), 0.5), (("llamacpp", "apple_soc"), 0.7)):
        shares = rng.uniform(0.0, 0.5, size=60)
        cells[key] = [(float(e_m / (1 + a * (4.0 - 1))), float(a)) for a in shares]
    assert attention_slowdown(cells) == pytest.approx(4.0, rel=0.02)
    assert attention_slowdown({("llamacpp", "gpu"): [(0.5, 0.0), (0.4, 0.0)]}) == 1.0


def test_the_published_cpu_rows_get_a_cpus_compute(public_observations: list[Observation]) -> None:
    # "Apple M2 Max (CPU only, 8 P-cores)" used to resolve to the M2 Max *GPU* (13.6 TFLOPS), which
    # put CPU prefill 19x off; the catalog now has the CPU cores (and the Ryzen 9 7950X), with
    # the share of the SoC's bandwidth the CPU cores can draw.
    lookup = catalog_hardware_lookup(Catalog.default())
    m2_cpu = lookup("Apple M2 Max (CPU only, 8 P-cores)")
    ryzen = lookup("AMD Ryzen 9 7950X (CPU)")
    assert m2_cpu is not None and (m2_cpu.id, m2_cpu.kind, m2_cpu.fp16_tflops) == ("apple-m2-max-cpu", "cpu", 1.8)
    assert ryzen is not None and (ryzen.id, ryzen.kind, ryzen.fp16_tflops) == ("amd-ryzen-9-7950x", "cpu", 2.3)
    gpu = lookup("Apple M2 Max")
    assert gpu is not None and gpu.id == "apple-m2-max" and gpu.kind == "apple_soc"
    cpu_rows = [o for o in public_observations if o.source == "IK_CPU_2024" and o.target == "prefill_tok_s"]
    assert len(cpu_rows) == 42
    assert {o.hardware_group for o in cpu_rows} == {"apple-m2-max-cpu", "amd-ryzen-9-7950x"}
    assert {o.roofline.prefill_tflops for o in cpu_rows} == {1.8, 2.3}
    # The rows state the M2 Max SoC's 400 GB/s; its CPU cores are judged against their own share.
    assert {o.hardware.id: o.hardware.mem_bandwidth_gb_s for o in cpu_rows} == {
        "apple-m2-max-cpu": 204.8,
        "amd-ryzen-9-7950x": 83.2,
    }
    # llama.cpp's CPU prefill reaches a plausible share of those figures (F16 pp512: ~0.7).
    for o in cpu_rows:
        assert o.roofline.prefill_ceiling_tok_s is not None
        assert 0.05 < o.measured / o.roofline.prefill_ceiling_tok_s < 1.0
