"""Fix texts per runtime, with the exact flag and variable names (docs/formats.md §8).

Each function returns ``{runtime: text}`` for the runtimes where the knob exists; ``other`` is the
runtime-agnostic advice. Rules combine and extend them; the engine puts the run's own runtime first.

The texts are pure over their few arguments and the static tables they read (``runtimes.toml``,
``quant_support.toml``, both loaded once), so the builders rules call per finding remember them:
each call still returns a new dict, which the caller may change.
"""

from __future__ import annotations

import functools

from advisor.catalog.capabilities import QuantChoice, weight_quant_choice
from advisor.rules.runtimes import flag, table

__all__ = [
    "EXTRA_OPTIONS",
    "batched_tokens",
    "chunked_prefill_on",
    "kv_cache_quant",
    "llamacpp_draft_max",
    "max_seqs",
    "memory_fraction",
    "merge",
    "prefix_caching",
    "speculative_decoding",
    "weight_quant",
]

#: TensorRT-LLM's trtllm-serve takes LLM-API settings from a YAML file.
EXTRA_OPTIONS = "in the YAML given to trtllm-serve --extra_llm_api_options"


def merge(*parts: dict[str, str], sep: str = " ") -> dict[str, str]:
    """Join several fix dicts runtime by runtime (texts for the same runtime are concatenated)."""
    out: dict[str, str] = {}
    for part in parts:
        for key, text in part.items():
            out[key] = f"{out[key]}{sep}{text}" if key in out else text
    return out


def prefix_caching() -> dict[str, str]:
    return {
        "vllm": (
            "--enable-prefix-caching (on by default in the V1 engine, vLLM ≥ 0.8; remove --no-enable-prefix-caching)."
        ),
        "sglang": "Remove --disable-radix-cache (RadixAttention caches shared prefixes by default).",
        "tgi": (
            "TGI caches prefixes by default from 2.3 (off for VLMs, LoRA adapters and paged attention); do not "
            "set PREFIX_CACHING=0 (USE_PREFIX_CACHING before 2.4; older TGI: upgrade)."
        ),
        "trtllm": f"kv_cache_config: {{enable_block_reuse: true}} {EXTRA_OPTIONS}.",
        "ollama": (
            "Ollama reuses a slot's cached prefix automatically: keep the system prompt byte-identical "
            "and first, "
            'and keep the model loaded (OLLAMA_KEEP_ALIVE / "keep_alive"); with OLLAMA_NUM_PARALLEL > '
            "1 each slot "
            "caches its own prefix."
        ),
        "llamacpp": (
            'Send "cache_prompt": true (the llama-server default) and start with --cache-reuse 256 so '
            "shifted prefixes are reused."
        ),
        "other": (
            "Enable prefix (KV) caching in the serving engine and keep the shared system prompt first and "
            "byte-identical."
        ),
    }


def batched_tokens(target: int) -> dict[str, str]:
    """Set the per-step token budget (chunk size) to ``target``."""
    return {
        "vllm": f"--max-num-batched-tokens {target}",
        "sglang": f"--chunked-prefill-size {target}",
        "tgi": f"--max-batch-prefill-tokens {target}",
        "trtllm": f"--max_num_tokens {target}",
        "llamacpp": f"-b {target} -ub {min(target, 2048)}",
        "other": f"Set the engine's per-step token budget (prefill chunk size) to {target} tokens.",
    }


def chunked_prefill_on(budget: int) -> dict[str, str]:
    return {
        "vllm": (
            f"--enable-chunked-prefill --max-num-batched-tokens {budget} (always on in the V1 engine, vLLM "
            "≥ 0.8: upgrade)."
        ),
        "sglang": f"--chunked-prefill-size {budget} (a value of -1 disables chunking).",
        "trtllm": f"enable_chunked_prefill: true and max_num_tokens: {budget} {EXTRA_OPTIONS}.",
        "tgi": ("TGI ≥ 3 chunks prefills by default: upgrade, and bound the chunk with --max-batch-prefill-tokens."),
        "other": (f"Enable chunked prefill with a {budget}-token budget so long prompts are mixed into decode steps."),
    }


#: FP8 KV caveats (vLLM quantized KV cache docs; vllm-project/vllm#24577, #48786): off Hopper the
#: attention backend must support an FP8 cache, and without calibrated scales (1.0 by default)
#: accuracy can drop.
FP8_KV_CAVEAT = (
    "Off Hopper/Blackwell check that the attention backend supports an FP8 cache (FlashInfer or "
    "Triton; vllm-project/vllm#24577); it can be slower than BF16 (vllm-project/vllm#48786); and "
    "calibrate the KV scales (the default scale of 1.0 can cost accuracy)."
)


