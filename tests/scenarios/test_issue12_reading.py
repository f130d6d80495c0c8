"""Issue 12 scenarios, read as an operator would: what comes first when a file lacks context.

Same harness as ``test_scenarios.py`` (a canonical run → build_context → advise). Each scenario
is one behaviour: an actionable fix outranks a request for context at the same severity; a TTFT
that cannot be split is not blamed on the prompt under load; a reasoning model's unexplained TTFT
at many streams with no queue figure stays a low note.
"""

from __future__ import annotations

import pytest

from advisor.rules import Severity
from tests.scenarios.test_scenarios import LLAMA8, Scenario, check, vllm

SCENARIOS = [
    Scenario(
        "a_scrape_at_the_sequence_cap_ranks_the_cap_above_the_missing_gpu",
        {
            "setup": {"runtime": "vllm", "runtime_version": "0.11.0", "model": LLAMA8, "quantization": "bf16"},
            "source": {"format": "prometheus", "tool": "vLLM /metrics"},
            "metrics": {"queue_waiting_mean": 64, "running_max": 64, "running_mean": 64, "kv_cache_usage_mean": 0.11},
        },
        first="tune-runtime-parallelism",
        top3=("improve-measurement",),
        verdict="warn",
    ),
    Scenario(
        "thirty_two_streams_of_long_prompts_without_a_gpu_are_not_told_to_trim",
        {
            "setup": {"runtime": "vllm", "model": LLAMA8, "quantization": "bf16"},
            "workload": {
                "num_requests": 1000,
                "concurrency": 32,
                "prompt_tokens_mean": 6000,
                "output_tokens_mean": 128,
            },
            "metrics": {"ttft_ms": {"p50": 7100, "p99": 9000}, "requests_completed": 1000},
        },
        first="improve-measurement",
        verdict="warn",
    ),
    Scenario(
        "one_stream_of_long_prompts_without_a_gpu_is_still_a_prompt_cost",
        {
            "setup": {"runtime": "vllm", "model": LLAMA8, "quantization": "bf16"},
            "workload": {"num_requests": 1000, "concurrency": 1, "prompt_tokens_mean": 6000, "output_tokens_mean": 128},
            "metrics": {"ttft_ms": {"p50": 3000, "p99": 3300}, "requests_completed": 1000},
        },
        first="shorten-prompt",
        top3=("improve-measurement",),
        verdict="warn",
    ),
    Scenario(
        "gpt_oss_at_100_streams_with_no_queue_figure_is_not_a_reasoning_verdict",
        {
            "setup": vllm("nvidia-h100-sxm", model="openai/gpt-oss-20b", quant="mxfp4"),
            "workload": {
                "num_requests": 1000,
                "concurrency": 100,
                "prompt_tokens_mean": 500,
                "output_tokens_mean": 300,
            },
            "metrics": {
                "ttft_ms": {"p50": 2400, "p99": 4000},
                "tpot_ms": {"p50": 12, "p99": 20},
                "decode_tok_s": 83,
                "requests_completed": 1000,
            },
        },
        verdict="pass",
        quiet=True,
        absent=("PRE001",),
    ),
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_scenario(scenario: Scenario) -> None:
    check(scenario)


def test_the_unsplit_prompt_finding_says_why_it_is_low() -> None:
    scenario = next(s for s in SCENARIOS if s.name.startswith("thirty_two_streams"))
    pre = next(r for r in scenario.advise().recommendations if r.rule_id == "PRE001")
    assert pre.severity is Severity.LOW
    assert "cannot be told without the hardware" in pre.title
    assert "32 streams in flight may queue" in pre.title


def test_the_reasoning_note_names_the_missing_queue() -> None:
    scenario = next(s for s in SCENARIOS if s.name.startswith("gpt_oss_at_100"))
    meas = [r for r in scenario.advise().recommendations if r.rule_id == "MEAS007"]
    assert [r.severity for r in meas] == [Severity.LOW]
    assert "no queue figure at 100 streams in flight" in meas[0].title
