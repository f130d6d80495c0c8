"""The physics-shaped base: its laws, its fit, its storage, and that rows and frames agree."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import advisor.ml.base as base_module
from advisor.ml.base import (
    ANCHOR_PENALTY,
    INTERLEAVED_FAMILIES,
    OVERHEAD_ANCHORS,
    PER_STEP_FAMILIES,
    REFERENCE_LAYERS,
    SEQUENCE_ANCHOR_PENALTY,
    SEQUENCE_ANCHORS,
    PhysicalBase,
    compute_correction,
    fit_base,
)
from advisor.ml.dataset import Observation
from advisor.ml.features import QUANT_KERNELS, feature_frame
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


def test_decode_overhead_grows_with_the_layers() -> None:
    # eff = 1 / (1/0.9 + C × t0 × L / 32), t0 = 4 ms for a 32-layer model: a deep model pays more
    # per step than a shallow one of the same ceiling.
    rng = np.random.default_rng(1)
    n = 400
    ceiling = np.exp(rng.uniform(np.log(5), np.log(300), size=n))
    layers = rng.choice([24, 32, 48, 80], size=n).astype(float)
    y = -np.log(1 / 0.9 + ceiling * 0.004 * layers / REFERENCE_LAYERS) + rng.normal(0, 0.01, size=n)
    frame = _frame(np.array(["gpu"] * n), ceiling, np.ones(n, dtype=int))
    frame["log_layers"] = np.log(layers)
    base = fit_base("decode_tok_s", frame, y, np.ones(n))
    assert base.per_layer
    assert math.exp(base.params[1] + base.cells["gpu/*"] + base.cells["gpu/llamacpp"]) == pytest.approx(0.004, rel=0.1)
    np.testing.assert_allclose(base.predict_frame(frame), y, atol=0.05)
    probe = _frame(np.array(["gpu"] * 3), np.array([50.0] * 3), np.ones(3, dtype=int))
    probe["log_layers"] = [math.log(32), math.log(80), np.nan]
    shallow, deep, unknown = base.predict_frame(probe)
    assert deep < shallow and unknown == pytest.approx(shallow)  # unknown depth: 32 layers
    assert base.predict_rows(list(probe.itertuples(index=False, name=None))) == pytest.approx([shallow, deep, unknown])
    # A base stored before the layer term ignores the depth.
    old = PhysicalBase.from_dict({k: v for k, v in base.to_dict().items() if k not in ("per_layer", "kernels")})
    assert not old.per_layer and not old.kernels
    assert old.predict_frame(probe)[1] == pytest.approx(old.predict_frame(probe)[0])


def test_pipelining_engines_pay_their_overhead_per_step() -> None:
    # llama.cpp pays t0 = 4 ms per 32 layers, a server (CUDA graphs: the device's per-layer kernels
    # and collectives are left) 2 ms per 32 layers, MLX (async_eval pipelining) 3 ms per step
    # whatever the depth: the fit recovers all three, and a deeper model costs MLX nothing more.
    assert {"mlx"} == PER_STEP_FAMILIES
    rng = np.random.default_rng(3)
    n = 600
    family = rng.choice(["llamacpp", "server", "mlx"], size=n)
    kinds = np.where(family == "mlx", "apple_soc", "gpu")
    ceiling = np.exp(rng.uniform(np.log(5), np.log(300), size=n))
    layers = rng.choice([24, 32, 48, 80], size=n).astype(float)
    overhead = np.select(
        [family == "llamacpp", family == "server"],
        [0.004 * layers / REFERENCE_LAYERS, 0.002 * layers / REFERENCE_LAYERS],
        default=0.003,
    )
    y = -np.log(1 / 0.9 + ceiling * overhead) + rng.normal(0, 0.01, size=n)
    frame = _frame(kinds, ceiling, np.ones(n, dtype=int))
    frame["runtime_family"] = family.astype(object)
    frame["log_layers"] = np.log(layers)
    base = fit_base("decode_tok_s", frame, y, np.ones(n))
    assert base.per_step == PER_STEP_FAMILIES
    np.testing.assert_allclose(base.predict_frame(frame), y, atol=0.05)

    def t0(cell: str) -> float:
        return math.exp(base.params[1] + base.cells[cell.split("/", maxsplit=1)[0] + "/*"] + base.cells[cell])

    # with 200 rows of its own, the server cell's data outweigh its anchor (1 ms)
    assert t0("gpu/llamacpp") == pytest.approx(0.004, rel=0.1)
    assert t0("gpu/server") == pytest.approx(0.002, rel=0.1)
    assert t0("apple_soc/mlx") == pytest.approx(0.003, rel=0.1)
    probe = _frame(
        np.array(["gpu", "gpu", "gpu", "gpu", "apple_soc", "apple_soc"]), np.array([50.0] * 6), np.ones(6, dtype=int)
    )
    probe["runtime_family"] = ["llamacpp", "llamacpp", "server", "server", "mlx", "mlx"]
    probe["log_layers"] = np.log([32.0, 80.0] * 3)
    cpp32, cpp80, srv32, srv80, mlx32, mlx80 = base.predict_frame(probe)
    assert cpp80 < cpp32 and srv80 < srv32
    assert mlx80 == pytest.approx(mlx32)
    rows = list(probe.itertuples(index=False, name=None))
    np.testing.assert_allclose(base.predict_rows(rows), base.predict_frame(probe), rtol=1e-12)
    assert PhysicalBase.from_dict(base.to_dict()) == base
    # A base stored before the per-step families charges every engine per layer.
    old = PhysicalBase.from_dict({k: v for k, v in base.to_dict().items() if k != "per_step"})
    assert not old.per_step
    old_mlx32, old_mlx80 = old.predict_frame(probe.iloc[4:6])
    assert old_mlx80 < old_mlx32
    # A base stored with the servers per step (the round before) still answers per step for them.
    stored = PhysicalBase.from_dict(base.to_dict() | {"per_step": ["mlx", "server"]})
    stored_srv32, stored_srv80 = stored.predict_frame(probe.iloc[2:4])
    assert stored_srv80 == pytest.approx(stored_srv32)
    np.testing.assert_allclose(old.predict_rows(rows), old.predict_frame(probe), rtol=1e-12)


def test_cpu_decode_pays_for_unpacking_quantized_weights() -> None:
    # A CPU of 2 TFLOPS decoding an 8B model: affine formats cost 2 ops per weight, i-quants 10,
    # floats nothing. GPU rows carry no unpacking term (their figure is the matrix-unit rate).
    rng = np.random.default_rng(2)
    n = 300
    ops = {0: 0.0, 1: 2.0, 3: 10.0}
    kernel = rng.choice(list(ops), size=n)
    ceiling = np.exp(rng.uniform(np.log(5), np.log(40), size=n))
    seconds = 8.0e9 / 2.0e12  # s per op per weight
    cost = np.array([ops[int(k)] for k in kernel]) * seconds
    y = -np.log(1 / 0.9 + ceiling * (0.004 + cost)) + rng.normal(0, 0.01, size=n)
    frame = _frame(np.array(["cpu"] * n), ceiling, np.ones(n, dtype=int))
    frame["quant_kernel"] = kernel.astype(float)
    frame["log_active_params_b"] = math.log(8.0)
    frame["log_tflops"] = math.log(2.0)
    frame["tensor_parallel"] = 1.0
    base = fit_base("decode_tok_s", frame, y, np.ones(n))
    assert math.exp(base.kernels["affine"]) == pytest.approx(2.0, rel=0.15)
    assert math.exp(base.kernels["lookup"]) == pytest.approx(10.0, rel=0.15)
    assert set(base.kernels) == {"*", *QUANT_KERNELS[1:]}  # a format without rows: the shared cost
    np.testing.assert_allclose(base.predict_frame(frame), y, atol=0.05)
    rows = list(frame.itertuples(index=False, name=None))
    np.testing.assert_allclose(base.predict_rows(rows[:20]), base.predict_frame(frame.iloc[:20]), rtol=1e-12)
    assert PhysicalBase.from_dict(base.to_dict()) == base
    # the same row on a GPU: the format changes nothing
    gpu = frame.iloc[:2].assign(hardware_kind="gpu", quant_kernel=[0.0, 3.0], log_decode_ceiling=math.log(20.0))
    float_row, iquant_row = base.predict_frame(gpu)
    assert iquant_row == pytest.approx(float_row)
    cpu = gpu.assign(hardware_kind="cpu")
    float_row, iquant_row = base.predict_frame(cpu)
    assert iquant_row < float_row


def _llamacpp_only(rng: np.random.Generator, n: int, t0: float) -> tuple[object, np.ndarray]:
    ceiling = np.exp(rng.uniform(np.log(5), np.log(300), size=n))
    y = -np.log(1 / 0.9 + ceiling * t0) + rng.normal(0, 0.01, size=n)
    frame = _frame(np.array(["gpu"] * n), ceiling, np.ones(n, dtype=int))
    return frame, y


def _server_overhead(base: PhysicalBase) -> float:
    return math.exp(base.params[1] + base.cells.get("gpu/*", 0.0) + base.cells.get("gpu/server", 0.0))


def test_a_server_cell_without_rows_is_drawn_to_its_cited_overhead(monkeypatch: pytest.MonkeyPatch) -> None:
    # Only CUDA llama.cpp rows (6 ms per 32 layers): without the anchor a server would inherit that
    # llama.cpp overhead; with it, its cell sits between the shared value and the cited 1 ms.
    assert {"gpu/server": pytest.approx(1.0e-3)} == OVERHEAD_ANCHORS and ANCHOR_PENALTY > 0
    frame, y = _llamacpp_only(np.random.default_rng(4), 300, 0.006)
    anchored = fit_base("decode_tok_s", frame, y, np.ones(len(y)))
    assert "gpu/server" in anchored.cells
    server, llamacpp = (
        _server_overhead(anchored),
        math.exp(anchored.params[1] + anchored.cells["gpu/*"] + anchored.cells["gpu/llamacpp"]),
    )
    assert llamacpp == pytest.approx(0.006, rel=0.1)
    assert 0.001 < server < 0.5 * llamacpp
    # the same rows served to a vLLM-like row: faster than the llama.cpp one by the overhead gap
    probe = _frame(np.array(["gpu", "gpu"]), np.array([200.0, 200.0]), np.ones(2, dtype=int))
    probe["runtime_family"] = ["llamacpp", "server"]
    cpp, srv = anchored.predict_frame(probe)
    assert srv > cpp + 0.3
    rows = list(probe.itertuples(index=False, name=None))
    np.testing.assert_allclose(anchored.predict_rows(rows), [cpp, srv], rtol=1e-12)
    # a stronger prior pulls it closer to the citation; none leaves it at the shared value
    monkeypatch.setattr(base_module, "ANCHOR_PENALTY", 10.0)
    strong = _server_overhead(fit_base("decode_tok_s", frame, y, np.ones(len(y))))
    assert 0.001 < strong < server
    monkeypatch.setattr(base_module, "ANCHOR_PENALTY", 0.0)
    free = fit_base("decode_tok_s", frame, y, np.ones(len(y)))
    assert "gpu/server" not in free.cells
    assert _server_overhead(free) > server


def _batched(kinds: np.ndarray, family: np.ndarray, ceiling: np.ndarray, batch: np.ndarray) -> Any:
    """A decode frame of 8B-like rows on a 1000-TFLOPS device with a 512-token prompt, 256 out."""
    frame = _frame(kinds, ceiling, batch)
    frame["runtime_family"] = family.astype(object)
    frame["log_prompt_tokens"] = math.log1p(512)
    frame["log_kv_depth_tokens"] = 0.0
    frame["log_context_tokens"] = math.log1p(512 + 256 / 2)
    frame["log_active_params_b"] = math.log(8.0)
    frame["log_tflops"] = math.log(1000.0)
    frame["tensor_parallel"] = 1.0
    return frame


def _sequence_cost(base: PhysicalBase, cell: str) -> float:
    return math.exp(base.params[2] + base.sequence_cells.get(cell, 0.0))


def test_a_server_without_batched_rows_pays_its_cited_cost_per_sequence() -> None:
    # llama.cpp's batched-bench rows cost 0.5 ms per extra sequence; the servers have rows at
    # batch 1 only. Their cost per sequence is the cited one (the KV bytes are in the ceiling), not
    # llama.cpp's, so a server at batch 16 keeps far more of its ceiling than llama.cpp.
    assert {"gpu/server": pytest.approx(1.1e-4)} == SEQUENCE_ANCHORS and SEQUENCE_ANCHOR_PENALTY > 0
    assert {"server"} == INTERLEAVED_FAMILIES
    rng = np.random.default_rng(7)
    n = 400
    family = rng.choice(["llamacpp", "server"], size=n)
    batch = np.where(family == "llamacpp", rng.choice([1, 2, 4, 8, 16], size=n), 1)
    ceiling = np.exp(rng.uniform(np.log(20), np.log(200), size=n))
    t0 = np.where(family == "llamacpp", 0.004, 0.002)
    y = -np.log(1 / 0.9 + ceiling * (t0 + 0.0005 * (batch - 1))) + rng.normal(0, 0.01, size=n)
    base = fit_base("decode_tok_s", _batched(np.array(["gpu"] * n), family, ceiling, batch), y, np.ones(n))
    assert _sequence_cost(base, "gpu/llamacpp") == pytest.approx(0.0005, rel=0.1)
    assert _sequence_cost(base, "gpu/server") == pytest.approx(1.1e-4, rel=0.3)
    probe = _batched(np.array(["gpu"] * 2), np.array(["llamacpp", "server"]), np.array([190.0] * 2), np.array([16] * 2))
    cpp, srv = np.exp(base.predict_frame(probe))
    assert srv > 1.5 * cpp
    np.testing.assert_allclose(base.predict_rows(list(probe.itertuples(index=False, name=None))), np.log([cpp, srv]))


def test_servers_pay_for_the_other_requests_prefills() -> None:
    # A continuous-batching server at batch B waits, per output token, for the B − 1 other
    # requests' prefills spread over its own output: (B − 1) × 2 P N / (e_i T) / O per step.
    base = PhysicalBase(
        "decode",
        (math.log(1.0), math.log(0.002), math.log(1e-4)),
        per_layer=True,
        sequence_cells={},
        interference=math.log(2.0),  # e_i = 0.5
    )
    probe = _batched(
        np.array(["gpu"] * 3), np.array(["server", "llamacpp", "server"]), np.array([100.0] * 3), np.array([16, 16, 1])
    )
    server, cpp, single = np.exp(base.predict_frame(probe))
    prefill = 2 * 512 * 8e9 / 1e15 / 0.5 / 256  # seconds per other request, per output token
    assert 1 / server == pytest.approx(1 + 100 * (0.002 + 15 * 1e-4 + 15 * prefill))
    assert 1 / cpp == pytest.approx(1 + 100 * (0.002 + 15 * 1e-4))  # batched-bench prefills first
    assert 1 / single == pytest.approx(1 + 100 * 0.002)
    rows = list(probe.itertuples(index=False, name=None))
    np.testing.assert_allclose(base.predict_rows(rows), np.log([server, cpp, single]), rtol=1e-12)
    # a longer prompt for the same output costs more; no prompt, none
    longer = probe.assign(log_prompt_tokens=math.log1p(2048), log_context_tokens=math.log1p(2048 + 128))
    assert base.predict_frame(longer)[0] < math.log(server)
    bare = probe.assign(log_prompt_tokens=np.nan)
    assert math.exp(base.predict_frame(bare)[0]) > server
    assert PhysicalBase.from_dict(base.to_dict()) == base
    # a base stored before the term charges neither
    old = PhysicalBase.from_dict(
        {k: v for k, v in base.to_dict().items() if k not in ("interference", "sequence_cells")}
    )
    assert old.interference is None and not old.sequence_cells
    assert math.exp(old.predict_frame(probe)[0]) == pytest.approx(math.exp(old.predict_frame(probe)[1]))


def test_the_fit_recovers_the_prefill_interference() -> None:
    # Server rows at batches 1–32 and prompts 128–4096 (so the interference is not collinear with
    # the cost per sequence): e_i = 0.6 and t1 = 0.1 ms come back.
    rng = np.random.default_rng(8)
    n = 400
    batch = rng.choice([1, 4, 16, 32], size=n)
    prompt = rng.choice([128, 512, 4096], size=n).astype(float)
    ceiling = np.exp(rng.uniform(np.log(20), np.log(200), size=n))
    prefill = 2 * prompt * 8e9 / 1e15 / 0.6 / 256
    y = -np.log(1 / 0.9 + ceiling * (0.002 + (batch - 1) * (1e-4 + prefill))) + rng.normal(0, 0.01, size=n)
    frame = _batched(np.array(["gpu"] * n), np.array(["server"] * n), ceiling, batch)
    frame["log_prompt_tokens"] = np.log1p(prompt)
    frame["log_context_tokens"] = np.log1p(prompt + 128)
    base = fit_base("decode_tok_s", frame, y, np.ones(n))
    assert base.interference is not None
    assert math.exp(-base.interference) == pytest.approx(0.6, rel=0.1)
    assert _sequence_cost(base, "gpu/server") == pytest.approx(1e-4, rel=0.3)
    np.testing.assert_allclose(base.predict_frame(frame), y, atol=0.05)


def test_the_fit_recovers_an_issue_rate_cap() -> None:
    # llama.cpp on NVIDIA GPUs: the bandwidth term is min(BW, SMs × GHz × b), b = 5.5 bytes per
    # SM-cycle; devices whose issue rate exceeds their bandwidth are bound by bandwidth alone.
    rng = np.random.default_rng(7)
    n = 400
    bandwidth = np.exp(rng.uniform(np.log(300), np.log(2500), size=n))
    issue = np.exp(rng.uniform(np.log(60), np.log(320), size=n))  # SMs × GHz
    ceiling = np.exp(rng.uniform(np.log(5), np.log(200), size=n))
    excess = np.maximum(np.log(bandwidth) - np.log(issue * 5.5), 0.0)
    y = -np.log(np.exp(excess) / 0.9 + ceiling * 0.004) + rng.normal(0, 0.01, size=n)
    frame = _frame(np.array(["gpu"] * n), ceiling, np.ones(n, dtype=int))
    frame["log_bandwidth_gb_s"] = np.log(bandwidth)
    frame["log_issue_rate"] = np.log(issue)
    frame["quant_kernel"] = 0.0
    base = fit_base("decode_tok_s", frame, y, np.ones(n))
    assert math.exp(base.issue["*"]) == pytest.approx(5.5, rel=0.05)
    np.testing.assert_allclose(base.predict_frame(frame), y, atol=0.05)
    assert base.predict_rows(list(frame.itertuples(index=False, name=None))) == pytest.approx(base.predict_frame(frame))
    # More bandwidth never predicts less decode; past the cap it predicts no more.
    probe = _frame(np.array(["gpu"] * 3), np.array([50.0, 100.0, 200.0]), np.ones(3, dtype=int))
    probe["log_bandwidth_gb_s"] = np.log([500.0, 1000.0, 2000.0])
    probe["log_issue_rate"] = math.log(108 * 1.41)
    probe["quant_kernel"] = 0.0
    tok_s = np.exp(base.predict_frame(probe)) * np.array([50.0, 100.0, 200.0])
    assert tok_s[0] <= tok_s[1] <= tok_s[2] * (1 + 1e-9)
    # A device without the figures, or another runtime family, is not capped.
    other = probe.assign(runtime_family="server")
    unknown = probe.assign(log_issue_rate=np.nan)
    capped = base.predict_frame(probe)
    assert np.all(base.predict_frame(unknown) >= capped) and base.predict_frame(unknown)[2] > capped[2]
    assert base.predict_frame(other)[2] > capped[2]
    assert PhysicalBase.from_dict(base.to_dict()) == base
    # A base stored before the cap has none.
    old = PhysicalBase.from_dict({k: v for k, v in base.to_dict().items() if k != "issue"})
    assert not old.issue and old.predict_frame(probe)[2] > capped[2]


def test_no_cap_when_no_training_row_reaches_it() -> None:
    rng = np.random.default_rng(8)
    n = 200
    ceiling = np.exp(rng.uniform(np.log(5), np.log(200), size=n))
    y = -np.log(1 / 0.9 + ceiling * 0.004) + rng.normal(0, 0.01, size=n)
    frame = _frame(np.array(["gpu"] * n), ceiling, np.ones(n, dtype=int))
    frame["log_bandwidth_gb_s"] = math.log(300.0)
    frame["log_issue_rate"] = math.log(142 * 2.52)  # an issue rate far above the bandwidth
    assert fit_base("decode_tok_s", frame, y, np.ones(n)).issue == {}