#: SGLang's own warning (docs.sglang.io advanced_features/quantized_kv_cache): a backend that does not
#: fuse the dequantization into attention can be very slow.
_SGLANG_KV_CAVEAT = (
    "Check that the attention backend runs a quantized cache fused (SGLang warns that unfused "
    "dequantization can be very slow); fp8_e5m2 needs no scales."
)
#: vLLM on ROCm: RocmAttentionBackend.supported_kv_cache_dtypes has fp8, fp8_e4m3, fp8_e5m2
#: (vllm/v1/attention/backends/rocm_attn.py); the scales default to 1.0 (docs quantized_kvcache).
_VLLM_ROCM_KV_CAVEAT = (
    "vLLM's ROCm attention backend takes an FP8 cache; calibrate the KV scales (the default scale of "
    "1.0 can cost accuracy)."
)
#: vLLM on Hopper/Blackwell: the backends take an FP8 cache, but the scales still default to 1.0
#: without calibration (docs features/quantization/quantized_kvcache: "No calibration (default
#: scales): All quantization scales are set to 1.0"; a calibrated checkpoint is the recommended path).
_VLLM_NATIVE_KV_CAVEAT = "Calibrate the KV scales (the default scale of 1.0 can cost accuracy)."


def kv_cache_quant(generation: str | None = None) -> dict[str, str]:
    """Store the KV cache in 8 bits, each runtime's text with its own caveats: vLLM's backend and
    scale caveats off Hopper/Blackwell (FlashInfer or Triton on NVIDIA, its ROCm backend on AMD) and
    the scale caveat on them, SGLang's fused-backend warning, TGI's CUDA-only FP8 cache, TensorRT-LLM's
    FP8 generations."""
    return dict(_kv_cache_quant(generation))


@functools.lru_cache(maxsize=64, typed=True)  # one entry per device generation
def _kv_cache_quant(generation: str | None) -> tuple[tuple[str, str], ...]:
    native = generation in ("hopper", "blackwell")
    amd = (generation or "").startswith(("cdna", "rdna"))
    gen = _GENERATION_LABEL.get(generation or "", generation or "this GPU")
    vllm_caveat = f" {_VLLM_NATIVE_KV_CAVEAT}" if native else f" {_VLLM_ROCM_KV_CAVEAT if amd else FP8_KV_CAVEAT}"
    sglang_caveat = "" if native else f" {_SGLANG_KV_CAVEAT}"
    # launcher/src/main.rs (v3.3.7): "the only supported value are `fp8_e4m3fn` and `fp8_e5m2` on CUDA".
    tgi = (
        f"TGI's FP8 KV cache ({flag('tgi', '--kv-cache-dtype')} fp8_e5m2) runs on CUDA only; on {gen} keep the "
        "16-bit cache."
        if amd
        else f"{flag('tgi', '--kv-cache-dtype')} fp8_e5m2 (CUDA; e5m2's range needs no calibrated scales)."
    )
    # TensorRT-LLM's precision matrix (quant_support.toml trtllm.fp8): FP8 on Ada, Hopper, Blackwell.
    trtllm = (
        f"kv_cache_config: {{dtype: fp8}} {EXTRA_OPTIONS} (FP8 runs on Ada, Hopper and Blackwell; calibrate the "
        "KV scales when quantizing with ModelOpt)."
        if generation in ("ada", "hopper", "blackwell") or generation is None
        else f"TensorRT-LLM's FP8 KV cache needs Ada, Hopper or Blackwell; on {gen} keep the 16-bit cache."
    )
    texts = {
        "vllm": f"{flag('vllm', '--kv-cache-dtype')} fp8.{vllm_caveat}",
        "sglang": f"{flag('sglang', '--kv-cache-dtype')} fp8_e5m2.{sglang_caveat}",
        "tgi": tgi,
        "trtllm": trtllm,
        "ollama": (
            f"{flag('ollama', 'OLLAMA_KV_CACHE_TYPE')}=q8_0 with {flag('ollama', 'OLLAMA_FLASH_ATTENTION')}=1 "
            "(KV quantization needs flash attention)."
        ),
        "llamacpp": (
            f"{flag('llamacpp', '-fa')} on {flag('llamacpp', '-ctk')} q8_0 {flag('llamacpp', '-ctv')} q8_0 "
            "(a quantized V cache needs flash attention; K alone does not)."
        ),
        "mlx": (
            f"mlx_lm.server has no KV-cache quantization; mlx_lm.generate takes {flag('mlx', '--kv-bits')} 8 "
            "(or serve a model quantized with mlx_lm.convert -q to leave more memory for the cache)."
        ),
        "other": "Store the KV cache in 8 bits (FP8 or Q8_0): half the bytes per token to read and to hold.",
    }
    return tuple(texts.items())


