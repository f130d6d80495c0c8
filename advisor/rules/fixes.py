"""Fix texts per runtime, with the exact flag and variable names (docs/formats.md §8).

Each function returns ``{runtime: text}`` for the runtimes where the knob exists; ``other`` is the
runtime-agnostic advice. Rules combine and extend them; the engine puts the run's own runtime first.
"""

from __future__ import annotations

__all__ = [
    "EXTRA_OPTIONS",
    "batched_tokens",
    "chunked_prefill_on",
    "kv_cache_quant",
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
        "tgi": "TGI ≥ 3 caches prefixes by default; do not set PREFIX_CACHING=0 (older TGI: upgrade).",
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


def kv_cache_quant() -> dict[str, str]:
    return {
        "vllm": "--kv-cache-dtype fp8",
        "sglang": "--kv-cache-dtype fp8_e5m2",
        "tgi": "--kv-cache-dtype fp8_e5m2",
        "trtllm": f"kv_cache_config: {{dtype: fp8}} {EXTRA_OPTIONS}.",
        "ollama": ("OLLAMA_KV_CACHE_TYPE=q8_0 with OLLAMA_FLASH_ATTENTION=1 (KV quantization needs flash attention)."),
        "llamacpp": "-fa on -ctk q8_0 -ctv q8_0 (a quantized V cache needs flash attention).",
        "mlx": "mlx_lm.server/generate with --kv-bits 8.",
        "other": "Store the KV cache in 8 bits (FP8 or Q8_0): half the bytes per token to read and to hold.",
    }


def memory_fraction(target: float) -> dict[str, str]:
    return {
        "vllm": f"--gpu-memory-utilization {target:g}",
        "sglang": f"--mem-fraction-static {min(target, 0.9):g}",
        "tgi": "--cuda-memory-fraction 1.0 (the default) and let TGI size --max-batch-total-tokens itself.",
        "trtllm": f"kv_cache_config: {{free_gpu_memory_fraction: {target:g}}} {EXTRA_OPTIONS}.",
        "other": f"Let the engine claim {target:.0%} of device memory for weights and KV cache.",
    }


def max_seqs(n: int) -> dict[str, str]:
    """Set the number of sequences decoded together to ``n``."""
    return {
        "vllm": f"--max-num-seqs {n}",
        "sglang": f"--max-running-requests {n}",
        "tgi": f"--max-batch-size {n}",
        "trtllm": f"--max_batch_size {n}",
        "ollama": f"OLLAMA_NUM_PARALLEL={n} (memory grows with OLLAMA_NUM_PARALLEL × num_ctx).",
        "llamacpp": f"-np {n} (and raise -c with it: the context is divided among the slots).",
        "other": f"Allow {n} sequences to be decoded together.",
    }


def weight_quant(target_bits: float) -> dict[str, str]:
    """Quantize weights to about ``target_bits`` (8 → FP8 / Q8_0, otherwise 4-bit)."""
    if target_bits >= 7:
        return {
            "vllm": "Serve an FP8 checkpoint (…-FP8 on the Hub) or quantize on load: --quantization fp8.",
            "sglang": "--quantization fp8 (or serve an FP8 checkpoint).",
            "tgi": "--quantize fp8",
            "trtllm": "Quantize to FP8 with NVIDIA ModelOpt (hf_ptq.py --qformat fp8), serve the result.",
            "ollama": "Pull a q8_0 tag of the model (ollama pull <model>:<size>-instruct-q8_0).",
            "llamacpp": "Use a Q8_0 GGUF (llama-quantize model-f16.gguf model-q8_0.gguf Q8_0).",
            "mlx": "mlx_lm.convert --hf-path <model> -q --q-bits 8",
            "other": "Quantize the weights to 8 bits (FP8, INT8 or Q8_0): half the bytes per decoded token.",
        }
    return {
        "vllm": ("Serve a 4-bit AWQ or GPTQ checkpoint (vLLM picks the Marlin kernels; --quantization awq_marlin)."),
        "sglang": "Serve a 4-bit AWQ/GPTQ checkpoint (--quantization awq_marlin).",
        "tgi": "--quantize awq with an AWQ checkpoint (or --quantize gptq).",
        "trtllm": "Quantize to INT4 AWQ with NVIDIA ModelOpt (--qformat int4_awq) and serve that checkpoint.",
        "ollama": "Pull a q4_K_M tag of the model.",
        "llamacpp": "Use a Q4_K_M GGUF (llama-quantize model-f16.gguf model-q4_k_m.gguf Q4_K_M).",
        "mlx": "mlx_lm.convert --hf-path <model> -q --q-bits 4",
        "other": "Quantize the weights to 4 bits (AWQ, GPTQ or Q4_K_M); check quality on your evals first.",
    }


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
        "llamacpp": "-md <small-draft-model.gguf> --draft-max 16 (a draft model of the same family).",
        "ollama": "Ollama has no speculative decoding; llama.cpp (-md) or vLLM support it.",
        "other": "a cheap draft (n-gram, EAGLE or a small model) proposes tokens that one weight read verifies.",
    }
