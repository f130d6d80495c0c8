"""Published rows and fleet cells become observations with the physics of their own workload."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from advisor.catalog import Catalog
from advisor.ml.dataset import (
    FleetCell,
    Observation,
    canonical_runtime,
    catalog_hardware_lookup,
    catalog_model_shape,
    fleet_observations,
    hardware_group,
    load_public_rows,
    observations_from_public,
    reference,
)
from advisor.ml.dataset import public_observations as public_observations_of
from advisor.ml.prior import DECODE_EFFICIENCY, PREFILL_ATTENTION_SLOWDOWN, PREFILL_EFFICIENCY, calibrate
from advisor.physics import analyse


def test_shipped_rows_are_the_reference_copy() -> None:
    rows = load_public_rows()
    assert len(rows) == 810
    assert {r["source_id"] for r in rows} >= {"XD_L3_2024", "LCPP_BENCH_DGXSPARK", "NIM_L33_70B"}


def test_prior_constants_still_come_out_of_the_shared_observations() -> None:
    # The prior's calibration now reads the same observations as the fitted model: re-running it
    # on the shipped rows must reproduce the constants in prior.py to the printed precision.
    catalog = Catalog.default()
    tables = calibrate(load_public_rows(), catalog_model_shape(catalog), catalog_hardware_lookup(catalog))
    for phase, constants in (("decode", DECODE_EFFICIENCY), ("prefill", PREFILL_EFFICIENCY)):
        assert set(tables[phase]) == set(constants)
        for key, cell in constants.items():
            got = tables[phase][key]
            assert got.n == cell.n, key
            assert round(got.median, 3) == cell.median, key
            assert (round(got.p10, 3), round(got.p90, 3)) == (cell.p10, cell.p90), key
    assert tables["attention"]["*", "*"].median == PREFILL_ATTENTION_SLOWDOWN


def test_public_observations_by_target_and_source(public_observations: list[Observation]) -> None:
    counts = Counter((o.target, o.source) for o in public_observations)
    # 452 decode rows, less SGLang's 8 measured at an unknown batch (not a decode target)
    assert sum(v for (t, _), v in counts.items() if t == "decode_tok_s") == 436
    assert sum(v for (t, _), v in counts.items() if t == "prefill_tok_s") == 411
    # skipped entirely: offline TensorRT-LLM aggregates; ik_llama.cpp rows are a fork
    assert not any(src == "TRTLLM_PERF" for _, src in counts)
    assert all(o.origin == "public" and o.runs == 1 for o in public_observations)
    assert all(o.log_ratio is not None and math.isfinite(o.log_ratio) for o in public_observations)


def test_llama_bench_decode_has_an_empty_prompt_and_its_own_context(public_observations: list[Observation]) -> None:
    tg = [o for o in public_observations if o.source == "XD_L3_2024" and o.target == "decode_tok_s"]
    assert tg and all(o.roofline.prompt_tokens == 0 for o in tg)
    # tgN: mean decode context N/2
    assert {o.roofline.decode_context_tokens * 2 for o in tg} == {o.roofline.output_tokens for o in tg}


@pytest.mark.parametrize(
    ("name", "group"),
    [
        ("4x A100 SXM4 80GB", "nvidia-a100-80gb-sxm"),
        ("A100 SXM4 80GB", "nvidia-a100-80gb-sxm"),
        ("A100 80GB (SXM assumed)", "nvidia-a100-80gb-sxm"),
        ("Apple M2 Ultra (76-core GPU, 192GB)", "apple-m2-ultra"),
        ("RTX 4080", "rtx 4080"),  # not in the catalog: the normalised name
        ("2x H100 80GB (TP2)", "h100 80gb"),
    ],
)
def test_hardware_group(name: str, group: str) -> None:
    assert hardware_group(name, catalog_hardware_lookup(Catalog.default())) == group


@pytest.mark.parametrize(
    ("runtime", "canonical"),
    [
        ("llama.cpp (CUDA)", "llamacpp"),
        ("llama.cpp (CPU, build 081fe431/3441)", "llamacpp"),
        ("LM Studio (llama.cpp GGUF)", "llamacpp"),
        ("LM Studio (MLX)", "mlx"),
        ("SGLang v0.3.0", "sglang"),
        ("vLLM v0.6.0", "vllm"),
        ("NVIDIA NIM 1.8.0", "trtllm"),
        ("TensorRT-LLM (PyTorch backend)", None),
        ("ik_llama.cpp (CPU, iqk_mul_mat)", None),
    ],
)
def test_canonical_runtime(runtime: str, canonical: str | None) -> None:
    assert canonical_runtime(runtime) == canonical


def _cell(**overrides: object) -> FleetCell:
    base: dict[str, object] = {
        "runtime": "vllm",
        "hardware_id": "nvidia-a10g",
        "model_id": "llama-3.1-8b",
        "quantization_id": "f16-bf16",
        "tensor_parallel": 1,
        "kv_cache_dtype": None,
        "prompt_tokens": 1000.0,
        "output_tokens": 200.0,
        "kv_depth_tokens": None,
        "concurrency": 4.0,
        "source": "deployment:1",
        "runs": 9,
        "decode_tok_s": 25.0,
        "prefill_tok_s": 3000.0,
        "ttft_p50_ms": 400.0,
        "ttft_p99_ms": None,
        "itl_p99_ms": 60.0,
    }
    base.update(overrides)
    return FleetCell(**base)  # type: ignore[arg-type]


def test_fleet_cells_become_one_observation_per_reported_target() -> None:
    catalog = Catalog.default()
    quant = catalog.resolve_quantization("bf16").id
    cells = [_cell(quantization_id=quant), _cell(quantization_id=quant, hardware_id="no-such-gpu")]
    observations, skipped = fleet_observations(cells, catalog)
    assert skipped == 1
    assert sorted(o.target for o in observations) == ["decode_tok_s", "itl_p99_ms", "prefill_tok_s", "ttft_p50_ms"]
    roofline = observations[0].roofline
    assert all(o.roofline is roofline for o in observations)  # one physics per cell
    expected = analyse(
        catalog.resolve_hardware("nvidia-a10g"),
        catalog.resolve_model("llama-3.1-8b")[0],
        catalog.resolve_quantization("bf16"),
        prompt_tokens=1000,
        output_tokens=200,
        concurrency=4,
    )
    assert roofline.decode_ceiling_batch_tok_s == pytest.approx(expected.decode_ceiling_batch_tok_s)
    decode = next(o for o in observations if o.target == "decode_tok_s")
    assert decode.log_ratio == pytest.approx(math.log(25.0 / expected.decode_ceiling_batch_tok_s))
    assert decode.runs == 9 and decode.origin == "fleet" and decode.hardware_group == "nvidia-a10g"


def test_reference_per_target() -> None:
    catalog = Catalog.default()
    roof = analyse(
        catalog.resolve_hardware("nvidia-l40s"),
        catalog.resolve_model("llama-3.1-8b")[0],
        catalog.resolve_quantization("bf16"),
        prompt_tokens=2000,
        output_tokens=100,
    )
    assert reference("decode_tok_s", roof) == roof.decode_ceiling_batch_tok_s
    assert reference("prefill_tok_s", roof) == roof.prefill_ceiling_tok_s
    assert reference("ttft_p99_ms", roof) == roof.ttft_floor_ms
    assert reference("itl_p99_ms", roof) == roof.itl_floor_ms
    with pytest.raises(KeyError):
        reference("e2e_ms", roof)


def test_a_decode_rate_at_an_unknown_batch_is_not_a_training_observation(
    public_observations: list[Observation],
) -> None:
    # SGLang's request-rate runs report a per-stream TPOT at a batch nobody recorded: the prior
    # keeps them as lower bounds (public_observations flags them), the fitted decode target drops them.
    catalog = Catalog.default()
    items = list(
        public_observations_of(load_public_rows(), catalog_model_shape(catalog), catalog_hardware_lookup(catalog))
    )
    unknown = [i for i in items if i.batch_unknown]
    assert len(unknown) == 8 and {i.source for i in unknown} == {"SGLANG_V030"}
    assert all(i.phase == "decode" for i in unknown)
    assert not any(o.source == "SGLANG_V030" and o.target == "decode_tok_s" for o in public_observations)
    kept = observations_from_public(unknown + [i for i in items if not i.batch_unknown][:3])
    assert len(kept) == 3 and not any(o.source == "SGLANG_V030" for o in kept)