def memory_fraction(target: float) -> dict[str, str]:
    return {
        "vllm": f"--gpu-memory-utilization {target:g}",
        "sglang": f"--mem-fraction-static {min(target, 0.9):g}",
        "tgi": "--cuda-memory-fraction 1.0 (the default) and let TGI size --max-batch-total-tokens itself.",
        "trtllm": (
            f"kv_cache_config: {{free_gpu_memory_fraction: {target:g}}} {EXTRA_OPTIONS} (a share of the memory "
            "left after the weights load, not of the whole device)."
        ),
        "other": f"Let the engine claim {target:.0%} of device memory for weights and KV cache.",
    }


def _llamacpp_has(name: str, build: str | None) -> bool | None:
    """Whether llama.cpp ``build`` has flag ``name`` (runtimes.toml); None when the build is unknown
    or the row is bounded by a pull request alone (no build number to compare with)."""
    rows = [f for f in table()["llamacpp"].flags if f.flag == name]
    if not rows:
        return False
    span = rows[0].span
    holds = rows[0].holds(build)
    if holds is False:
        return False
    if (span.since_pr and not span.since) or (span.until_pr and not span.until):
        return None
    return holds


def _llamacpp_slots(n: int, build: str | None) -> str:
    """``-np n``, with ``--kv-unified`` where the build has it (b5913 and later, runtimes.toml)."""
    np_ = flag("llamacpp", "-np")
    if _llamacpp_has("--kv-unified", build) is False:
        # Before --kv-unified every slot gets -c / -np (src/llama-context.cpp n_ctx_seq).
        return f"{np_} {n} and raise -c to {n} × the context one request needs (-c is divided among the {n} slots)."
    return (
        f"{np_} {n} {flag('llamacpp', '--kv-unified')} (the slots then share one -c; an explicit -np without "
        "--kv-unified divides -c among them, so raise -c with it)."
    )


def max_seqs(n: int, build: str | None = None) -> dict[str, str]:
    """Set the number of sequences decoded together to ``n``; ``build`` is the run's runtime
    version, which decides llama.cpp's text (``--kv-unified`` only exists from b5913)."""
    return dict(_max_seqs(n, build))


@functools.lru_cache(maxsize=1024, typed=True)  # a deployment's batch sizes × runtime versions; 4 ≠ 4.0
def _max_seqs(n: int, build: str | None) -> tuple[tuple[str, str], ...]:
    texts = {
        "vllm": f"--max-num-seqs {n}",
        "sglang": f"--max-running-requests {n}",
        # On CUDA TGI's unpadded models ignore --max-batch-size (launcher docs): the batch is
        # bounded by tokens and by concurrent requests. The token bound is inferred at warm-up from
        # the free memory: a flash-attention model ignores --max-batch-total-tokens (checked: TGI
        # router/src/main.rs v1.0.0-v2.0.x, backends/v3/src/lib.rs v2.4.0-v3.3.7: "Warn if user added
        # his own max-batch-total-tokens as we will ignore it").
        "tgi": (
            f"{flag('tgi', '--max-concurrent-requests')} {n}; TGI sizes the batch's token budget itself from the "
            f"memory left after warm-up (flash-attention models ignore {flag('tgi', '--max-batch-total-tokens')}), so "
            f"{n} sequences need their KV to fit it: shorten {flag('tgi', '--max-total-tokens')} or raise "
            f"{flag('tgi', '--cuda-memory-fraction')} if they do not ({flag('tgi', '--max-batch-size')} only applies "
            "to targets without unpadded batching)."
        ),
        "trtllm": f"--max_batch_size {n}",
        "ollama": f"OLLAMA_NUM_PARALLEL={n} (memory grows with OLLAMA_NUM_PARALLEL × num_ctx).",
        "llamacpp": _llamacpp_slots(n, build),
        "other": f"Allow {n} sequences to be decoded together.",
    }
    return tuple(texts.items())


