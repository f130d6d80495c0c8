"""One view of the serving configuration across runtimes (docs/formats.md §8).

``setup.engine_args`` arrive spelled the way each runtime spells them (``max_num_batched_tokens``,
``--chunked-prefill-size``, ``OLLAMA_NUM_PARALLEL``, ``-np``). Rules reason about the *concept*
(the prefill token budget, the number of concurrent sequences), so this module maps the spellings
onto one :class:`EngineConfig`, filling the runtime's documented default where the run gives none
and remembering which it was, so evidence can say "(default)".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from advisor.canonical import CanonicalRun
from advisor.catalog.capabilities import capability, reported_memory_gib
from advisor.physics.specs import HardwareSpec
from advisor.rules import runtimes
from advisor.rules.memo import remember

__all__ = [
    "KNOB_NAMES",
    "LLAMACPP_AUTO_SLOTS",
    "EngineConfig",
    "Knob",
    "clear_engine_configs",
    "engine_config",
    "knob_name",
    "normalise_key",
    "parse_version",
]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Knob(Generic[T]):
    """A setting: its value (None = unknown), whether the run gave it, and under which name."""

    value: T | None = None
    explicit: bool = False
    arg: str | None = None

    @property
    def known(self) -> bool:
        return self.value is not None

    def describe(self) -> str:
        """``"2048"`` or ``"2048 (default)"`` for evidence."""
        if self.value is None:
            return "unknown"
        text = (
            str(self.value).lower()
            if isinstance(self.value, bool)
            else f"{self.value:g}"
            if isinstance(self.value, float)
            else str(self.value)
        )
        return text if self.explicit else f"{text} (default)"


@dataclass(frozen=True, slots=True)
class EngineConfig:
    """The knobs rules reason about, whatever the runtime calls them.

    * ``batched_tokens``: tokens one scheduler step may process (vLLM ``max_num_batched_tokens``,
      SGLang ``chunked_prefill_size``, TGI ``max_batch_prefill_tokens``, TensorRT-LLM
      ``max_num_tokens``, llama.cpp ``-b``).
    * ``max_num_seqs``: sequences decoded together (vLLM ``max_num_seqs``, SGLang
      ``max_running_requests``, TGI/TensorRT-LLM ``max_batch_size``, Ollama ``OLLAMA_NUM_PARALLEL``,
      llama.cpp ``-np``).
    * ``memory_fraction``: device memory the engine may claim (vLLM ``gpu_memory_utilization``,
      SGLang ``mem_fraction_static``, TGI ``cuda_memory_fraction``, TensorRT-LLM
      ``free_gpu_memory_fraction``; the last is a fraction of the memory *left after weights*).
    * ``context_length``: the per-sequence context limit (vLLM ``max_model_len``, Ollama
      ``num_ctx``; llama.cpp ``-c`` is shared by the slots: divided by an explicit ``-np``, whole per
      slot with a unified KV cache, ``--kv-unified`` or ``-np`` auto).
    """

    runtime: str | None
    prefix_caching: Knob[bool]
    chunked_prefill: Knob[bool]
    batched_tokens: Knob[int]
    max_num_seqs: Knob[int]
    memory_fraction: Knob[float]
    kv_cache_dtype: Knob[str]
    enforce_eager: Knob[bool]
    cpu_offload_gb: Knob[float]
    n_gpu_layers: Knob[int]
    flash_attention: Knob[bool]
    context_length: Knob[int]
    speculative: Knob[bool]
    disaggregated: Knob[bool]
    keep_alive: Knob[str]
    #: llama.cpp ``-ctv`` / Ollama's one type for both: only a quantized V cache needs flash attention.
    kv_cache_dtype_v: Knob[str] = Knob()
    #: Tokens between streamed chunks (SGLang ``--stream-interval``): above 1 ITL is bursty by design.
    stream_interval: Knob[int] = Knob()
    #: Whether a prefill chunk shares its step with running decodes (vLLM, TGI, TensorRT-LLM: yes;
    #: SGLang only with ``--enable-mixed-chunk``).
    mixed_chunk: Knob[bool] = Knob()
    #: MoE expert parallelism (vLLM ``--enable-expert-parallel``, SGLang ``--ep-size``, TRT ``--ep_size``).
    expert_parallel: Knob[bool] = Knob()
    #: llama.cpp ``--n-cpu-moe`` (MoE expert layers kept on the CPU).
    n_cpu_moe: Knob[int] = Knob()
    #: llama.cpp ``-ub`` (physical micro-batch).
    micro_batch: Knob[int] = Knob()
    #: llama.cpp ``--kv-unified``: one KV buffer shared by every slot, so each slot may use the whole
    #: ``-c`` and the cache is ``-c`` in total, not ``-c`` per slot. On when ``-np`` is auto (the
    #: default from the builds of ggml-org/llama.cpp#16736; runtimes.toml).
    kv_unified: Knob[bool] = Knob()

    @property
    def kv_cache_16bit(self) -> bool | None:
        """Whether the KV cache is stored in 16 bits (``auto`` = model dtype, almost always 16)."""
        dtype = self.kv_cache_dtype.value
        if dtype is None:
            return None
        return dtype.lower() in {"auto", "f16", "fp16", "bf16", "bfloat16", "float16", "half"}


#: How each runtime spells a concept, for evidence about defaults the run did not spell out.
KNOB_NAMES: dict[str, dict[str, str]] = {
    "max_num_seqs": {
        "vllm": "max_num_seqs",
        "sglang": "max_running_requests",
        "tgi": "max_batch_size",
        "trtllm": "max_batch_size",
        "ollama": "OLLAMA_NUM_PARALLEL",
        "llamacpp": "parallel (-np)",
    },
    "batched_tokens": {
        "vllm": "max_num_batched_tokens",
        "sglang": "chunked_prefill_size",
        "tgi": "max_batch_prefill_tokens",
        "trtllm": "max_num_tokens",
        "llamacpp": "batch_size (-b)",
    },
    "context_length": {
        "vllm": "max_model_len",
        "sglang": "context_length",
        "tgi": "max_total_tokens",
        "trtllm": "max_seq_len",
        "ollama": "num_ctx",
        "llamacpp": "ctx_size (-c) / parallel",
    },
}


def knob_name(concept: str, runtime: str | None, knob: Knob[Any]) -> str:
    """The name to show for a knob: as the run spelled it, else the runtime's own name."""
    if knob.arg:
        return knob.arg
    return KNOB_NAMES.get(concept, {}).get(runtime or "", concept)


