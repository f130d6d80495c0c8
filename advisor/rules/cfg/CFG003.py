from __future__ import annotations

from typing import ClassVar

from advisor.rules import whatif
from advisor.rules.base import Evidence, Finding, Gain, Rule
from advisor.rules.config import Spec
from advisor.rules.context import RunContext
from advisor.rules.helpers import annotate_fix
from advisor.rules.severity import Severity


class KvQuantWithoutFlashAttention(Rule):
    """A quantized KV cache is configured with flash attention off, so it is not in effect.

    ## Why is this bad?
    Ollama and llama.cpp can store the KV cache in q8_0 or q4_0 only when flash attention is on.
    Ollama silently falls back to f16 when ``OLLAMA_FLASH_ATTENTION=0`` (or the backend lacks it),
    so the memory the setting was meant to save is not saved: the context or parallelism the
    deployment was sized for may not fit, and layers spill to the CPU. llama.cpp refuses a
    quantized **V** cache without ``-fa``; a quantized K cache alone (``-ctk q8_0``) works without
    it, so K and V are judged apart.

    ## Fix
    Turn flash attention on (``OLLAMA_FLASH_ATTENTION=1``; llama.cpp ``-fa on``) together with the
    KV type, or drop the KV setting if flash attention cannot be used on this backend.

    ## Example
    ``OLLAMA_KV_CACHE_TYPE=q8_0`` with ``OLLAMA_FLASH_ATTENTION=0``: the KV cache stays in f16 and
    takes twice the memory the deployment was planned with.
    """

    id = "CFG003"
    name = "config.kv_quant_without_flash_attention"
    action = "fix-serving-stack"
    # A binary misconfiguration: there is no measured value to grade, so no thresholds.
    thresholds: ClassVar[tuple[Spec, ...]] = ()

    def evaluate(self, ctx: RunContext) -> Finding | None:
        if ctx.runtime not in ("ollama", "llamacpp"):
            return None
        e = ctx.engine
        if e.flash_attention.value is not False:
            return None
        if ctx.runtime == "llamacpp":
            # Only the V cache needs flash attention (llama.cpp refuses -ctv q8_0 with -fa off).
            v = e.kv_cache_dtype_v
            if not v.explicit or not v.value or _sixteen_bit(v.value):
                return None
        elif e.kv_cache_16bit is not False or not e.kv_cache_dtype.explicit:
            return None
        gain: Gain | None = None
        cur = ctx.roofline
        # Only Ollama runs with the setting silently ignored, so only there is a pool lost to measure;
        # llama-server refuses to start, and the fix is what lets it run at all (no gain to damp by).
        if ctx.runtime == "ollama" and cur is not None and cur.kv_pool_tokens:
            sixteen = whatif.reanalyse(ctx, kv_cache_dtype="fp16")
            if sixteen is not None and sixteen.kv_pool_tokens:
                # What the setting was meant to give, against what f16 actually gives.
                gain = Gain("kv_pool_tokens", float(sixteen.kv_pool_tokens), float(cur.kv_pool_tokens))
        fa_name = e.flash_attention.arg or "flash_attention"
        kv = e.kv_cache_dtype_v if ctx.runtime == "llamacpp" else e.kv_cache_dtype
        return Finding(
            severity=Severity.MODERATE,
            title=(
                f"KV cache type {kv.value} is set but flash attention is off, so "
                + (
                    "the KV cache stays in 16 bits"
                    if ctx.runtime == "ollama"
                    else "llama-server refuses the quantized V cache"
                )
            ),
            evidence=(
                Evidence(
                    kv.arg or "kv_cache_type",
                    kv.value or "",
                    "needs flash attention",
                    "run",
                ),
                Evidence(fa_name, False, "true", "run"),
            ),
            fix=annotate_fix(
                {
                    "ollama": "OLLAMA_FLASH_ATTENTION=1 (required for OLLAMA_KV_CACHE_TYPE to take effect).",
                    "llamacpp": (
                        "-fa on (a quantized V cache needs flash attention; a quantized K cache alone does not; "
                        "builds older than -fa on|off|auto, which b6327 has, take a bare -fa)."
                    ),
                },
                ctx.runtime,
                ctx.run.setup.runtime_version,
            ),
            expected_gain=gain,
            confidence=0.8 if ctx.runtime == "ollama" else 0.6,
        )


def _sixteen_bit(dtype: str) -> bool:
    return dtype.strip().lower() in {"f16", "fp16", "bf16", "f32", "auto"}
