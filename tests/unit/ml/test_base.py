"""The physics-shaped base: its laws, its fit, its storage, and that rows and frames agree."""

from __future__ import annotations

import math

import numpy as np
import pytest

from advisor.ml.base import PhysicalBase, compute_correction, fit_base
from advisor.ml.dataset import Observation
from advisor.ml.features import feature_frame
from advisor.ml.train import build_training_sets


def test_compute_correction_raises_an_estimated_gpu_to_the_typical_ratio() -> None:
    # An NVIDIA GPU known by its bandwidth only (273 GB/s, stand-in 27.3 TFLOPS = 100 FLOP/B).
    assert compute_correction("gpu", 1.0, math.log(27.3), math.log(273.0), "nvidia") == pytest.approx(math.log(2.05))
    assert compute_correction("gpu", 0.0, math.log(27.3), math.log(273.0), "nvidia") == 0.0  # published: trusted
    assert compute_correction("apple_soc", 1.0, math.log(24.0), math.log(800.0), "apple") == 0.0  # no typical ratio
    assert compute_correction("gpu", 1.0, math.log(300.0), math.log(1000.0), "nvidia") == 0.0  # never lowers
    assert compute_correction(None, 1.0, math.log(27.3), math.log(273.0), "nvidia") == 0.0
    # An AMD APU, an Intel iGPU or an unknown vendor keeps the conservative stand-in.
    assert compute_correction("gpu", 1.0, math.log(25.6), math.log(256.0), "amd") == 0.0
    assert compute_correction("gpu", 1.0, math.log(25.6), math.log(256.0), "intel") == 0.0
    assert compute_correction("gpu", 1.0, math.log(25.6), math.log(256.0)) == 0.0


def test_decode_law_recovers_known_parameters() -> None:
    # eff = 1 / (1/0.9 + C × (t0 + t1 (B − 1))), t0 = 4 ms on GPUs and 8 ms on Apple, t1 = 0.5 ms
    rng = np.random.default_rng(0)
    n = 400
    kinds = rng.choice(["gpu", "apple_soc"], size=n)
    ceiling = np.exp(rng.uniform(np.log(5), np.log(500), size=n))
    batch = rng.choice([1, 2, 4, 8], size=n)
    t0 = np.where(kinds == "gpu", 0.004, 0.008)
    y = -np.log(1 / 0.9 + ceiling * (t0 + 0.0005 * (batch - 1))) + rng.normal(0, 0.01, size=n)
    frame = _frame(kinds, ceiling, batch)
    base = fit_base("decode_tok_s", frame, y, np.ones(n))
    assert math.exp(-base.params[0]) == pytest.approx(0.9, rel=0.05)
    assert math.exp(base.params[2]) == pytest.approx(0.0005, rel=0.1)
    np.testing.assert_allclose(base.predict_frame(frame), y, atol=0.05)
    # an unseen cell falls back to the shared overhead, between the two kinds'
    unseen = base.predict_frame(_frame(np.array(["cpu"]), np.array([100.0]), np.array([1])))[0]
    gpu, apple = base.predict_frame(_frame(np.array(["gpu", "apple_soc"]), np.array([100.0] * 2), np.array([1, 1])))
    assert apple < unseen < gpu


def test_rows_frames_and_storage_agree(public_observations: list[Observation]) -> None:
    sets = build_training_sets(public_observations)
    for target, ts in sets.items():
        frame = ts.frame
        base = fit_base(target, frame, ts.y, ts.weight)
        rows = ts.rows()
        np.testing.assert_allclose(base.predict_rows(rows), base.predict_frame(frame), rtol=1e-12)
        assert PhysicalBase.from_dict(base.to_dict()) == base
    with pytest.raises(ValueError, match="unknown base shape"):
        PhysicalBase.from_dict({"shape": "magic", "params": [0.0], "cells": {}})
    with pytest.raises(ValueError, match="parameters"):
        PhysicalBase.from_dict({"shape": "decode", "params": [0.0], "cells": {}})


def _frame(kinds: np.ndarray, ceiling: np.ndarray, batch: np.ndarray):  # type: ignore[no-untyped-def]
    frame = feature_frame([])
    frame = frame.reindex(range(len(kinds)))
    frame["hardware_kind"] = kinds.astype(object)
    frame["runtime_family"] = "llamacpp"
    frame["log_decode_ceiling"] = np.log(ceiling)
    frame["log_concurrency"] = np.log(batch.astype(float))
    frame["tflops_estimated"] = 0.0
    return frame
