"""Issue 13, tried as an expert would: every finding of the issue at the other side of its boundary.

Each scenario is a run an engineer who knows the engines would build from one bullet of issue 13
(the defaults and flags by version, the false alarms, the budget dial, multi-GPU realism, partial
offload, speculative decoding, local prefill tuning, hardware suggestions), run through the real
analysis (canonical run → ``build_context`` with the real catalog and physics prior → ``advise``)
with the shared :func:`tests.scenarios.test_scenarios.check`, plus what such a reviewer signs:

* the rule that should speak speaks, with a flag the run's runtime (and version) has;
* the rules that should not, do not; a healthy run stays at ``low`` or below;
* no run is told to raise and to lower one dial (the prefill budget, the sequence cap).

Numbers are the physics' (decode ceiling = bandwidth ÷ bytes per token; Llama-3.1-8B bf16 reads
16.06 GB, Q4_K_M 4.9 GB; KV 128 KiB per token) and what the engines report on such hardware.
Scenarios marked ``xfail(strict=True)`` are failures found in rules outside this file's owner's
scope (DEC rules, the knob table, the catalog): the reason names the owner and the fix; they turn
into failures the day the fix lands, so the marker is removed with it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import pytest

from advisor.rules import Advice, Recommendation, Severity, runtimes
from tests.scenarios.test_scenarios import LLAMA8, Scenario, check, vllm

LLAMA70 = "meta-llama/Llama-3.1-70B-Instruct"
_RUNTIMES = ("vllm", "sglang", "tgi", "trtllm", "ollama", "llamacpp", "mlx")


@dataclass(frozen=True)
class Expert:
    """A scenario plus what an expert reviewer checks beyond the shared :func:`check`."""

    scenario: Scenario
    present: tuple[str, ...] = ()  # rule ids that must be recommended
    fix_has: tuple[tuple[str, str], ...] = ()  # (rule id, text in its fix for the run's runtime)
    fix_lacks: tuple[tuple[str, str], ...] = ()  # (rule id or "*", text no such fix may hold)
    title_has: tuple[tuple[str, str], ...] = ()  # (rule id, text in its title)
    at_most: tuple[tuple[str, Severity], ...] = ()  # (rule id, the worst severity it may reach)
    gain_at_most: tuple[tuple[str, float], ...] = ()  # (rule id, the largest to ÷ from its gain may claim)
    marks: tuple[Any, ...] = field(default=())

    @property
    def name(self) -> str:
        return self.scenario.name


def _recs(advice: Advice, rule_id: str) -> list[Recommendation]:
    return [r for r in advice.recommendations if rule_id in (r.rule_id, "*")]


def one_answer_per_dial(advice: Advice) -> None:
    """Never raise and lower one dial in one answer: the prefill budget, the sequence cap."""
    actions = {r.action for r in advice.recommendations}
    assert not {"raise-batched-tokens", "lower-batched-tokens"} <= actions, actions
    raises_seqs = any(r.rule_id == "CFG001" and r.action == "tune-runtime-parallelism" for r in advice.recommendations)
    lowers_seqs = any(r.action == "reduce-max-num-seqs" for r in advice.recommendations)
    assert not (raises_seqs and lowers_seqs), [(r.rule_id, r.action) for r in advice.recommendations]


def flags_exist(advice: Advice, runtime: str | None, version: str | None) -> None:
    """Every flag a fix names for the run's runtime is in the runtime table, and a run whose
    version is known is not handed a flag its version lacks."""
    if runtime not in _RUNTIMES:
        return
    for rec in advice.recommendations:
        text = rec.fix_for_runtime or ""
        # A command quoted for the operator (``nvidia-smi -q -d CLOCK``) is not the runtime's flag.
        for name in runtimes.flags_in(re.sub(r"nvidia-smi[^)]*", "", text)):
            assert runtimes.is_known_flag(runtime, name), (rec.rule_id, name, text)
            entry = next((f for f in runtimes.table()[runtime].flags if f.flag == name), None)
            if entry is not None and version is not None and entry.holds(version) is False:
                # annotate_fix must then say so next to the flag.
                assert f"{name}: {entry.versions}, not {version}" in text, (rec.rule_id, name, text)


def expert_check(expert: Expert) -> None:
    check(expert.scenario)
    advice = expert.scenario.advise()
    summary = [(r.rule_id, r.action, r.severity.label, r.title) for r in advice.recommendations]
    ids = [r.rule_id for r in advice.recommendations]
    for rule_id in expert.present:
        assert rule_id in ids, summary
    for rule_id, text in expert.fix_has:
        recs = _recs(advice, rule_id)
        assert recs, summary
        assert any(text in (r.fix_for_runtime or "") for r in recs), [r.fix_for_runtime for r in recs]
    for rule_id, text in expert.fix_lacks:
        for r in _recs(advice, rule_id):
            assert text not in (r.fix_for_runtime or ""), (r.rule_id, r.fix_for_runtime)
    for rule_id, text in expert.title_has:
        recs = _recs(advice, rule_id)
        assert any(text in r.title for r in recs), summary
    for rule_id, worst in expert.at_most:
        for r in _recs(advice, rule_id):
            assert r.severity <= worst, summary
    for rule_id, ratio in expert.gain_at_most:
        gains = [r.expected_gain for r in _recs(advice, rule_id) if r.expected_gain is not None]
        assert gains, summary
        for g in gains:
            assert g.to / g.from_ <= ratio + 1e-9, (rule_id, g)
    one_answer_per_dial(advice)
    setup = expert.scenario.run["setup"]
    flags_exist(advice, setup.get("runtime"), setup.get("runtime_version"))


# ---- shapes of runs ------------------------------------------------------------------------------


def ollama(version: str, hardware: str | dict[str, Any], *, model: str = "llama3.1:8b", **setup: Any) -> dict[str, Any]:
    return {"runtime": "ollama", "runtime_version": version, "hardware": hardware, "model": model, **setup}


def llamacpp(
    version: str, hardware: str, args: dict[str, Any], *, model: str = LLAMA8, quant: str = "Q4_K_M", **setup: Any
) -> dict[str, Any]:
    return {
        "runtime": "llamacpp",
        "runtime_version": version,
        "hardware": hardware,
        "model": model,
        "quantization": quant,
        "engine_args": args,
        **setup,
    }


def engine(
    runtime: str, version: str, hardware: str, *, model: str = LLAMA8, quant: str = "bf16", **setup: Any
) -> dict[str, Any]:
    return {
        "runtime": runtime,
        "runtime_version": version,
        "hardware": hardware,
        "model": model,
        "quantization": quant,
        **setup,
    }


def chat(concurrency: float, prompt: float, output: float = 256, n: int = 1000) -> dict[str, Any]:
    return {
        "num_requests": n,
        "concurrency": concurrency,
        "prompt_tokens_mean": prompt,
        "output_tokens_mean": output,
    }


def steady(decode: float, ttft: float, *, conc: float = 1, **extra: Any) -> dict[str, Any]:
    """Metrics of an unremarkable run: ITL a little above 1/decode, tight tails, nothing waiting."""
    itl = 1000.0 / decode
    return {
        "decode_tok_s": decode,
        "itl_ms": {"p50": itl, "p99": itl * 1.3},
        "ttft_ms": {"p50": ttft, "p99": ttft * 1.4},
        "requests_completed": 1000,
        **extra,
    }


#: Ollama 8 users, the queue measured: 13.3 s of a 14 s TTFT waits for a slot.
_EIGHT_USERS = {
    "workload": chat(8, 500, 300, n=400),
    "metrics": {
        "decode_tok_s": 150,
        "output_throughput_tok_s": 145,
        "ttft_ms": {"p50": 14000, "p99": 16500},
        "queue_ms": {"p50": 13300},
    },
}


def _ollama_prompt(
    version: str, hardware: str | dict[str, Any], prompt: float, *, decode: float = 120, **setup: Any
) -> dict[str, Any]:
    """One user, prompts of ``prompt`` tokens, prefill at 4,000 tok/s, a healthy 8B Q4 decode."""
    return {
        "setup": ollama(version, hardware, **setup),
        "workload": chat(1, prompt, 200, n=200),
        "metrics": {"decode_tok_s": decode, "prefill_tok_s": 4000, "ttft_ms": {"p50": prompt / 4, "p99": prompt / 3.6}},
    }


#: An inline 20 GiB card (an RTX 4000 Ada class part): below Ollama's 23 GiB tier.
_CARD_20GIB = {"id": "workstation-20gib", "kind": "gpu", "memory_gb": 20, "mem_bandwidth_gb_s": 360, "fp16_tflops": 100}

#: The issue's budget-dial run: budget 4096, 6,000-token prompts, ITL p50 40 / p99 110 ms.
_DIAL_WORKLOAD = chat(32, 6000, 300, n=2000)
_DIAL_METRICS = {
    "decode_tok_s": 25,
    "itl_ms": {"p50": 40, "p99": 110},
    "ttft_ms": {"p50": 900, "p99": 2000},
    "requests_completed": 2000,
}

_KV_FULL = {
    "decode_tok_s": 30,
    "running_mean": 6,
    "queue_waiting_mean": 26,
    "kv_cache_usage_mean": 0.97,
    "output_throughput_tok_s": 180,
    "ttft_ms": {"p50": 30000, "p99": 60000},
    "requests_completed": 2000,
}

_HEALTHY_H100 = {
    "decode_tok_s": 95,
    "ttft_ms": {"p50": 58, "p99": 140},
    "itl_ms": {"p50": 10.5, "p99": 24},
    "queue_waiting_mean": 0,
    "kv_cache_usage_mean": 0.08,
    "kv_cache_usage_max": 0.12,
    "preemptions": 0,
    "requests_completed": 2000,
}

_D = "engineer D (DEC rules, runtimes.toml)"
_T1 = "engineer T1 (knobs.py, whatif.py) / the catalog"

EXPERTS: list[Expert] = [
    # ---- Ollama's OLLAMA_NUM_PARALLEL: 1 before 0.2, auto (4 or 1) to 0.6.6, auto (2 or 1) to 0.9.6, 1 from 0.9.7 ----
    Expert(
        Scenario(
            "ollama_0_9_6_auto_parallelism_gets_no_default_of_one",
            {"setup": ollama("0.9.6", "nvidia-rtx-4090"), **_EIGHT_USERS},
            absent=("CFG001",),
            verdict="warn",
        ),
        present=("PRE005",),
        fix_has=(("PRE005", "OLLAMA_NUM_PARALLEL"),),
    ),
    Expert(
        Scenario(
            "ollama_0_6_6_auto_parallelism_gets_no_default_of_one",
            {"setup": ollama("0.6.6", "nvidia-rtx-4090"), **_EIGHT_USERS},
            absent=("CFG001",),
            verdict="warn",
        ),
    ),
    Expert(
        Scenario(
            "ollama_0_9_7_serves_one_request_at_a_time",
            {"setup": ollama("0.9.7", "nvidia-rtx-4090"), **_EIGHT_USERS},
            first="tune-runtime-parallelism",
            absent=("PRE005",),
            verdict="warn",
        ),
        fix_has=(("CFG001", "OLLAMA_NUM_PARALLEL=8"),),
        title_has=(("CFG001", "OLLAMA_NUM_PARALLEL, default"),),
    ),
    Expert(
        Scenario(
            "ollama_0_10_0_serves_one_request_at_a_time",
            {"setup": ollama("0.10.0", "nvidia-l40s"), **_EIGHT_USERS},
            first="tune-runtime-parallelism",
            verdict="warn",
        ),
        fix_has=(("CFG001", "OLLAMA_NUM_PARALLEL=8"),),
    ),
    # ---- Ollama's num_ctx: 2048 before 0.6.7, 4096 from 0.6.7, tiered by total VRAM from 0.15.5 ----
    Expert(
        Scenario(
            "ollama_0_6_6_prompts_of_exactly_2048_were_cut",
            _ollama_prompt("0.6.6", "nvidia-rtx-4090", 2048),
            verdict="warn",
        ),
        present=("CFG004",),
        title_has=(("CFG004", "2,048-token context window (a default)"),),
        fix_has=(("CFG004", '"num_ctx": 4096'),),
    ),
    Expert(
        Scenario(
            "ollama_0_6_6_a_4096_prompt_means_a_larger_window_was_set",
            # A cut prompt never counts more than num_ctx: 4,096 counted tokens on a 2,048 default
            # says the server was given a larger window.
            _ollama_prompt("0.6.6", "nvidia-rtx-4090", 4096),
            absent=("CFG004",),
            verdict="warn",
        ),
    ),
    Expert(
        Scenario(
            "ollama_0_6_7_prompts_of_exactly_4096_were_cut",
            _ollama_prompt("0.6.7", "nvidia-rtx-4090", 4096),
            verdict="warn",
        ),
        present=("CFG004",),
        fix_has=(("CFG004", '"num_ctx": 8192'),),
    ),
    Expert(
        Scenario(
            "ollama_0_15_4_still_defaults_to_4096",
            _ollama_prompt("0.15.4", "nvidia-a100-80gb-sxm", 4096),
            verdict="warn",
        ),
        present=("CFG004",),
    ),
    Expert(
        Scenario(
            "ollama_0_15_5_on_20_gib_defaults_to_4096",
            _ollama_prompt("0.15.5", _CARD_20GIB, 4096, quantization="Q4_K_M"),
            verdict="warn",
        ),
        present=("CFG004",),
    ),
    Expert(
        Scenario(
            "ollama_0_15_5_on_a_24_gib_4090_defaults_to_32k",
            # An RTX 4090 reports 23.99 GiB, above the 23 GiB tier: 32,768, so 4,096 is no cut.
            _ollama_prompt("0.15.5", "nvidia-rtx-4090", 4096),
            absent=("CFG004",),
            verdict="warn",
        ),
    ),
    Expert(
        Scenario(
            "ollama_0_15_5_on_a_48_gib_a6000_defaults_to_256k",
            _ollama_prompt("0.15.5", "nvidia-rtx-a6000", 32768),
            absent=("CFG004",),
            verdict="warn",
        ),
    ),
    Expert(
        Scenario(
            "ollama_0_15_5_on_an_80_gib_a100_defaults_to_256k",
            _ollama_prompt("0.15.5", "nvidia-a100-80gb-sxm", 32768),
            absent=("CFG004",),
            verdict="warn",
        ),
    ),
    Expert(
        Scenario(
            "ollama_0_15_5_counts_the_vram_of_both_4090s",
            # 2 × 23.99 GiB ≥ 47 GiB: the 256k tier, so 32,768-token prompts were not cut.
            _ollama_prompt("0.15.5", "nvidia-rtx-4090", 32768, gpu_count=2),
            absent=("CFG004",),
            verdict="warn",
        ),
    ),
    Expert(
        Scenario(
            "ollama_0_15_5_on_an_a10g_that_reports_22_5_gib_defaults_to_4096",
            # An A10G's 24 GB report as 23,028 MiB (22.5 GiB, ECC on): Ollama's 4,096 tier.
            _ollama_prompt("0.15.5", "nvidia-a10g", 4096),
            verdict="warn",
        ),
        present=("CFG004",),
    ),
    Expert(
        Scenario(
            "ollama_0_15_5_on_an_l40s_that_reports_45_gib_defaults_to_32k",
            # 864 GB/s over 4.9 GB of weights and 4 GB of KV at 32k: ~94 tok/s ceiling, 70 measured.
            _ollama_prompt("0.15.5", "nvidia-l40s", 32768, decode=70),
            verdict="warn",
        ),
        present=("CFG004",),
    ),
    # ---- llama.cpp: K and V cache types, flash attention by build, -ub/-b, offload, speculation ----
    Expert(
        Scenario(
            "llamacpp_a_quantized_k_cache_alone_needs_no_flash_attention",
            {
                "setup": llamacpp("b6000", "nvidia-rtx-4090", {"-ngl": 99, "-fa": "off", "-ctk": "q8_0"}),
                "workload": chat(1, 512, 128, n=200),
                "metrics": {"decode_tok_s": 150, "prefill_tok_s": 9000},
            },
            absent=("CFG003",),
            quiet=True,
            verdict="pass",
        ),
    ),
    Expert(
        Scenario(
            "llamacpp_a_quantized_v_cache_with_flash_attention_off",
            {
                "setup": llamacpp(
                    "b6000", "nvidia-rtx-4090", {"-ngl": 99, "-fa": "off", "-ctk": "q8_0", "-ctv": "q8_0"}
                ),
                "workload": chat(1, 512, 128, n=200),
                "metrics": {"decode_tok_s": 150, "prefill_tok_s": 9000},
            },
            first="fix-serving-stack",
            verdict="warn",
        ),
        present=("CFG003",),
        fix_has=(("CFG003", "-fa on"),),
        title_has=(("CFG003", "llama-server refuses the quantized V cache"),),
    ),
    Expert(
        Scenario(
            "llamacpp_auto_flash_attention_takes_a_quantized_v_cache",
            {
                "setup": llamacpp("b6500", "nvidia-rtx-4090", {"-ngl": 99, "-ctv": "q4_0"}),
                "workload": chat(1, 512, 128, n=200),
                "metrics": {"decode_tok_s": 150, "prefill_tok_s": 9000},
            },
            absent=("CFG003",),
            quiet=True,
            verdict="pass",
        ),
    ),
    Expert(
        Scenario(
            "llamacpp_an_old_build_without_fa_refuses_a_quantized_v_cache",
            # b5000 (2025-04) predates -fa auto: flash attention is off unless -fa is given.
            {
                "setup": llamacpp("b5000", "nvidia-rtx-4090", {"-ngl": 99, "-ctv": "q4_0"}),
                "workload": chat(1, 512, 128, n=200),
                "metrics": {"decode_tok_s": 150, "prefill_tok_s": 9000},
            },
            verdict="warn",
        ),
        present=("CFG003",),
    ),
    Expert(
        Scenario(
            "llamacpp_a_short_ngl_reads_layers_from_system_memory",
            {
                "setup": llamacpp("b6500", "nvidia-rtx-4090", {"-ngl": 20, "-fa": "on"}),
                "workload": chat(1, 512, 128, n=200),
                "metrics": {"decode_tok_s": 45, "prefill_tok_s": 3000},
            },
            first="fix-serving-stack",
            verdict="warn",
        ),
        present=("DEC006",),
        fix_has=(("DEC006", "-ngl 999"),),
    ),
    Expert(
        Scenario(
            "llamacpp_n_cpu_moe_is_a_partial_offload",
            # gpt-oss-120b (63 GB in MXFP4) on a 24 GB card with 30 expert layers on the CPU.
            {
                "setup": llamacpp(
                    "b6500",
                    "nvidia-rtx-4090",
                    {"-ngl": 99, "-fa": "on", "--n-cpu-moe": 30},
                    model="openai/gpt-oss-120b",
                    quant="mxfp4",
                ),
                "workload": chat(1, 500, 256, n=200),
                "metrics": {"decode_tok_s": 30, "prefill_tok_s": 300},
            },
            verdict="warn",
        ),
        present=("DEC006",),
        fix_has=(("DEC006", "--n-cpu-moe"),),
    ),
    Expert(
        Scenario(
            "llamacpp_moe_with_every_layer_on_the_gpu_is_not_offloaded",
            # Qwen3-30B-A3B Q4_K_M is ~18.6 GB, -ngl 99 covers its 48 layers on a 24 GB card: MoE
            # routing keeps batch-1 decode well under the 3.3B-active ceiling without any offload.
            {
                "setup": llamacpp("b7300", "nvidia-rtx-4090", {"-ngl": 99, "-fa": "on"}, model="Qwen/Qwen3-30B-A3B"),
                "workload": chat(1, 500, 256, n=50),
                "metrics": {"decode_tok_s": 190, "prefill_tok_s": 6000},
            },
            absent=("DEC006",),
            quiet=True,
            verdict="pass",
        ),
    ),
    Expert(
        Scenario(
            "gpt_oss_20b_at_150_tok_s_on_a_4090_is_not_offloaded",
            # ~13 GB of MXFP4 weights fit a 24 GB card and -ngl 99 puts all 24 layers on it; 150 tok/s is
            # what llama.cpp reaches: MoE routing, not system memory, keeps it under the active ceiling.
            {
                "setup": llamacpp(
                    "b6500", "nvidia-rtx-4090", {"-ngl": 99, "-fa": "on"}, model="openai/gpt-oss-20b", quant="mxfp4"
                ),
                "workload": chat(1, 1000, 300, n=200),
                "metrics": {"decode_tok_s": 150, "prefill_tok_s": 6000},
            },
            absent=("DEC006",),
            verdict="pass",
        ),
    ),
    Expert(
        Scenario(
            "llamacpp_small_micro_batch_on_long_prompts",
            {
                "setup": llamacpp("b6500", "nvidia-rtx-4090", {"-ngl": 99, "-fa": "on", "-ub": 128, "-b": 512}),
                "workload": chat(1, 8000, 128, n=200),
                "metrics": {"decode_tok_s": 140, "prefill_tok_s": 2500, "ttft_ms": {"p50": 3200, "p99": 3400}},
            },
            first="raise-batched-tokens",
            verdict="warn",
        ),
        present=("CFG009",),
        fix_has=(("CFG009", "-ub 1024"),),
    ),
    Expert(
        Scenario(
            "llamacpp_flash_attention_off_on_long_prompts",
            {
                "setup": llamacpp("b6500", "nvidia-rtx-4090", {"-ngl": 99, "-fa": "off"}),
                "workload": chat(1, 8000, 128, n=200),
                "metrics": {"decode_tok_s": 140, "prefill_tok_s": 5000, "ttft_ms": {"p50": 1600, "p99": 1700}},
            },
            verdict="warn",
        ),
        present=("CFG009",),
        fix_has=(("CFG009", "-fa on"),),
    ),
    Expert(
        Scenario(
            "llamacpp_a_draft_model_at_sixteen_slots_costs_more_than_it_saves",
            {
                "setup": llamacpp(
                    "b7300", "nvidia-rtx-4090", {"-ngl": 99, "-fa": "on", "-md": "llama-3.2-1b-q8_0.gguf", "-np": 16}
                ),
                "workload": chat(16, 512, 128, n=500),
                "metrics": {"decode_tok_s": 40, "output_throughput_tok_s": 600, "prefill_tok_s": 8000},
            },
            verdict="warn",
        ),
        present=("DEC007",),
        fix_has=(("DEC007", "-md"),),
    ),
    Expert(
        Scenario(
            "llamacpp_b5606_lowers_the_draft_with_draft_max",
            # June 2025: --spec-draft-n-max (ggml-org/llama.cpp#22397, 2026-04) did not exist yet.
            {
                "setup": llamacpp(
                    "b5606", "nvidia-rtx-4090", {"-ngl": 99, "-fa": "on", "-md": "llama-3.2-1b-q8_0.gguf", "-np": 16}
                ),
                "workload": chat(16, 512, 128, n=500),
                "metrics": {"decode_tok_s": 40, "output_throughput_tok_s": 600, "prefill_tok_s": 8000},
            },
            verdict="warn",
        ),
        # No build number is known for #22397 (runtimes.toml bounds both spellings by the pull request), so
        # the fix names --draft-max with the condition under which --spec-draft-n-max replaces it.
        fix_has=(("DEC007", "--draft-max (builds before ggml-org/llama.cpp#22397"),),
    ),
    Expert(
        Scenario(
            "llamacpp_np_auto_slots_share_the_whole_context",
            # b7300: -np auto starts 4 slots on one unified KV cache; each may use all of -c 8192.
            {
                "setup": llamacpp("b7300", "nvidia-rtx-4090", {"-ngl": 99, "-fa": "on", "-c": 8192}),
                "workload": chat(4, 6000, 256, n=200),
                "metrics": {"decode_tok_s": 110, "prefill_tok_s": 7000, "ttft_ms": {"p50": 900, "p99": 1500}},
            },
            absent=("CFG004", "CFG001"),
            verdict="warn",
        ),
    ),
    Expert(
        Scenario(
            "llamacpp_an_explicit_np_splits_the_context",
            {
                "setup": llamacpp("b7300", "nvidia-rtx-4090", {"-ngl": 99, "-fa": "on", "-c": 8192, "-np": 4}),
                "workload": chat(4, 6000, 256, n=200),
                "metrics": {"decode_tok_s": 110, "prefill_tok_s": 7000, "ttft_ms": {"p50": 900, "p99": 1500}},
            },
            first="fix-serving-stack",
            verdict="warn",
        ),
        present=("CFG004",),
        fix_has=(("CFG004", "-c 32768 for -np 4"),),
    ),
    Expert(
        Scenario(
            "llamacpp_b5606_one_slot_is_raised_without_kv_unified",
            # June 2025: one slot by default, and --kv-unified (ggml-org/llama.cpp#14363, opened
            # 2025-06-24) not yet there: more slots means -np with -c raised to match.
            {
                "setup": llamacpp("b5606", "nvidia-rtx-4090", {"-ngl": 99, "-fa": "on", "-c": 8192}),
                "workload": chat(4, 6000, 256, n=200),
                "metrics": {"decode_tok_s": 110, "prefill_tok_s": 7000, "ttft_ms": {"p50": 900, "p99": 1500}},
            },
            first="tune-runtime-parallelism",
            verdict="warn",
        ),
        fix_has=(("CFG001", "-np 4"),),
        fix_lacks=(("CFG001", "--kv-unified"),),
    ),
    Expert(
        Scenario(
            "vllm_0_6_3_is_told_which_versions_have_the_negative_flag",
            # V0 (before 0.8) has prefix caching off; --no-enable-prefix-caching only exists from 0.6.5.
            {
                "setup": vllm("nvidia-l4", version="0.6.3"),
                "workload": {**chat(1, 3500, 150, n=400), "shared_prefix_tokens": 3000},
                "metrics": {"decode_tok_s": 16.3, "ttft_ms": {"p50": 950, "p99": 1100}},
            },
            first="enable-prefix-caching",
            verdict="warn",
        ),
        fix_has=(("PRE002", "--no-enable-prefix-caching: 0.6.5 and later, not 0.6.3"),),
    ),
    # ---- TGI on CUDA and on Gaudi; TensorRT-LLM's memory fraction and FP8 by generation ----
    Expert(
        Scenario(
            "tgi_on_cuda_capped_by_max_batch_size",
            {
                "setup": engine("tgi", "3.3.0", "nvidia-h100-sxm", engine_args={"max_batch_size": 16}),
                "workload": chat(64, 1000, 256, n=2000),
                "metrics": {
                    "decode_tok_s": 90,
                    "output_throughput_tok_s": 1400,
                    "ttft_ms": {"p50": 4000, "p99": 9000},
                    "requests_completed": 2000,
                },
            },
            first="tune-runtime-parallelism",
            verdict="warn",
        ),
        fix_has=(("CFG001", "--max-batch-size 64"), ("CFG001", "--max-concurrent-requests")),
    ),
    Expert(
        Scenario(
            "tgi_on_gaudi_sizes_the_padded_decode_batch",
            {
                "setup": engine("tgi", "3.3.0", "intel-gaudi2", engine_args={"max_batch_size": 16}),
                "workload": chat(64, 1000, 256, n=2000),
                "metrics": {
                    "decode_tok_s": 90,
                    "output_throughput_tok_s": 1400,
                    "ttft_ms": {"p50": 4000, "p99": 9000},
                    "requests_completed": 2000,
                },
            },
            first="tune-runtime-parallelism",
            verdict="warn",
        ),
        fix_has=(("CFG001", "--max-batch-size 64 (on Gaudi"),),
    ),
    Expert(
        Scenario(
            "tgi_tails_under_batching_cap_the_batch_not_the_door",
            # --max-concurrent-requests turns requests away (429); --max-batch-size queues them.
            {
                "setup": engine("tgi", "3.3.0", "nvidia-l40s"),
                "workload": chat(64, 300, 400, n=3000),
                "metrics": {"decode_tok_s": 32, "tpot_ms": {"p50": 28, "p99": 250}, "requests_completed": 3000},
            },
            verdict="warn",
        ),
        present=("SCH002",),
        fix_has=(("SCH002", "--max-batch-size 32"),),
        fix_lacks=(("SCH002", "--max-concurrent-requests"),),
    ),
    Expert(
        Scenario(
            "trtllm_on_an_a10g_never_goes_fp8",
            {
                "setup": engine("trtllm", "1.0.0", "nvidia-a10g"),
                "workload": chat(32, 1500, 300, n=2000),
                "metrics": _KV_FULL,
            },
            verdict="warn",
        ),
        present=("CAP001", "DEC001"),
        fix_has=(("CAP001", "--tp_size 2"), ("DEC001", "int8_wo")),
        fix_lacks=(("*", "fp8"),),
        # The probe: 33.5 → 66.7 tok/s (2×) from FP8 this GPU cannot run.
        gain_at_most=(("DEC001", 1.6),),
    ),
    Expert(
        Scenario(
            "trtllm_memory_fraction_is_of_what_the_weights_leave",
            {
                "setup": engine(
                    "trtllm", "1.0.0", "nvidia-l40s", engine_args={"kv_cache_free_gpu_memory_fraction": 0.5}
                ),
                "workload": chat(32, 1500, 300, n=2000),
                "metrics": _KV_FULL,
            },
            first="raise-gpu-memory-utilization",
            verdict="warn",
        ),
        fix_has=(("CAP001", "free_gpu_memory_fraction: 0.95"), ("CAP001", "left after the weights")),
    ),
    Expert(
        Scenario(
            "sglang_full_pool_predicts_the_fraction_its_fix_names",
            {
                "setup": engine("sglang", "0.5.5", "nvidia-a10g", engine_args={"mem_fraction_static": 0.8}),
                "workload": chat(32, 1500, 300, n=2000),
                "metrics": _KV_FULL,
            },
            top3=("raise-gpu-memory-utilization",),
            verdict="warn",
        ),
        fix_has=(("CAP001", "--mem-fraction-static 0.9"),),
        title_has=(("CAP001", "a memory fraction of 0.9 grows it"),),
    ),
    # ---- quantization by generation ----
    Expert(
        Scenario(
            "vllm_on_a_t4_is_offered_awq_not_fp8",
            {
                "setup": vllm("nvidia-t4"),
                "workload": chat(1, 400, 300, n=500),
                "metrics": {"decode_tok_s": 18, "ttft_ms": {"p50": 300, "p99": 380}},
            },
            first="quantize-weights",
            verdict="warn",
        ),
        fix_has=(("DEC001", "AWQ"),),
        fix_lacks=(("DEC001", "fp8"),),
    ),
    Expert(
        Scenario(
            "vllm_on_an_a100_gets_fp8_weight_only",
            {
                "setup": vllm("nvidia-a100-80gb-sxm"),
                "workload": chat(1, 400, 300, n=500),
                "metrics": {"decode_tok_s": 115, "ttft_ms": {"p50": 60, "p99": 80}},
            },
            slo={"decode_tok_s_min": 150},
            first="quantize-weights",
            verdict="fail",
        ),
        fix_has=(("DEC001", "weight-only"),),
    ),
    Expert(
        Scenario(
            "vllm_fp8_on_an_h100_gains_at_most_what_vllm_documents",
            {
                "setup": vllm("nvidia-h100-sxm"),
                "workload": chat(1, 400, 300, n=500),
                "metrics": {"decode_tok_s": 190, "ttft_ms": {"p50": 30, "p99": 45}},
            },
            slo={"decode_tok_s_min": 250},
            first="quantize-weights",
            verdict="fail",
        ),
        fix_lacks=(("DEC001", "weight-only"),),
        # vLLM documents "up to a 1.6x improvement" for FP8 W8A8, not the 2× ratio of the ceilings.
        gain_at_most=(("DEC001", 1.6),),
    ),
    Expert(
        Scenario(
            "tgi_fp8_on_ampere_is_weight_only",
            {
                "setup": engine("tgi", "3.3.0", "nvidia-a10g"),
                "workload": chat(1, 400, 300, n=500),
                "metrics": {"decode_tok_s": 33.5, "ttft_ms": {"p50": 210, "p99": 260}},
            },
            slo={"decode_tok_s_min": 45},
            first="quantize-weights",
            verdict="fail",
        ),
        fix_has=(("DEC001", "weight-only"),),
        gain_at_most=(("DEC001", 1.6),),
    ),
    Expert(
        Scenario(
            "tgi_on_a_t4_is_offered_awq",
            {
                "setup": engine("tgi", "3.3.0", "nvidia-t4"),
                "workload": chat(1, 400, 300, n=500),
                "metrics": {"decode_tok_s": 18, "ttft_ms": {"p50": 300, "p99": 380}},
            },
            slo={"decode_tok_s_min": 30},
            first="quantize-weights",
            verdict="fail",
        ),
        fix_has=(("DEC001", "--quantize awq"),),
        fix_lacks=(("DEC001", "fp8"),),
    ),
    Expert(
        Scenario(
            "b200_fp8_at_the_ceiling_is_offered_nvfp4",
            # Blackwell runs FP4 natively (capabilities.csv nvfp4 = yes): the 4-bit step is NVFP4, not AWQ.
            {
                "setup": vllm("nvidia-b200", model=LLAMA70, quant="fp8"),
                "workload": chat(1, 1000, 256, n=500),
                "metrics": steady(100, 60),
            },
            slo={"decode_tok_s_min": 150},
            first="quantize-weights",
            verdict="fail",
        ),
        fix_has=(("DEC001", "NVFP4"),),
    ),
    # ---- the budget dial ----
    Expert(
        Scenario(
            "the_issue_dial_run_on_vllm_gets_one_answer",
            {
                "setup": vllm("nvidia-h100-sxm", engine_args={"max_num_batched_tokens": 4096}),
                "workload": _DIAL_WORKLOAD,
                "metrics": _DIAL_METRICS,
            },
            absent=("SCH001",),
            verdict="warn",
        ),
        present=("PRE004",),
        title_has=(("PRE004", "cannot meet both objectives"), ("PRE004", "≈ 256 ms")),
        fix_has=(("PRE004", "disaggregate"),),
        # vLLM 0.11 caches prefixes by default: no "enable" for a switch that is on.
        fix_lacks=(("PRE004", "--enable-prefix-caching"),),
        at_most=(("PRE004", Severity.LOW),),
    ),
    Expert(
        Scenario(
            "the_issue_dial_run_on_sglang_without_mixed_chunks",
            {
                "setup": engine("sglang", "0.5.5", "nvidia-h100-sxm", engine_args={"chunked_prefill_size": 4096}),
                "workload": _DIAL_WORKLOAD,
                "metrics": _DIAL_METRICS,
            },
            absent=("SCH001",),
            verdict="warn",
        ),
        present=("PRE004",),
        title_has=(("PRE004", "chunked_prefill_size 4,096 cannot meet both objectives"),),
    ),
    Expert(
        Scenario(
            "the_issue_dial_run_on_tgi_and_trtllm_reads_the_same",
            {
                "setup": engine("tgi", "3.3.0", "nvidia-h100-sxm", engine_args={"max_batch_prefill_tokens": 4096}),
                "workload": _DIAL_WORKLOAD,
                "metrics": _DIAL_METRICS,
            },
            absent=("SCH001",),
            verdict="warn",
        ),
        title_has=(("PRE004", "cannot meet both objectives"),),
    ),
    Expert(
        Scenario(
            "both_slos_unmeetable_by_the_dial_say_so_and_name_what_can",
            {
                "setup": vllm("nvidia-h100-sxm", engine_args={"max_num_batched_tokens": 4096}),
                "workload": _DIAL_WORKLOAD,
                "metrics": _DIAL_METRICS,
            },
            slo={"ttft_p99_ms": 1000, "itl_p99_ms": 100},
            absent=("SCH001",),
            verdict="fail",
        ),
        title_has=(("PRE004", "cannot meet both objectives"),),
        fix_has=(("PRE004", "prefix"), ("PRE004", "add capacity")),
    ),
    Expert(
        Scenario(
            "only_the_itl_slo_breached_lowers_the_budget",
            {
                "setup": vllm("nvidia-h100-sxm", engine_args={"max_num_batched_tokens": 4096}),
                "workload": _DIAL_WORKLOAD,
                "metrics": _DIAL_METRICS,
            },
            slo={"itl_p99_ms": 100},
            first=None,
            absent=("PRE004",),
            verdict="fail",
        ),
        present=("SCH001",),
        fix_has=(("SCH001", "--max-num-batched-tokens 2048"),),
    ),
    Expert(
        Scenario(
            "only_the_ttft_slo_breached_raises_the_budget",
            {
                "setup": vllm("nvidia-h100-sxm", engine_args={"max_num_batched_tokens": 4096}),
                "workload": _DIAL_WORKLOAD,
                "metrics": {**_DIAL_METRICS, "ttft_ms": {"p50": 900, "p99": 1600}},
            },
            slo={"ttft_p50_ms": 600},
            absent=("SCH001",),
            verdict="fail",
        ),
        present=("PRE004",),
        fix_has=(("PRE004", "--max-num-batched-tokens 8192"),),
    ),
    Expert(
        Scenario(
            "sglang_without_mixed_chunks_gives_the_prompt_the_whole_budget",
            # No --enable-mixed-chunk: a 512-token chunk is all prompt, 8 steps for 4,000 tokens.
            {
                "setup": engine("sglang", "0.5.5", "nvidia-h100-sxm", engine_args={"chunked_prefill_size": 512}),
                "workload": chat(64, 4000, 300, n=2000),
                "metrics": {"decode_tok_s": 60, "itl_ms": {"p50": 14, "p99": 30}, "ttft_ms": {"p50": 900, "p99": 1500}},
            },
            first="raise-batched-tokens",
            verdict="warn",
        ),
        title_has=(("PRE004", "into 8 steps"),),
        fix_has=(("PRE004", "--chunked-prefill-size 8192"),),
    ),
    Expert(
        Scenario(
            "sglang_with_mixed_chunks_shares_the_budget_with_64_decodes",
            # --enable-mixed-chunk: 64 decodes take their tokens first, 448 left, 9 steps.
            {
                "setup": engine(
                    "sglang",
                    "0.5.5",
                    "nvidia-h100-sxm",
                    engine_args={"chunked_prefill_size": 512, "enable_mixed_chunk": True},
                ),
                "workload": chat(64, 4000, 300, n=2000),
                "metrics": {"decode_tok_s": 60, "itl_ms": {"p50": 14, "p99": 30}, "ttft_ms": {"p50": 900, "p99": 1500}},
            },
            first="raise-batched-tokens",
            verdict="warn",
        ),
        title_has=(("PRE004", "into 9 steps"),),
    ),
    Expert(
        Scenario(
            "speculative_decoding_bursts_are_not_a_budget_or_batch_tail",
            {
                "setup": vllm(
                    "nvidia-h100-sxm",
                    engine_args={
                        "max_num_batched_tokens": 16384,
                        "speculative_config": {"method": "eagle", "num_speculative_tokens": 3},
                    },
                ),
                "workload": chat(32, 6000, 300, n=2000),
                "metrics": {"decode_tok_s": 70, "itl_ms": {"p50": 12, "p99": 240}, "ttft_ms": {"p50": 350, "p99": 900}},
            },
            slo={"itl_p99_ms": 100},
            absent=("SCH001", "SCH002"),
            verdict="fail",
        ),
        present=("DEC007",),
    ),
    Expert(
        Scenario(
            "sglang_stream_interval_eight_is_bursty_by_design",
            {
                "setup": engine(
                    "sglang",
                    "0.5.5",
                    "nvidia-h100-sxm",
                    engine_args={"chunked_prefill_size": 8192, "stream_interval": 8},
                ),
                "workload": chat(32, 6000, 300, n=2000),
                "metrics": {"decode_tok_s": 60, "itl_ms": {"p50": 14, "p99": 260}, "ttft_ms": {"p50": 400, "p99": 900}},
            },
            absent=("SCH001", "SCH002"),
            verdict="pass",
        ),
    ),
    Expert(
        Scenario(
            "short_prompts_cannot_explain_a_long_tail",
            # 600-token prompts prefill in ~25 ms on an H100: not the 228 ms gap between p50 and p99.
            {
                "setup": vllm("nvidia-h100-sxm", engine_args={"max_num_batched_tokens": 8192}),
                "workload": chat(32, 600, 300, n=2000),
                "metrics": {"decode_tok_s": 70, "itl_ms": {"p50": 12, "p99": 240}, "ttft_ms": {"p50": 80, "p99": 300}},
            },
            absent=("SCH001", "PRE004"),
            verdict="warn",  # SCH002: a 20× tail at 32 streams is the batch's, not the chunks'
        ),
        present=("SCH002",),
    ),
    Expert(
        Scenario(
            "sglang_16k_chunks_without_mixed_decode_stall_streams",
            {
                "setup": engine("sglang", "0.5.5", "nvidia-h100-sxm", engine_args={"chunked_prefill_size": 16384}),
                "workload": chat(32, 6000, 300, n=2000),
                "metrics": {"decode_tok_s": 60, "itl_ms": {"p50": 14, "p99": 260}, "ttft_ms": {"p50": 400, "p99": 900}},
            },
            slo={"itl_p99_ms": 100},
            first="lower-batched-tokens",
            absent=("PRE004",),
            verdict="fail",
        ),
        fix_has=(("SCH001", "--chunked-prefill-size 2048"),),
    ),
    Expert(
        Scenario(
            "vllm_v0_long_prompts_stall_streams_with_chunking_unstated",
            # vLLM 0.6 (V0) chunks only long-context models by default: unstated, the 4,000-token
            # prefill (~430 ms on an L40S) explains the 300 ms gap, so chunking is named, not the batch.
            {
                "setup": vllm("nvidia-l40s", version="0.6.3"),
                "workload": chat(16, 4000, 256, n=1500),
                "metrics": {
                    "decode_tok_s": 34,
                    "itl_ms": {"p50": 27, "p99": 330},
                    "ttft_ms": {"p50": 520, "p99": 1400},
                    "requests_completed": 1500,
                },
            },
            absent=("SCH002",),
            verdict="warn",
        ),
        present=("CFG002",),
        fix_has=(("CFG002", "--enable-chunked-prefill --max-num-batched-tokens 2048"),),
        at_most=(("CFG002", Severity.MODERATE),),
    ),
    Expert(
        Scenario(
            "a_prefill_tail_is_not_blamed_on_the_batch",
            # TGI 3 chunks by default; a 4,000-token prompt's ~430 ms prefill, not the 16-stream batch,
            # explains ITL p99 330 vs p50 27: no "reduce the batch".
            {
                "setup": engine("tgi", "3.3.0", "nvidia-l40s"),
                "workload": chat(16, 4000, 256, n=1500),
                "metrics": {
                    "decode_tok_s": 34,
                    "itl_ms": {"p50": 27, "p99": 330},
                    "ttft_ms": {"p50": 520, "p99": 1400},
                    "requests_completed": 1500,
                },
            },
            absent=("SCH002",),
            verdict="warn",
        ),
    ),
    Expert(
        Scenario(
            "ollama_a_cold_calls_prefill_is_not_a_slow_stack",
            # OLLAMA_KEEP_ALIVE=0 unloads after every call: 2.4 s of the 2.5 s TTFT is the load, and the
            # first call's prefill carries one-time kernel set-up; the advice is to keep it loaded.
            {
                "setup": ollama("0.12.3", "nvidia-rtx-4090", engine_args={"OLLAMA_KEEP_ALIVE": "0"}),
                "workload": chat(1, 300, 200, n=20),
                "metrics": {
                    "load_ms": 2400,
                    "ttft_ms": {"mean": 2500, "p50": 2480},
                    "prefill_tok_s": 1200,
                    "decode_tok_s": 150,
                },
            },
            first="warm-up-model",
            absent=("REG002",),
            verdict="warn",
        ),
        fix_has=(("PRE006", "OLLAMA_KEEP_ALIVE=-1"),),
    ),
    Expert(
        Scenario(
            "sixteen_gpus_without_tp_are_replicas_not_one_slow_gpu",
            # 512 streams over 16 H100s (no tensor parallelism stated): 32 per replica. 60 tok/s a
            # stream is inside a replica's ceiling; the setup is not "what ran" wrongly.
            {
                "setup": vllm("nvidia-h100-sxm", gpu_count=16),
                "workload": chat(512, 4000, 300, n=20000),
                "metrics": {
                    "decode_tok_s": 60,
                    "ttft_ms": {"p50": 300, "p99": 900},
                    "itl_ms": {"p50": 14, "p99": 40},
                    "requests_completed": 20000,
                },
            },
            absent=("MEAS006",),
            verdict="pass",
        ),
    ),
    Expert(
        Scenario(
            "moe_batch_above_the_uniform_routing_ceiling_is_not_a_wrong_setup",
            # Qwen3-30B-A3B BF16 on an H100 at 64 streams: uniform routing would read nearly every
            # expert each step (about 52 tok/s a stream); 70 tok/s means routing was skewed, which
            # is physics, not a wrong declaration. Below the bound where all tokens share one
            # token's experts.
            {
                "setup": vllm("nvidia-h100-sxm", model="qwen3-30b-a3b"),
                "workload": chat(64, 1000, 300, n=5000),
                "metrics": {"decode_tok_s": 70, "ttft_ms": {"p50": 200, "p99": 600}, "requests_completed": 5000},
            },
            absent=("MEAS006",),
            verdict="pass",
        ),
    ),
    Expert(
        Scenario(
            "moe_batch_above_even_the_skewed_routing_bound_is_a_wrong_setup",
            # The same run at 1,000 tok/s a stream: more than the bandwidth allows even if every
            # token of a step read the same eight experts.
            {
                "setup": vllm("nvidia-h100-sxm", model="qwen3-30b-a3b"),
                "workload": chat(64, 1000, 300, n=5000),
                "metrics": {"decode_tok_s": 1000, "ttft_ms": {"p50": 200, "p99": 600}, "requests_completed": 5000},
            },
            verdict="warn",
        ),
        present=("MEAS006",),
    ),
    # ---- partial offload ----
    Expert(
        Scenario(
            "ollama_size_vram_half_of_a_70b",
            {
                "setup": ollama("0.12.3", "nvidia-rtx-4090", model="llama3.1:70b"),
                "workload": chat(1, 500, 256, n=50),
                "metrics": {"decode_tok_s": 4, "prefill_tok_s": 80, "gpu_resident_share": 0.5},
            },
            first="fix-serving-stack",
            verdict="warn",
        ),
        present=("DEC006",),
        fix_has=(("DEC006", "ollama ps"),),
    ),
    Expert(
        Scenario(
            "ollama_all_on_the_gpu_is_no_offload",
            {
                "setup": ollama("0.12.3", "nvidia-rtx-4090"),
                "workload": chat(1, 500, 256, n=200),
                "metrics": {"decode_tok_s": 150, "prefill_tok_s": 5000, "gpu_resident_share": 1.0},
            },
            absent=("DEC006", "DEC002"),
            quiet=True,
            verdict="pass",
        ),
    ),
    # ---- healthy Apple, AMD, CPU, multi-GPU runs stay quiet ----
    Expert(
        Scenario(
            "healthy_m2_max_llamacpp_stays_quiet",
            # 400 GB/s ÷ 4.9 GB ≈ 82 tok/s ceiling; 58 is a good Metal run.
            {
                "setup": llamacpp("b6500", "apple-m2-max", {"-ngl": 99, "-fa": "on"}),
                "workload": chat(1, 512, 256, n=200),
                "metrics": {"decode_tok_s": 58, "prefill_tok_s": 700},
            },
            quiet=True,
            verdict="pass",
        ),
    ),
    Expert(
        Scenario(
            "healthy_m3_ultra_70b_stays_quiet",
            {
                "setup": llamacpp("b6500", "apple-m3-ultra", {"-ngl": 99, "-fa": "on"}, model=LLAMA70),
                "workload": chat(1, 500, 256, n=50),
                "metrics": {"decode_tok_s": 16.5, "prefill_tok_s": 120},
            },
            verdict="warn",  # the smaller-model note is moderate: 16 tok/s is slow to read
        ),
        fix_lacks=(("DEC004", "NVIDIA"), ("DEC004", "Instinct"), ("DEC004", "Intel")),
    ),
    Expert(
        Scenario(
            "healthy_mi300x_70b_fp8_stays_quiet",
            {
                "setup": vllm("amd-mi300x", model=LLAMA70, quant="fp8"),
                "workload": chat(1, 1000, 256, n=1000),
                "metrics": steady(40, 120),
            },
            quiet=True,
            verdict="pass",
        ),
    ),
    Expert(
        Scenario(
            "healthy_ryzen_cpu_with_no_gpu_stays_quiet",
            {
                "setup": llamacpp("b6500", "amd-ryzen-9-7950x", {"-ngl": 0}, gpu_count=0),
                "workload": chat(1, 512, 256, n=50),
                "metrics": {"decode_tok_s": 14, "prefill_tok_s": 90},
            },
            quiet=True,
            verdict="pass",
        ),
    ),
    Expert(
        Scenario(
            "healthy_strix_halo_stays_quiet",
            # 256 GB/s ÷ 4.9 GB ≈ 52 tok/s; 40 is a good ROCm/Vulkan run.
            {
                "setup": llamacpp("b6500", "amd-ryzen-ai-max-plus-395", {"-ngl": 99, "-fa": "on"}),
                "workload": chat(1, 512, 256, n=200),
                "metrics": {"decode_tok_s": 40, "prefill_tok_s": 900},
            },
            quiet=True,
            verdict="pass",
        ),
    ),
    Expert(
        Scenario(
            "healthy_dgx_spark_q4_stays_quiet",
            {
                "setup": llamacpp("b6500", "nvidia-dgx-spark-gb10", {"-ngl": 99, "-fa": "on"}),
                "workload": chat(1, 512, 256, n=200),
                "metrics": {"decode_tok_s": 38, "prefill_tok_s": 3000},
            },
            quiet=True,
            verdict="pass",
        ),
    ),
    Expert(
        Scenario(
            "healthy_jetson_orin_stays_quiet",
            # 204.8 GB/s unified LPDDR5 ÷ 4.9 GB ≈ 42 tok/s; 30 is a good Jetson run.
            {
                "setup": llamacpp("b6500", "nvidia-jetson-agx-orin-64gb", {"-ngl": 99, "-fa": "on"}),
                "workload": chat(1, 300, 200, n=20),
                "metrics": {"decode_tok_s": 30, "prefill_tok_s": 700},
            },
            quiet=True,
            verdict="pass",
        ),
    ),
    Expert(
        Scenario(
            "healthy_vllm_overcommit_on_an_h200_is_silent",
            {
                "setup": vllm("nvidia-h200-sxm", max_model_len=131072, engine_args={"max_num_seqs": 256}),
                "workload": chat(16, 1000, 256, n=2000),
                "metrics": _HEALTHY_H100,
            },
            quiet=True,
            absent=("CAP003", "CAP001"),
            verdict="pass",
        ),
    ),
    Expert(
        Scenario(
            "healthy_vllm_overcommit_on_an_a100_is_silent",
            {
                "setup": vllm("nvidia-a100-80gb-sxm", max_model_len=131072, engine_args={"max_num_seqs": 256}),
                "workload": chat(16, 1000, 256, n=2000),
                "metrics": {**_HEALTHY_H100, "decode_tok_s": 60, "itl_ms": {"p50": 16.5, "p99": 30}},
            },
            quiet=True,
            absent=("CAP003", "CAP001"),
            verdict="pass",
        ),
    ),
    Expert(
        Scenario(
            "llama_70b_tp8_h100_at_65_is_normal",
            {
                "setup": vllm("nvidia-h100-sxm", model=LLAMA70, gpu_count=8, tensor_parallel=8),
                "workload": chat(1, 1000, 256),
                "metrics": steady(65, 80),
            },
            quiet=True,
            absent=("DEC002", "REG001"),
            verdict="pass",
        ),
    ),
    Expert(
        Scenario(
            "llama_70b_tp8_a100_at_45_is_normal",
            {
                "setup": vllm("nvidia-a100-80gb-sxm", model=LLAMA70, gpu_count=8, tensor_parallel=8),
                "workload": chat(1, 1000, 256),
                "metrics": steady(45, 110),
            },
            quiet=True,
            absent=("DEC002", "REG001"),
            verdict="pass",
        ),
    ),
    Expert(
        Scenario(
            "llama_70b_tp8_mi300x_over_xgmi_at_70_is_normal",
            {
                "setup": vllm("amd-mi300x", model=LLAMA70, gpu_count=8, tensor_parallel=8),
                "workload": chat(1, 1000, 256),
                "metrics": steady(70, 80),
            },
            quiet=True,
            absent=("DEC002", "REG001", "CFG005"),
            verdict="pass",
        ),
    ),
    Expert(
        Scenario(
            "llama_70b_tp4_b200_at_90_is_normal",
            {
                "setup": vllm("nvidia-b200", model=LLAMA70, gpu_count=4, tensor_parallel=4),
                "workload": chat(1, 1000, 256),
                "metrics": steady(90, 60),
            },
            quiet=True,
            absent=("DEC002", "REG001", "CFG005"),
            verdict="pass",
        ),
    ),
    # ---- multi-GPU diagnoses ----
    Expert(
        Scenario(
            "tp4_over_pcie_at_one_stream",
            {
                "setup": vllm("nvidia-a10g", gpu_count=4, tensor_parallel=4),
                "workload": chat(1, 1000, 256),
                "metrics": steady(70, 150),
            },
            verdict="pass",
        ),
        present=("CFG005",),
        fix_has=(("CFG005", "--pipeline-parallel-size 4"),),
    ),
    Expert(
        Scenario(
            "tp4_over_pcie_at_64_streams_amortises_the_all_reduces",
            {
                "setup": vllm("nvidia-a10g", gpu_count=4, tensor_parallel=4),
                "workload": chat(64, 1000, 256, n=3000),
                "metrics": {**steady(30, 400), "output_throughput_tok_s": 1900},
            },
            absent=("CFG005",),
            verdict="pass",
        ),
    ),
    Expert(
        Scenario(
            "tp4_over_nvlink_at_one_stream_is_fine",
            {
                "setup": vllm("nvidia-h100-sxm", gpu_count=4, tensor_parallel=4),
                "workload": chat(1, 1000, 256),
                "metrics": steady(330, 25),
            },
            absent=("CFG005",),
            verdict="pass",
        ),
    ),
    Expert(
        Scenario(
            "an_8b_model_at_tp4_with_a_queue_should_be_replicas",
            {
                "setup": vllm("nvidia-h100-sxm", gpu_count=4, tensor_parallel=4),
                "workload": chat(512, 1000, 128, n=5000),
                "metrics": {
                    **steady(25, 900),
                    "itl_ms": {"p50": 40, "p99": 55},
                    "output_throughput_tok_s": 12000,
                    "queue_waiting_mean": 100,
                },
            },
            first="tune-runtime-parallelism",
            verdict="warn",
        ),
        present=("CFG006",),
        fix_has=(("CFG006", "--data-parallel-size 4"),),
    ),
    Expert(
        Scenario(
            "tp8_above_qwen_7bs_four_kv_heads",
            {
                "setup": vllm("nvidia-h100-sxm", model="Qwen/Qwen2.5-7B-Instruct", gpu_count=8, tensor_parallel=8),
                "workload": chat(8, 1000, 256),
                "metrics": steady(200, 40),
            },
            verdict="pass",
        ),
        present=("CFG007",),
        title_has=(("CFG007", "4 KV heads"),),
    ),
    Expert(
        Scenario(
            "moe_at_tp8_without_expert_parallel_on_vllm",
            {
                "setup": vllm(
                    "nvidia-h100-sxm", model="Qwen/Qwen3-235B-A22B", quant="fp8", gpu_count=8, tensor_parallel=8
                ),
                "workload": chat(128, 1000, 256, n=3000),
                "metrics": {**steady(30, 300), "output_throughput_tok_s": 3800},
            },
            verdict="warn",
        ),
        present=("CFG008",),
        fix_has=(("CFG008", "--enable-expert-parallel"),),
    ),
    Expert(
        Scenario(
            "moe_with_sglang_ep_size_is_expert_parallel",
            {
                "setup": engine(
                    "sglang",
                    "0.5.5",
                    "nvidia-h100-sxm",
                    model="Qwen/Qwen3-235B-A22B",
                    quant="fp8",
                    gpu_count=8,
                    tensor_parallel=8,
                    engine_args={"ep_size": 8},
                ),
                "workload": chat(128, 1000, 256, n=3000),
                "metrics": {**steady(30, 300), "output_throughput_tok_s": 3800},
            },
            absent=("CFG008",),
            verdict="pass",
        ),
    ),
    Expert(
        Scenario(
            "moe_without_ep_on_trtllm_names_ep_size",
            {
                "setup": engine(
                    "trtllm",
                    "1.0.0",
                    "nvidia-h100-sxm",
                    model="Qwen/Qwen3-235B-A22B",
                    quant="fp8",
                    gpu_count=8,
                    tensor_parallel=8,
                ),
                "workload": chat(128, 1000, 256, n=3000),
                "metrics": {**steady(30, 300), "output_throughput_tok_s": 3800},
            },
            verdict="warn",
        ),
        present=("CFG008",),
        fix_has=(("CFG008", "--ep_size 8"),),
    ),
    Expert(
        Scenario(
            "moe_at_one_stream_is_only_a_note",
            {
                "setup": vllm("nvidia-h100-sxm", model="mistralai/Mixtral-8x7B-v0.1", gpu_count=2, tensor_parallel=2),
                "workload": chat(1, 1000, 256),
                "metrics": steady(90, 60),
            },
            verdict="pass",
        ),
        at_most=(("CFG008", Severity.LOW),),
        title_has=(("CFG008", "at 1 stream"),),
    ),
    # ---- estimated compute is a band ----
    Expert(
        Scenario(
            "dgx_spark_2_s_for_4000_tokens_is_plausible",
            {
                "setup": vllm("nvidia-dgx-spark-gb10"),
                "workload": chat(1, 4000, 256, n=500),
                "metrics": {"decode_tok_s": 13, "ttft_ms": {"p50": 2000, "p99": 2200}},
            },
            absent=("MEAS003", "REG002"),
            verdict="warn",
        ),
    ),
    Expert(
        Scenario(
            "dgx_spark_150_ms_for_4000_tokens_is_a_cache_hit",
            {
                "setup": vllm("nvidia-dgx-spark-gb10"),
                "workload": chat(1, 4000, 256, n=500),
                "metrics": {"decode_tok_s": 13, "ttft_ms": {"p50": 150, "p99": 165}},
            },
            verdict="warn",
        ),
        present=("MEAS003",),
    ),
    Expert(
        Scenario(
            "dgx_spark_1000_tok_s_prefill_is_inside_the_estimate_band",
            {
                "setup": vllm("nvidia-dgx-spark-gb10"),
                "workload": chat(1, 4000, 256, n=500),
                "metrics": {"decode_tok_s": 13, "prefill_tok_s": 1000, "ttft_ms": {"p50": 4000, "p99": 4400}},
            },
            absent=("REG002", "MEAS003"),
            verdict="warn",
        ),
    ),
    Expert(
        Scenario(
            "strix_halo_300_tok_s_prefill_is_below_even_the_band",
            {
                "setup": llamacpp("b6500", "amd-ryzen-ai-max-plus-395", {"-ngl": 99, "-fa": "on"}),
                "workload": chat(1, 4000, 256, n=200),
                "metrics": {"decode_tok_s": 40, "prefill_tok_s": 300, "ttft_ms": {"p50": 13300, "p99": 14000}},
            },
            verdict="warn",
        ),
        present=("REG002",),
        title_has=(("REG002", "widened 2× for the device's estimated compute"),),
    ),
    # ---- hardware suggestions stay on the user's platform ----
    Expert(
        Scenario(
            "an_m2_max_user_is_offered_apple_machines",
            {
                "setup": llamacpp("b6500", "apple-m2-max", {"-ngl": 99, "-fa": "on"}),
                "workload": chat(1, 512, 256, n=200),
                "metrics": {"decode_tok_s": 70, "prefill_tok_s": 700},
            },
            slo={"decode_tok_s_min": 120},
            first="upgrade-bandwidth",
            verdict="fail",
        ),
        fix_has=(("DEC004", "Apple"),),
        fix_lacks=(("DEC004", "NVIDIA"), ("DEC004", "Intel"), ("DEC004", "AMD")),
    ),
    Expert(
        Scenario(
            "a_ryzen_desktop_is_not_offered_a_mac",
            {
                "setup": llamacpp("b6500", "amd-ryzen-9-7950x", {"-ngl": 0}, gpu_count=0),
                "workload": chat(1, 512, 256, n=50),
                "metrics": {"decode_tok_s": 14, "prefill_tok_s": 90},
            },
            slo={"decode_tok_s_min": 30},
            verdict="fail",
        ),
        fix_lacks=(("DEC004", "Apple"),),
    ),
    Expert(
        Scenario(
            "an_m2_ultra_ollama_user_is_not_offered_instinct_accelerators",
            {
                "setup": ollama("0.12.3", "apple-m2-ultra", model="llama3.1:70b"),
                "workload": chat(1, 500, 256, n=10),
                "metrics": {"decode_tok_s": 15, "prefill_tok_s": 90},
            },
            verdict="warn",
        ),
        fix_lacks=(("DEC004", "Instinct"), ("DEC004", "NVIDIA")),
    ),
    # ---- MLX has no server-side KV quantization ----
    Expert(
        Scenario(
            "mlx_long_context_is_not_told_mlx_lm_server_kv_bits",
            {
                "setup": engine("mlx", "0.28.0", "apple-m2-max", quant="Q4_K_M"),
                "workload": chat(1, 30000, 256, n=50),
                "metrics": {"decode_tok_s": 30, "prefill_tok_s": 300},
            },
            verdict="warn",
        ),
        fix_lacks=(("*", "mlx_lm.server --kv-bits"),),
    ),
]


def _params() -> list[Any]:
    return [pytest.param(e, id=e.name, marks=e.marks) for e in EXPERTS]


@pytest.mark.parametrize("expert", _params())
def test_expert_scenario(expert: Expert) -> None:
    expert_check(expert)


def test_the_scenarios_cover_every_finding_family() -> None:
    names = " ".join(e.name for e in EXPERTS)
    for topic in ("ollama_0_9_6", "ollama_0_15_5", "llamacpp", "tgi", "trtllm", "dial", "tp4", "moe", "dgx_spark"):
        assert topic in names
    assert len({e.name for e in EXPERTS}) == len(EXPERTS)
    assert sum(e.scenario.quiet for e in EXPERTS) >= 10


def test_the_kv_pool_counts_gib_as_the_engine_does() -> None:
    """vLLM sizes its pool from the memory torch reports in GiB: an H100's 80 GiB × 0.5, less
    16.06 GB of weights and vLLM's ~2 GiB of activations and graphs, is about 188,800 tokens of
    128 KiB. Counting 80 GB as 80e9 bytes would give about 166,000."""
    run = Scenario(
        "h100_half_memory_full_pool",
        {
            "setup": vllm("nvidia-h100-sxm", engine_args={"gpu_memory_utilization": 0.5}),
            "workload": chat(64, 4000, 300, n=2000),
            "metrics": {**_KV_FULL, "running_mean": 40, "queue_waiting_mean": 24},
        },
        verdict="warn",
    )
    top = next(r for r in run.advise().recommendations if r.rule_id == "CAP001")
    pool = next(e.found for e in top.evidence if e.metric == "kv_pool_tokens")
    assert isinstance(pool, float)
    gib = (0.5 * 80 * 2**30 - 16.06e9 - 2 * 2**30) / 131072
    assert abs(pool - gib) / gib < 0.05, (pool, gib)
