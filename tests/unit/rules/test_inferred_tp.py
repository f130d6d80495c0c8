"""A run that states its GPUs but not its tensor parallelism (issue 14): the physics takes the
smallest TP that holds the model, says so, and asks for it, instead of a one-GPU ceiling."""

from __future__ import annotations

from pathlib import Path

import msgspec

from advisor.canonical import CanonicalRun
from advisor.catalog import Catalog
from advisor.ingest.base import Input
from advisor.ingest.registry import parse
from advisor.physics.parallel import smallest_fitting_tp
from advisor.rules import build_context, get_rule

LOG = (
    Path(__file__).resolve().parents[2]
    / "fixtures"
    / "ingest"
    / "trtllm_bench"
    / "gpu-recipes-a3ultra-trtllm-0.17-build-and-throughput-llama31-405b-fp8-tp8-h200.log"
)


def _run(**setup: object) -> CanonicalRun:
    """The real 405B FP8 log's run on H200s, its setup changed as a file without a TP would say it."""
    _, runs = parse(Input(LOG.read_bytes(), file_name=LOG.name))
    run = runs[0]
    return msgspec.structs.replace(run, setup=msgspec.structs.replace(run.setup, hardware="nvidia-h200-sxm", **setup))


def test_405b_fp8_needs_four_h200s() -> None:
    catalog = Catalog.default()
    hw, fp8, bf16 = (
        catalog.get_hardware("nvidia-h200-sxm"),
        catalog.get_quantization("fp8-e4m3"),
        catalog.get_quantization("f16-bf16"),
    )
    # 405 GB of FP8 weights: 2 × 141 GB × 0.9 falls short, 4 × 141 GB × 0.9 holds them.
    assert smallest_fitting_tp(hw, catalog.get_model("llama-3.1-405b"), fp8, gpu_count=8) == 4
    assert smallest_fitting_tp(hw, catalog.get_model("llama-3.1-405b"), fp8, gpu_count=2) is None
    assert smallest_fitting_tp(hw, catalog.get_model("llama-3.1-8b"), bf16, gpu_count=8) == 1


def test_gpu_count_without_tp_gets_the_inferred_tp_a_note_and_a_question() -> None:
    ctx = build_context(_run(gpu_count=8, tensor_parallel=None))
    assert ctx.roofline is not None and ctx.roofline.tensor_parallel == 4
    assert any(n.startswith("tensor parallelism inferred: the model needs 4 GPUs") for n in ctx.notes)
    asked = [m for m in ctx.missing if m.field == "setup.tensor_parallel"]
    assert asked and asked[0].reason == "tensor parallelism inferred: the model needs 4 GPUs"
    finding = get_rule("MEAS004").evaluate(ctx)
    assert finding is not None and "setup.tensor_parallel" in finding.title


def test_a_stated_tp_is_never_second_guessed() -> None:
    ctx = build_context(_run(gpu_count=8, tensor_parallel=8))
    assert ctx.roofline is not None and ctx.roofline.tensor_parallel == 8
    assert not [m for m in ctx.missing if m.field == "setup.tensor_parallel"]
    assert not any("inferred" in n for n in ctx.notes)


def test_one_gpu_needs_no_inference() -> None:
    ctx = build_context(_run(gpu_count=None, tensor_parallel=None))
    assert ctx.roofline is not None and ctx.roofline.tensor_parallel == 1
    assert not [m for m in ctx.missing if m.field == "setup.tensor_parallel"]


def test_a_decode_only_a_gpu_group_can_reach_is_not_called_impossible() -> None:
    """The log has no per-stream decode; give one stream 20 tok/s, above one H200's 405B FP8
    ceiling (about 12 tok/s) and below four's (about 47): stated as one GPU it is "faster than
    physics", stated as 8 GPUs without a TP it is judged against the inferred 4-GPU group."""

    def with_decode(run: CanonicalRun) -> CanonicalRun:
        return msgspec.structs.replace(
            run,
            workload=msgspec.structs.replace(run.workload, concurrency=1),
            metrics=msgspec.structs.replace(run.metrics, decode_tok_s=20.0),
        )

    alone = get_rule("MEAS006").evaluate(build_context(with_decode(_run(gpu_count=None, tensor_parallel=None))))
    assert alone is not None
    grouped = build_context(with_decode(_run(gpu_count=8, tensor_parallel=None)))
    assert grouped.roofline is not None and grouped.roofline.tensor_parallel == 4
    assert get_rule("MEAS006").evaluate(grouped) is None