def normalise_key(key: str) -> str:
    """``--max-num-batched-tokens`` / ``OLLAMA_NUM_PARALLEL`` → ``max_num_batched_tokens`` /
    ``ollama_num_parallel``."""
    return key.strip().lstrip("-").replace("-", "_").replace(".", "_").lower()


def parse_version(text: str | None) -> tuple[int, ...] | None:
    """``"0.11.0"`` → ``(0, 11, 0)``; ``"b5606"`` (llama.cpp build) → ``(5606,)``; else None."""
    if not text:
        return None
    numbers = re.findall(r"\d+", text)
    return tuple(int(n) for n in numbers[:3]) if numbers else None


_TRUE = {"1", "true", "yes", "on", "enabled", "enable"}
_FALSE = {"0", "false", "no", "off", "disabled", "disable"}


def _as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return bool(value)
    if isinstance(value, str):
        v = value.strip().lower()
        if v in _TRUE:
            return True
        if v in _FALSE:
            return False
    return None


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(float(value.strip()))
        except ValueError:
            return None
    return None


def _as_float(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def _as_str(value: Any) -> str | None:
    if value is None or isinstance(value, dict | list):
        return None
    return str(value).strip() or None


def _present(value: Any) -> bool | None:
    """A config object/flag whose mere presence turns a feature on (``speculative_config``)."""
    if value is None:
        return None
    if isinstance(value, str | bool | int | float):
        b = _as_bool(value)
        if b is not None:
            return b
        return bool(str(value).strip()) and str(value).strip().lower() not in {"none", "null"}
    return bool(value)


def _find(args: Mapping[str, tuple[str, Any]], names: tuple[str, ...], conv: Callable[[Any], T | None]) -> Knob[T]:
    """The first of ``names`` present with a usable value; ``arg`` keeps the run's own spelling."""
    for name in names:
        if name in args:
            original, raw = args[name]
            value = conv(raw)
            if value is not None:
                return Knob(value, True, original)
    return Knob()


def _or_default(knob: Knob[T], default: T | None) -> Knob[T]:
    return knob if knob.known else Knob(default, False, knob.arg)


def _vllm_tier(hw: HardwareSpec | None, rule: str) -> str | None:
    """Which of vLLM's per-device default tiers (``small``, ``large``, ``huge``) ``hw`` falls in
    under ``rule`` (runtimes.toml: ``name:h100,h200``, ``>=70GiB``, ``not:a100``, ``not:cc12.1``,
    ``huge>=160GiB``); None when the device or its memory is unknown, or it is not a GPU (vLLM's
    CPU and TPU tiers are not modelled). Memory counts in GiB, as ``current_platform`` reports it."""
    if hw is None or hw.kind != "gpu":
        return None
    name = f"{hw.id} {hw.name}".lower()
    memory = hw.memory_gb
    large = False
    needs_memory = False
    for term in filter(None, (t.strip() for t in rule.split(";"))):
        if term.startswith("name:"):
            large = any(n in name for n in term[5:].split(","))
        elif term.startswith(">=") and term.endswith("GiB"):
            needs_memory = True
            large = memory is not None and memory >= float(term[2:-3])
    if needs_memory and memory is None:
        return None
    for term in filter(None, (t.strip() for t in rule.split(";"))):
        if term.startswith("not:cc"):
            cap = capability(hw.id)
            if cap is not None and cap.compute_capability == term[6:]:
                large = False
        elif term.startswith("not:") and term[4:] in name:
            large = False
    for term in filter(None, (t.strip() for t in rule.split(";"))):
        if term.startswith("huge>=") and term.endswith("GiB") and memory is not None and memory >= float(term[6:-3]):
            return "huge"
    return "large" if large else "small"


def _vllm_default(knob: str, version: str | None, hw: HardwareSpec | None) -> Any:
    """vLLM's default of ``knob`` at ``version`` on ``hw`` (runtimes.toml), resolving a per-device
    tier table; None when no entry holds for the version or the tier is unknown."""
    entry = runtimes.default("vllm", knob, version)
    if entry is None:
        return None
    value = entry.value
    if not isinstance(value, Mapping):
        return value
    tier = _vllm_tier(hw, str(value.get("rule", "")))
    if tier is None:
        return None
    return value.get(tier, value.get("large") if tier == "huge" else value.get("small"))


def _ollama_num_ctx(version: str | None, hardware: HardwareSpec | None, gpus: int | None = None) -> int | None:
    """Ollama's default ``num_ctx`` at ``version`` (runtimes.toml): 2048 before 0.6.7, 4096 from
    0.6.7, and from 0.15.5 tiered by the VRAM of all GPUs together (server/routes.go: 4k below 23
    GiB, 32k below 47 GiB, 256k from 47; the thresholds sit just under 24 and 48 GiB because cards
    report a little less). None when the version is unknown (the default moved three times) or the
    tier needs unknown memory."""
    if parse_version(version) is None:
        return None
    entry = runtimes.default("ollama", "context_length", version)
    if entry is None:
        return None
    if isinstance(entry.value, int):
        return entry.value
    if hardware is None or hardware.memory_gb is None:
        return None
    # Ollama sums gpu.TotalMemory, what the driver reports: an ECC card's 24 GB is 22.5 GiB there.
    vram_gib = (reported_memory_gib(hardware.id) or hardware.memory_gb) * max(gpus or 1, 1)
    return 4096 if vram_gib < 23 else 32768 if vram_gib < 47 else 262144


#: Slots llama-server starts when ``-np`` is auto (-1): tools/server/server.cpp sets 4 with a unified KV cache.
LLAMACPP_AUTO_SLOTS = 4


def _llamacpp_slots(seqs: Knob[int], unified: Knob[bool], version: str | None) -> tuple[Knob[int], Knob[bool]]:
    """llama-server's slot count and whether its KV cache is unified (runtimes.toml).

    ``-np -1`` (auto) starts :data:`LLAMACPP_AUTO_SLOTS` slots sharing one unified cache. An
    explicit ``-np N`` keeps the cache split ``-c / N`` unless ``--kv-unified`` is given. Without
    ``-np`` the version's default applies: auto from the unified-cache builds, one slot before;
    either way each slot may use the whole ``-c``. With an unknown version the slot count stays
    unknown (1 or 4), but the per-slot context does not depend on it."""
    if seqs.value is not None and seqs.value < 0:
        return Knob(LLAMACPP_AUTO_SLOTS, True, seqs.arg), _or_default(unified, True)
    if seqs.known:
        return seqs, _or_default(unified, False)
    entry = runtimes.default("llamacpp", "max_num_seqs", version) if parse_version(version) else None
    if entry is not None and entry.value == "auto":
        return Knob(LLAMACPP_AUTO_SLOTS, False, seqs.arg), _or_default(unified, True)
    if entry is not None and isinstance(entry.value, int):
        return Knob(entry.value, False, seqs.arg), _or_default(unified, False)
    return seqs, unified


#: Runtimes whose chunked prefill puts running decodes in the same step as a prompt chunk.
_MIXING = ("vllm", "tgi", "trtllm", "llamacpp")


#: Setups whose :class:`EngineConfig` is remembered. A fleet posts thousands of runs of each of a
#: few setups, and the config depends on the setup alone (:func:`_setup_key`); bounded so that a
#: stream of one-off setups cannot grow the process.
ENGINE_CONFIG_CACHE_SIZE = 1024
_ENGINE_CONFIGS: dict[tuple[Any, ...], EngineConfig] = {}


def _setup_key(run: CanonicalRun, hardware: HardwareSpec | None) -> tuple[Any, ...]:
    """Everything :func:`_engine_config` reads of ``run`` and ``hardware``. ``repr`` of the engine
    args keeps their order (a later spelling of the same knob wins) and their JSON types apart
    (``1``, ``1.0``, ``True`` and ``"1"`` convert differently); the hardware counts by value."""
    setup = run.setup
    labels = run.labels
    return (
        setup.runtime,
        setup.runtime_version,
        setup.kv_cache_dtype,
        setup.max_model_len,
        setup.gpu_count,
        labels.get("disaggregated"),
        labels.get("pd_disaggregation"),
        repr(setup.engine_args),
        hardware,
    )


def clear_engine_configs() -> None:
    """Forget every remembered config (tests compare cold and warm analyses)."""
    _ENGINE_CONFIGS.clear()


def engine_config(run: CanonicalRun, hardware: HardwareSpec | None = None) -> EngineConfig:
    """Normalise ``run.setup`` for ``run.setup.runtime``, with the runtime's defaults filled in.

    Memoised per setup (:data:`ENGINE_CONFIG_CACHE_SIZE`): the result is frozen and holds only
    converted values, never the run's own containers, so runs of one setup may share it."""
    try:
        key = _setup_key(run, hardware)
        found = _ENGINE_CONFIGS.get(key)
    except TypeError:  # an unhashable inline hardware spec: compute it afresh
        return _engine_config(run, hardware)
    if found is None:
        found = remember(_ENGINE_CONFIGS, key, _engine_config(run, hardware), ENGINE_CONFIG_CACHE_SIZE)
    return found


def _engine_config(run: CanonicalRun, hardware: HardwareSpec | None) -> EngineConfig:
    """:func:`engine_config` computed afresh. Whatever it reads of the run must be in
    :func:`_setup_key` (tests/unit/rules/test_analysis_cache.py records the reads)."""
    setup = run.setup
    runtime = setup.runtime
    args = {normalise_key(k): (k, v) for k, v in setup.engine_args.items()}
    version = parse_version(setup.runtime_version)

    prefix = _find(
        args,
        (
            "enable_prefix_caching",
            "prefix_caching",
            "use_prefix_caching",
            "enable_block_reuse",
            "cache_prompt",
        ),
        _as_bool,
    )
    if not prefix.known:
        for name in ("no_enable_prefix_caching", "disable_radix_cache", "disable_prefix_caching"):
            b = _as_bool(args[name][1]) if name in args else None
            if b is not None:
                prefix = Knob(not b, True, args[name][0])
                break

    chunked = _find(args, ("enable_chunked_prefill", "enable_chunked_context", "chunked_prefill"), _as_bool)
    if not chunked.known:
        if "no_enable_chunked_prefill" in args and _as_bool(args["no_enable_chunked_prefill"][1]) is True:
            chunked = Knob(False, True, args["no_enable_chunked_prefill"][0])
        elif "chunked_prefill_size" in args and (size := _as_int(args["chunked_prefill_size"][1])) is not None:
            chunked = Knob(size > 0, True, args["chunked_prefill_size"][0])

    budget = _find(
        args,
        (
            "max_num_batched_tokens",
            "chunked_prefill_size",
            "max_batch_prefill_tokens",
            "max_num_tokens",
            "batch_size",
            "b",
            "n_batch",
            "num_batch",
        ),
        _as_int,
    )
    if budget.value is not None and budget.value <= 0:
        budget = Knob()  # SGLang -1 = chunking off: no per-step budget
    seqs = _find(
        args,
        (
            "max_num_seqs",
            "max_running_requests",
            "max_batch_size",
            "ollama_num_parallel",
            "num_parallel",
            "parallel",
            "np",
            "n_parallel",
        ),
        _as_int,
    )
    fraction = _find(
        args,
        (
            "gpu_memory_utilization",
            "mem_fraction_static",
            "cuda_memory_fraction",
            "kv_cache_free_gpu_memory_fraction",
            "free_gpu_memory_fraction",
        ),
        _as_float,
    )
    kv_dtype: Knob[str] = Knob(setup.kv_cache_dtype, True, "kv_cache_dtype") if setup.kv_cache_dtype else Knob()
    if not kv_dtype.known:
        kv_dtype = _find(
            args, ("kv_cache_dtype", "ollama_kv_cache_type", "kv_cache_type", "cache_type_k", "ctk"), _as_str
        )
    eager = _find(args, ("enforce_eager", "disable_cuda_graph"), _as_bool)
    offload = _find(args, ("cpu_offload_gb",), _as_float)
    ngl = _find(args, ("n_gpu_layers", "ngl", "gpu_layers", "num_gpu"), _as_int)
    fa = _find(args, ("ollama_flash_attention", "flash_attention", "flash_attn", "fa"), _as_bool)
    ctx_len: Knob[int] = Knob(setup.max_model_len, True, "max_model_len") if setup.max_model_len else Knob()
    if not ctx_len.known:
        ctx_len = _find(
            args,
            (
                "max_model_len",
                "context_length",
                "max_total_tokens",
                "max_seq_len",
                "num_ctx",
                "ollama_context_length",
                "ctx_size",
                "c",
                "n_ctx",
            ),
            _as_int,
        )
    spec = _find(
        args,
        (
            "speculative_config",
            "speculative_model",
            "speculative_algorithm",
            "num_speculative_tokens",
            "speculate",
            "model_draft",
            "md",
            "draft_model",
        ),
        _present,
    )
    disagg = _find(args, ("kv_transfer_config", "disaggregation_mode", "disaggregation", "pd_disaggregation"), _present)
    if not disagg.known:
        label = run.labels.get("disaggregated") or run.labels.get("pd_disaggregation")
        if label is not None and (b := _as_bool(label)) is not None:
            disagg = Knob(b, True, "labels.disaggregated")
    keep_alive = _find(args, ("keep_alive", "ollama_keep_alive"), _as_str)
    kv_v = _find(args, ("cache_type_v", "ctv"), _as_str)
    stream_interval = _find(args, ("stream_interval",), _as_int)
    mixed = _find(args, ("enable_mixed_chunk",), _as_bool)
    ep = _find(args, ("enable_expert_parallel", "expert_parallel"), _as_bool)
    if not ep.known:
        for name in ("ep_size", "expert_parallel_size", "moe_expert_parallel_size"):
            if name in args and (size := _as_int(args[name][1])) is not None:
                ep = Knob(size > 1, True, args[name][0])
                break
    cpu_moe = _find(args, ("n_cpu_moe", "ncmoe"), _as_int)
    if not cpu_moe.known and "cpu_moe" in args and _as_bool(args["cpu_moe"][1]):
        cpu_moe = Knob(10**6, True, args["cpu_moe"][0])  # --cpu-moe: every expert layer on the CPU
    ubatch = _find(args, ("ubatch_size", "ub", "n_ubatch"), _as_int)
    kv_unified = _find(args, ("kv_unified", "kvu"), _as_bool)
    if not kv_unified.known:
        for name in ("no_kv_unified", "no_kvu"):
            if name in args and _as_bool(args[name][1]) is not False:
                kv_unified = Knob(False, True, args[name][0])  # -no-kvu / --no-kv-unified
                break

    if runtime == "vllm":
        # The V1 engine (0.8.0 and later): prefix caching and chunked prefill on, and the per-device
        # budgets of runtimes.toml; before it (V0) prefix caching is off and the budget unknown.
        v1 = version is None or version >= (0, 8)
        prefix = _or_default(prefix, v1)
        chunked = _or_default(chunked, True if v1 else None)
        budget = _or_default(budget, _vllm_default("batched_tokens", setup.runtime_version, hardware))
        seqs = _or_default(seqs, _vllm_default("max_num_seqs", setup.runtime_version, hardware))
        fraction = _or_default(fraction, _vllm_default("memory_fraction", setup.runtime_version, hardware) or 0.9)
        kv_dtype = _or_default(kv_dtype, "auto")
        eager = _or_default(eager, False)
    elif runtime == "sglang":
        mixed = _or_default(mixed, False)  # prefill and decode batches alternate unless --enable-mixed-chunk
        stream_interval = _or_default(stream_interval, 1)
        prefix = _or_default(prefix, True)  # RadixAttention is on unless --disable-radix-cache
        chunked = _or_default(chunked, True)
        kv_dtype = _or_default(kv_dtype, "auto")
        eager = _or_default(eager, False)
    elif runtime == "tgi":
        v3 = version is None or version >= (3,)
        # Prefix caching is on by default from 2.3.0 (launcher resolve_attention; runtimes.toml),
        # chunked prefill from 3.0.0 (experimental in 2.4).
        prefix = _or_default(prefix, True if version is None or version >= (2, 3) else None)
        chunked = _or_default(chunked, True if v3 else None)
        fraction = _or_default(fraction, 1.0)  # --cuda-memory-fraction (launcher default 1.0)
        kv_dtype = _or_default(kv_dtype, "auto")
        # 4096 before 2.0.0; later releases derive it from the model and the GPU (runtimes.toml).
        tgi_budget = runtimes.default("tgi", "batched_tokens", setup.runtime_version) if version else None
        budget = _or_default(budget, tgi_budget.value if tgi_budget is not None else None)
    elif runtime == "trtllm":
        prefix = _or_default(prefix, True)  # KvCacheConfig.enable_block_reuse defaults to True
        budget = _or_default(budget, 8192)  # --max_num_tokens: BuildConfig.max_num_tokens (runtimes.toml)
        chunked = _or_default(chunked, False)  # the LLM API's enable_chunked_prefill defaults to False
        fraction = _or_default(fraction, 0.9)
        kv_dtype = _or_default(kv_dtype, "auto")
    elif runtime == "ollama":
        # OLLAMA_NUM_PARALLEL is 1 from 0.9.7; before, 0 meant auto (4 or 1 by memory), which the
        # advisor cannot know, so those versions get no default (runtimes.toml).
        parallel = runtimes.default("ollama", "max_num_seqs", setup.runtime_version)
        seqs = _or_default(seqs, parallel.value if parallel is not None and isinstance(parallel.value, int) else None)
        if not ctx_len.known:
            ctx_len = Knob(_ollama_num_ctx(setup.runtime_version, hardware, setup.gpu_count), False, None)
        kv_dtype = _or_default(kv_dtype, "f16")
        prefix = _or_default(prefix, True)  # each slot reuses the KV of its previous prompt
        keep_alive = _or_default(keep_alive, "5m")
    elif runtime == "llamacpp":
        budget = _or_default(budget, 2048)
        ubatch = _or_default(ubatch, 512)
        kv_dtype = _or_default(kv_dtype, "f16")
        kv_v = _or_default(kv_v, "f16")
        prefix = _or_default(prefix, True)  # cache_prompt defaults to true in llama-server
        # Off before the -fa auto builds (runtimes.toml, to b6250); "auto" (or an unknown build) stays unknown.
        fa_default = runtimes.default("llamacpp", "flash_attention", setup.runtime_version) if version else None
        fa = _or_default(fa, False if fa_default is not None and fa_default.value is False else None)
        seqs, kv_unified = _llamacpp_slots(seqs, kv_unified, setup.runtime_version)
        if ctx_len.known and ctx_len.explicit and seqs.value and seqs.value > 1 and not kv_unified.value:
            # -c is the total KV cache, divided among the -np slots (no unified cache).
            ctx_len = Knob(max(1, ctx_len.value // seqs.value) if ctx_len.value else None, True, f"{ctx_len.arg}/np")
    return EngineConfig(
        runtime=runtime,
        prefix_caching=prefix,
        chunked_prefill=chunked,
        batched_tokens=budget,
        max_num_seqs=seqs,
        memory_fraction=fraction,
        kv_cache_dtype=kv_dtype,
        enforce_eager=eager,
        cpu_offload_gb=offload,
        n_gpu_layers=ngl,
        flash_attention=fa,
        context_length=ctx_len,
        speculative=spec,
        disaggregated=disagg,
        keep_alive=keep_alive,
        kv_cache_dtype_v=kv_v if runtime == "llamacpp" else kv_dtype,
        stream_interval=stream_interval,
        mixed_chunk=mixed if runtime == "sglang" else _or_default(mixed, True if runtime in _MIXING else None),
        expert_parallel=ep,
        n_cpu_moe=cpu_moe,
        micro_batch=ubatch,
        kv_unified=kv_unified,
    )
