"""Issue 13 through the API, as a reviewer would try it: POST a canonical run to /api/v1/runs and
read the stored advice (the scenario files call the rules directly; this checks the same answers
survive validation, storage and the response encoding)."""

from __future__ import annotations

import json
from typing import Any

from advisor.rules import runtimes

_LLAMA8 = "meta-llama/Llama-3.1-8B-Instruct"


def _post(client: Any, run: dict[str, Any]) -> dict[str, Any]:
    response = client.post("/api/v1/runs", content=json.dumps(run).encode())
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def _run(setup: dict[str, Any], metrics: dict[str, Any], **workload: Any) -> dict[str, Any]:
    return {
        "measured_at": "2026-12-07T08:00:00Z",
        "setup": setup,
        "workload": {"num_requests": 200, "concurrency": 1, "prompt_tokens_mean": 1000, "output_tokens_mean": 256,
                     **workload},
        "metrics": {"requests_completed": 200, "requests_failed": 0, **metrics},
    }  # fmt: skip


def test_a_cpu_only_run_with_gpu_count_0_is_accepted_and_gets_no_gpu_fix(client: Any) -> None:
    """Deliver 7: gpu_count 0 for CPU-only runs. A Ryzen desktop running llama.cpp with -ngl 0 at
    12 tok/s for an 8B Q4_K_M (83 GB/s ÷ 4.9 GB ≈ 17 tok/s ceiling): stored with gpu_count 0, and no
    fix offloads layers to a GPU it does not have or names a tensor-parallel size."""
    body = _post(
        client,
        _run(
            {"runtime": "llamacpp", "runtime_version": "b6500", "hardware": "amd-ryzen-9-7950x", "gpu_count": 0,
             "model": _LLAMA8, "quantization": "Q4_K_M", "engine_args": {"-ngl": 0}},
            {"decode_tok_s": 12.0, "ttft_ms": {"p50": 9000, "p99": 9800}, "itl_ms": {"p50": 83, "p99": 95}},
        ),
    )  # fmt: skip
    assert body["run"]["setup"]["gpu_count"] == 0
    assert body["verdict"] == "pass"
    for rec in body["recommendations"]:
        fix = rec.get("fix_for_runtime") or ""
        assert "-ngl 999" not in fix and "--tensor-parallel" not in fix, rec
        assert rec["severity"] in ("info", "low", "moderate"), rec  # a healthy CPU run stays quiet


def test_trtllm_on_an_a10g_is_offered_int8_weight_only_with_an_estimated_gain(client: Any) -> None:
    """The issue's first bullet through the API: TensorRT-LLM on an A10G (Ampere) at 33.5 tok/s is
    not told to go FP8 (Ada or newer); it gets INT8 weight-only, whose gain is an estimate (no figure
    published) and therefore below the bare 2x ratio of the ceilings."""
    body = _post(
        client,
        _run(
            {"runtime": "trtllm", "runtime_version": "1.0.0", "hardware": "nvidia-a10g", "gpu_count": 1,
             "model": _LLAMA8, "quantization": "bf16"},
            {"decode_tok_s": 33.5, "ttft_ms": {"p50": 260, "p99": 330}, "itl_ms": {"p50": 29.8, "p99": 33}},
        ),
    )  # fmt: skip
    quant = [r for r in body["recommendations"] if r["rule_id"] == "DEC001"]
    assert quant, [(r["rule_id"], r["title"]) for r in body["recommendations"]]
    rec = quant[0]
    fix = rec.get("fix_for_runtime") or ""
    assert "int8_wo" in fix and "--qformat fp8" not in fix
    for name in runtimes.flags_in(fix):
        assert runtimes.is_known_flag("trtllm", name), name
    gain = rec["expected_gain"]
    assert gain["to"] / gain["from"] <= 1.5 + 1e-9  # the estimate's cap, not 66.7 / 33.5
    speedup = next(e for e in rec["evidence"] if e["metric"] == "expected_speedup")
    assert "the gain is an estimate" in speedup["expected"]
