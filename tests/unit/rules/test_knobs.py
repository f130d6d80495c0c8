from __future__ import annotations

from typing import Any

import pytest

from advisor.canonical import decode_run
from advisor.catalog import Catalog
from advisor.errors import InvalidInput
from advisor.rules.knobs import EngineConfig, engine_config, knob_name, normalise_key, parse_version


def config(
    runtime: str,
    args: dict[str, Any],
    *,
    version: str | None = None,
    hardware: str | None = "nvidia-h100-sxm",
    **setup: Any,
) -> EngineConfig:
    run = decode_run({"setup": {"runtime": runtime, "runtime_version": version, "engine_args": args, **setup}})
    hw = Catalog.default().resolve_hardware(hardware) if hardware else None
    return engine_config(run, hw)


@pytest.mark.parametrize(
    ("runtime", "args", "attr", "value", "explicit"),
    [
        ("vllm", {"--max-num-batched-tokens": "4096"}, "batched_tokens", 4096, True),
        ("vllm", {}, "batched_tokens", 8192, False),  # H100: ≥ 70 GiB and not an A100
        ("vllm", {"no-enable-prefix-caching": True}, "prefix_caching", False, True),
        ("vllm", {}, "prefix_caching", True, False),
        ("vllm", {"enforce_eager": "true"}, "enforce_eager", True, True),
        ("vllm", {"speculative_config": {"method": "ngram"}}, "speculative", True, True),
        ("vllm", {"kv_transfer_config": {"kv_connector": "NixlConnector"}}, "disaggregated", True, True),
        ("sglang", {"chunked_prefill_size": -1}, "chunked_prefill", False, True),
        ("sglang", {"chunked_prefill_size": -1}, "batched_tokens", None, False),
        ("sglang", {"disable_radix_cache": True}, "prefix_caching", False, True),
        ("sglang", {"mem_fraction_static": 0.85}, "memory_fraction", 0.85, True),
        ("sglang", {"max_running_requests": 48}, "max_num_seqs", 48, True),
        ("trtllm", {}, "chunked_prefill", False, False),
        ("trtllm", {"enable_block_reuse": False}, "prefix_caching", False, True),
        ("ollama", {}, "max_num_seqs", 1, False),
        ("ollama", {"OLLAMA_NUM_PARALLEL": "4"}, "max_num_seqs", 4, True),
        ("ollama", {"OLLAMA_KV_CACHE_TYPE": "q8_0"}, "kv_cache_dtype", "q8_0", True),
        ("ollama", {"OLLAMA_FLASH_ATTENTION": "0"}, "flash_attention", False, True),
        ("ollama", {"num_ctx": 8192}, "context_length", 8192, True),
        ("llamacpp", {"-np": 4, "-c": 16384}, "context_length", 4096, True),  # -c is split among slots
        ("llamacpp", {"-ngl": 0}, "n_gpu_layers", 0, True),
        ("llamacpp", {"-fa": "on", "-ctk": "q8_0"}, "kv_cache_dtype", "q8_0", True),
        ("llamacpp", {}, "batched_tokens", 2048, False),
    ],
)
def test_spellings_map_to_concepts(runtime: str, args: dict[str, Any], attr: str, value: Any, explicit: bool) -> None:
    knob = getattr(config(runtime, args), attr)
    assert knob.value == value
    assert knob.explicit is explicit


def test_vllm_defaults_depend_on_the_gpu() -> None:
    assert config("vllm", {}, hardware="nvidia-a100-80gb-sxm").batched_tokens.value == 2048
    assert config("vllm", {}, hardware="nvidia-a10g").max_num_seqs.value == 256
    assert config("vllm", {}, hardware="nvidia-h100-sxm").max_num_seqs.value == 1024
    assert config("vllm", {}, hardware=None).batched_tokens.value is None


def test_old_vllm_has_prefix_caching_off_by_default() -> None:
    assert config("vllm", {}, version="0.6.3").prefix_caching.value is False