_GENERATION_LABEL = {
    "turing": "Turing",
    "ampere": "Ampere",
    "ada": "Ada",
    "hopper": "Hopper",
    "blackwell": "Blackwell",
}


def _quant_text(runtime: str, choice: QuantChoice, generation: str | None) -> str:
    """The fix for one runtime and the method it runs on this generation."""
    gen = _GENERATION_LABEL.get(generation or "", generation or "this GPU")
    m = choice.method
    if runtime == "vllm" and m == "fp8":
        text = f"Serve an FP8 checkpoint (…-FP8 on the Hub) or quantize on load: {flag('vllm', '--quantization')} fp8."
        if choice.how == "weight-only":
            text += f" On {gen} vLLM runs it weight-only (W8A16, FP8 Marlin): decode speeds up, prefill does not."
        return text
    if runtime == "vllm" and m == "nvfp4":
        # modelopt.py: ModelOptNvFp4Config (quantization "modelopt_fp4", read from the checkpoint's config).
        return (
            "Serve an NVFP4 checkpoint (…-FP4 / …-NVFP4 made with NVIDIA ModelOpt; vLLM reads modelopt_fp4 from "
            f"its config): {gen} runs it W4A4 on its FP4 tensor cores. Check quality on your evals first."
        )
    if runtime in ("vllm", "sglang") and m in ("awq", "gptq"):
        marlin = "" if generation == "turing" else " (vLLM picks the Marlin kernels; --quantization awq_marlin)"
        if runtime == "sglang":
            # awq_marlin needs capability 8.0; Turing runs the plain AWQ kernel (min capability 7.5).
            method = "awq" if generation == "turing" else "awq_marlin"
            return f"Serve a 4-bit AWQ/GPTQ checkpoint ({flag('sglang', '--quantization')} {method})."
        text = f"Serve a 4-bit AWQ or GPTQ checkpoint{marlin}."
        return text.replace("--quantization", flag("vllm", "--quantization"))
    # TGI (layers/fp8.py, v2.2+) and SGLang (fp8_utils.can_auto_enable_marlin_fp8) run fp8
    # checkpoints below their W8A8 generations as W8A16 through FP8 Marlin (quant_support.toml).
    weight_only = (
        f" On {gen} it runs weight-only (W8A16, FP8 Marlin): decode speeds up, prefill does not."
        if choice.how == "weight-only"
        else ""
    )
    if runtime == "sglang" and m == "fp8":
        return f"{flag('sglang', '--quantization')} fp8 (or serve an FP8 checkpoint).{weight_only}"
    if runtime == "tgi" and m == "fp8":
        return f"{flag('tgi', '--quantize')} fp8.{weight_only}"
    if runtime == "tgi":
        suffix = (
            ""
            if choice.bits <= 4 or generation in ("hopper", "blackwell")
            else f" (TGI's fp8 needs H100 or newer; on {gen} use 4-bit)"
        )
        return f"{flag('tgi', '--quantize')} awq with an AWQ checkpoint (or {flag('tgi', '--quantize')} gptq){suffix}."
    if runtime == "trtllm":
        qformat = {"fp8": "fp8", "int8_weight_only": "int8_wo", "int4_awq": "int4_awq", "nvfp4": "nvfp4"}.get(m, m)
        what = {
            "fp8": "FP8",
            "int8_weight_only": "INT8 weight-only (W8A16)",
            "int4_awq": "INT4 AWQ (W4A16)",
            "nvfp4": f"NVFP4 (W4A4 on {gen}'s FP4 tensor cores)",
        }.get(m, m)
        note = (
            f" (TensorRT-LLM's FP8 needs Ada, Hopper or Blackwell; {gen} runs weight-only INT8/INT4)"
            if m != "fp8" and choice.bits >= 7
            else ""
        )
        tool = f"hf_ptq.py {flag('trtllm', '--qformat')} {qformat}"
        return f"Quantize to {what} with NVIDIA ModelOpt ({tool}) and serve the result{note}."
    if runtime == "ollama":
        return (
            "Pull a q8_0 tag of the model (ollama pull <model>:<size>-instruct-q8_0)."
            if choice.bits >= 7
            else "Pull a q4_K_M tag of the model."
        )
    if runtime == "llamacpp":
        if choice.bits >= 7:
            return "Use a Q8_0 GGUF (llama-quantize model-f16.gguf model-q8_0.gguf Q8_0)."
        return "Use a Q4_K_M GGUF (llama-quantize model-f16.gguf model-q4_k_m.gguf Q4_K_M)."
    if runtime == "mlx":
        bits = 8 if choice.bits >= 7 else 4
        return f"mlx_lm.convert {flag('mlx', '--hf-path')} <model> {flag('mlx', '-q')} {flag('mlx', '--q-bits')} {bits}"
    return ""


