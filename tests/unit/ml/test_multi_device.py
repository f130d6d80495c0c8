"""Multi-device expectations: all-reduce and expert-dispatch time added to each forward pass."""

from __future__ import annotations

import pytest

from advisor.catalog import Catalog
from advisor.ml.multi_device import expert_parallel, pass_communication_seconds, with_communication
from advisor.ml.prior import prior_expectations
from advisor.physics import analyse
from advisor.physics.parallel import expert_dispatch_seconds, parse_interconnect, tp_communication_seconds

CATALOG = Catalog.default()
H100 = CATALOG.resolve_hardware("nvidia-h100-sxm")
LLAMA_70B, _ = CATALOG.resolve_model("llama-3.1-70b")
QWEN_MOE, _ = CATALOG.resolve_model("qwen3-30b-a3b")
BF16 = CATALOG.resolve_quantization("bf16")
NVLINK = str(CATALOG.extra("hardware", "nvidia-h100-sxm")["interconnect"])


def test_one_device_is_unchanged() -> None:
    roof = analyse(H100, LLAMA_70B, BF16, prompt_tokens=512, tensor_parallel=1)
    exp = prior_expectations(roof, runtime="vllm", hardware_kind="gpu")
    assert with_communication(exp, roof, LLAMA_70B, interconnect=NVLINK) == (exp, [])


def test_tp_adds_the_all_reduces_to_every_pass() -> None:
    roof = analyse(H100, LLAMA_70B, BF16, prompt_tokens=2048, concurrency=4, tensor_parallel=4)
    exp = prior_expectations(roof, runtime="vllm", hardware_kind="gpu")
    adjusted, notes = with_communication(exp, roof, LLAMA_70B, interconnect=NVLINK)
    link = parse_interconnect(NVLINK)
    step = tp_communication_seconds(LLAMA_70B, tp=4, tokens=4, interconnect=link)
    prefill = tp_communication_seconds(LLAMA_70B, tp=4, tokens=2048, interconnect=link)
    assert exp.decode_tok_s is not None and adjusted.decode_tok_s is not None
    assert adjusted.decode_tok_s.expected == pytest.approx(1.0 / (1.0 / exp.decode_tok_s.expected + step))
    assert adjusted.decode_tok_s.ceiling == exp.decode_tok_s.ceiling  # the physics ceiling stays ideal
    assert exp.prefill_tok_s is not None and adjusted.prefill_tok_s is not None
    assert adjusted.prefill_tok_s.expected == pytest.approx(2048 / (2048 / exp.prefill_tok_s.expected + prefill))
    assert exp.itl_ms is not None and adjusted.itl_ms is not None
    assert adjusted.itl_ms.expected == pytest.approx(exp.itl_ms.expected + step * 1000.0)
    assert exp.ttft_ms is not None and adjusted.ttft_ms is not None
    assert adjusted.ttft_ms.expected == pytest.approx(exp.ttft_ms.expected + prefill * 1000.0)
    assert notes == [
        f"TP 4 over {NVLINK}: all-reduces add {step * 1000:.2f} ms per decode step and {prefill * 1000:.1f} ms per prefill"
    ]


def test_expert_parallel_adds_the_dispatch() -> None:
    assert expert_parallel({"enable_expert_parallel": True}, QWEN_MOE) is True
    assert expert_parallel({"ep_size": 4}, QWEN_MOE) is True
    assert expert_parallel({"ep_size": 1}, QWEN_MOE) is False
    assert expert_parallel({"enable_expert_parallel": True}, LLAMA_70B) is False  # dense: no experts
    assert expert_parallel({}, QWEN_MOE) is False
    link = parse_interconnect(NVLINK)
    with_ep = pass_communication_seconds(QWEN_MOE, tp=8, tokens=1, interconnect=NVLINK, expert_parallel=True)
    without = pass_communication_seconds(QWEN_MOE, tp=8, tokens=1, interconnect=NVLINK, expert_parallel=False)
    assert without == pytest.approx(tp_communication_seconds(QWEN_MOE, tp=8, tokens=1, interconnect=link))
    assert with_ep == pytest.approx(without + expert_dispatch_seconds(QWEN_MOE, ep=8, tokens=1, interconnect=link))
    assert with_ep > without