def test_setup_fields_win_over_engine_args() -> None:
    cfg = config("vllm", {"kv_cache_dtype": "auto", "max_model_len": 4096}, kv_cache_dtype="fp8", max_model_len=8192)
    assert cfg.kv_cache_dtype.value == "fp8"
    assert cfg.context_length.value == 8192
    assert cfg.kv_cache_16bit is False


def test_evidence_keeps_the_runs_spelling_or_names_the_runtimes_own() -> None:
    cfg = config("ollama", {"OLLAMA_NUM_PARALLEL": 2})
    assert cfg.max_num_seqs.arg == "OLLAMA_NUM_PARALLEL"
    assert knob_name("max_num_seqs", "ollama", config("ollama", {}).max_num_seqs) == "OLLAMA_NUM_PARALLEL"
    assert knob_name("batched_tokens", "sglang", config("sglang", {}).batched_tokens) == "chunked_prefill_size"
    assert config("ollama", {}).max_num_seqs.describe() == "1 (default)"


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0.11.0", (0, 11, 0)), ("v0.6.3.post1", (0, 6, 3)), ("b5606", (5606,)), (None, None), ("dev", None)],
)
def test_parse_version(text: str | None, expected: tuple[int, ...] | None) -> None:
    assert parse_version(text) == expected


def test_normalise_key() -> None:
    assert normalise_key("--max-num-batched-tokens") == "max_num_batched_tokens"
    assert normalise_key("OLLAMA_NUM_PARALLEL") == "ollama_num_parallel"
    assert normalise_key("-np") == "np"


@pytest.mark.parametrize(
    ("version", "expected"),
    [("0.6.5", None), ("0.9.6", None), ("0.9.7", 1), ("0.12.3", 1)],
)
def test_ollama_num_parallel_default_follows_the_version(version: str, expected: int | None) -> None:
    # Before 0.9.7 OLLAMA_NUM_PARALLEL 0 meant "auto" (4 or 1 by memory): unknowable, so no default.
    assert config("ollama", {}, version=version).max_num_seqs.value == expected


@pytest.mark.parametrize(
    ("version", "hardware", "expected"),
    [
        ("0.6.6", "nvidia-rtx-4090", 2048),
        ("0.6.7", "nvidia-rtx-4090", 4096),
        ("0.15.5", "nvidia-rtx-4090", 32768),  # 24 GiB: the 32k tier (4k below 23 GiB)
        ("0.15.5", "nvidia-l4", 4096),  # reports 23,034 MiB (22.5 GiB, ECC on): below 23 GiB
        ("0.15.5", "nvidia-l40s", 32768),  # reports 46,068 MiB (45 GiB): below 47 GiB
        ("0.15.5", "nvidia-t4", 4096),
        ("0.15.5", "nvidia-h100-sxm", 262144),
        (None, "nvidia-rtx-4090", None),  # the default moved three times: unknown without a version
    ],
)
def test_ollama_num_ctx_default_follows_the_version_and_vram(
    version: str | None, hardware: str, expected: int | None
) -> None:
    knob = config("ollama", {}, version=version, hardware=hardware).context_length
    assert knob.value == expected
    assert knob.explicit is False


def test_llamacpp_k_and_v_cache_types_are_read_apart() -> None:
    cfg = config("llamacpp", {"-ctk": "q8_0", "-fa": "off"}, hardware="nvidia-rtx-4090")
    assert (cfg.kv_cache_dtype.value, cfg.kv_cache_dtype_v.value, cfg.kv_cache_dtype_v.explicit) == (
        "q8_0",
        "f16",
        False,
    )
    both = config("llamacpp", {"-ctk": "q8_0", "-ctv": "q4_0"}, hardware="nvidia-rtx-4090")
    assert both.kv_cache_dtype_v.value == "q4_0"
    assert both.micro_batch.value == 512  # -ub default


def test_sglang_mixing_and_stream_interval() -> None:
    plain = config("sglang", {})
    assert (plain.mixed_chunk.value, plain.stream_interval.value) == (False, 1)
    mixed = config("sglang", {"--enable-mixed-chunk": True, "--stream-interval": 8})
    assert (mixed.mixed_chunk.value, mixed.stream_interval.value) == (True, 8)
    assert config("vllm", {}).mixed_chunk.value is True