def weight_quant(target_bits: float, generation: str | None = None) -> dict[str, str]:
    """Quantize weights to about ``target_bits`` (8 → FP8 / INT8 / Q8_0, otherwise 4-bit), with
    the method each runtime runs on ``generation`` (capabilities.csv). A runtime with no method
    for this generation is left out; with the generation unknown every fix says what FP8 needs."""
    return dict(_weight_quant(target_bits, generation))


@functools.lru_cache(maxsize=256, typed=True)  # a few bit targets × device generations
def _weight_quant(target_bits: float, generation: str | None) -> tuple[tuple[str, str], ...]:
    out: dict[str, str] = {}
    for runtime in ("vllm", "sglang", "tgi", "trtllm", "ollama", "llamacpp", "mlx"):
        if generation is None:
            choice = _unknown_generation_choice(runtime, target_bits)
        else:
            choice = weight_quant_choice(runtime, generation, target_bits)
        if choice is None:
            continue
        text = _quant_text(runtime, choice, generation)
        if generation is None and choice.method == "fp8":
            text += " FP8 runs W8A8 on Ada, Hopper and Blackwell; older GPUs need weight-only or 4-bit formats."
        if text:
            out[runtime] = text
    out["other"] = (
        "Quantize the weights to 8 bits (FP8, INT8 or Q8_0): half the bytes per decoded token."
        if target_bits >= 7
        else "Quantize the weights to 4 bits (AWQ, GPTQ or Q4_K_M); check quality on your evals first."
    )
    return tuple(out.items())


def _unknown_generation_choice(runtime: str, target_bits: float) -> QuantChoice | None:
    # An inline or uncatalogued device: name the method of the newest generation that has it.
    for generation in ("hopper", "apple-m4"):
        choice = weight_quant_choice(runtime, generation, target_bits)
        if choice is not None:
            return choice
    return None


def llamacpp_draft_max(build: str | None) -> str:
    """llama.cpp's draft-length flag for ``build``. ``--draft-max`` became ``--spec-draft-n-max`` with
    ggml-org/llama.cpp#22397 (2026-04), whose first build number is not known (runtimes.toml bounds
    both rows by the pull request only): a build the table places on one side gets its own spelling,
    any other both, with the condition."""
    old, new = flag("llamacpp", "--draft-max"), flag("llamacpp", "--spec-draft-n-max")
    if _llamacpp_has(new, build) is True:
        return new
    if _llamacpp_has(old, build) is True and _llamacpp_has(new, build) is False:
        return old
    return f"{old} (builds before ggml-org/llama.cpp#22397; {new} in builds after it)"


def speculative_decoding() -> dict[str, str]:
    return {
        "vllm": (
            "--speculative-config "
            '\'{"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 4}\' (or an EAGLE '
            "draft model)."
        ),
        "sglang": (
            "--speculative-algorithm EAGLE --speculative-draft-model-path <eagle-draft> --speculative-num-steps 3"
        ),
        "tgi": "--speculate 2 (n-gram, or a Medusa checkpoint).",
        "trtllm": f"speculative_config (Eagle, MTP or a draft model) {EXTRA_OPTIONS}.",
        "llamacpp": (
            f"{flag('llamacpp', '-md')} <small-draft-model.gguf> {flag('llamacpp', '--spec-draft-n-max')} 16 (a draft "
            f"model of the same family; builds before ggml-org/llama.cpp#22397 spell it "
            f"{flag('llamacpp', '--draft-max')}, builds after #23988 also need "
            f"{flag('llamacpp', '--spec-type')} draft-simple)."
        ),
        "ollama": (
            "Ollama 0.30.0 and later speculate when the model ships a draft (a separate draft model or "
            f"embedded MTP tensors; {flag('ollama', 'draft_num_predict')} sets the draft length, 0 turns it off); "
            "on older releases upgrade, or serve with llama.cpp and a draft model."
        ),
        "mlx": f"mlx_lm.server {flag('mlx', '--draft-model')} <small-model> {flag('mlx', '--num-draft-tokens')} 3",
        "other": "a cheap draft (n-gram, EAGLE or a small model) proposes tokens that one weight read verifies.",
    }