@pytest.mark.parametrize(
    ("runtime", "args", "expected"),
    [
        ("vllm", {"--enable-expert-parallel": True}, True),
        ("sglang", {"--ep-size": 8}, True),
        ("sglang", {"--ep-size": 1}, False),
        ("vllm", {}, None),
    ],
)
def test_expert_parallel(runtime: str, args: dict[str, Any], expected: bool | None) -> None:
    assert config(runtime, args).expert_parallel.value is expected


def test_llamacpp_cpu_moe() -> None:
    assert config("llamacpp", {"--n-cpu-moe": 20}, hardware="nvidia-rtx-4090").n_cpu_moe.value == 20


def test_gpu_count_zero_is_a_cpu_only_run() -> None:
    run = decode_run({"setup": {"runtime": "llamacpp", "hardware": "cpu-desktop-2ch-ddr5-5600", "gpu_count": 0}})
    assert run.setup.gpu_count == 0
    with pytest.raises(InvalidInput, match="at least 0"):
        decode_run({"setup": {"gpu_count": -1}})
    with pytest.raises(InvalidInput, match="at least 1"):
        decode_run({"setup": {"tensor_parallel": 0}})


@pytest.mark.parametrize(
    ("version", "args", "slots", "unified", "per_slot"),
    [
        # -np auto (the default from the unified-cache builds, or -np -1): 4 slots share all of -c.
        ("b7079", {"-c": 16384}, 4, True, 16384),
        ("b7300", {"-c": 16384, "-np": -1}, 4, True, 16384),
        # An explicit -np splits -c among the slots unless --kv-unified is given.
        ("b7300", {"-c": 16384, "-np": 4}, 4, False, 4096),
        ("b7300", {"-c": 16384, "-np": 4, "--kv-unified": True}, 4, True, 16384),
        ("b7300", {"-c": 16384, "-np": 4, "-kvu": True}, 4, True, 16384),
        ("b7300", {"-c": 16384, "-np": -1, "--no-kv-unified": True}, 4, False, 4096),  # auto slots, split cache
        # Older builds: one slot by default, so the slot has all of -c too.
        ("b6500", {"-c": 16384}, 1, False, 16384),
        ("b6500", {"-c": 16384, "-np": 2}, 2, False, 8192),
        # Unknown version: 1 or 4 slots, but either way one slot may use the whole -c.
        (None, {"-c": 16384}, None, None, 16384),
    ],
)
def test_llamacpp_slots_and_the_unified_kv_cache_follow_the_version(
    version: str | None, args: dict[str, Any], slots: int | None, unified: bool | None, per_slot: int
) -> None:
    cfg = config("llamacpp", args, version=version, hardware="nvidia-rtx-4090")
    assert cfg.max_num_seqs.value == slots
    assert cfg.kv_unified.value is unified
    assert cfg.context_length.value == per_slot


@pytest.mark.parametrize(
    ("hardware", "gpus", "expected"),
    [
        ("nvidia-rtx-4090", 1, 32768),  # 24 GiB: at least 23
        ("nvidia-l4", 1, 4096),  # the driver reports 22.5 GiB (ECC on): what Ollama reads
        ("nvidia-t4", 1, 4096),  # 15 GiB reported
        ("nvidia-t4", 2, 32768),  # Ollama sums the VRAM of every GPU: 30 GiB
        ("nvidia-l4", 2, 32768),  # 2 x 22.5 = 45 GiB: below 47
        ("nvidia-rtx-4090", 2, 262144),  # 48 GiB: at least 47
    ],
)
def test_ollama_vram_tiers_sum_the_gpus(hardware: str, gpus: int, expected: int) -> None:
    # server/routes.go (v0.15.5): 47 and 23 GiB of total VRAM, just under 48 and 24.
    knob = config("ollama", {}, version="0.16.0", hardware=hardware, gpu_count=gpus).context_length
    assert knob.value == expected
