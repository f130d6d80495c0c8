from __future__ import annotations

import math
from typing import ClassVar

from advisor.rules import runtimes
from advisor.rules.base import Evidence, Finding, Rule
from advisor.rules.config import ParamSpec, Spec
from advisor.rules.context import RunContext
from advisor.rules.helpers import fmt, matter_cap, ttft_typical
from advisor.rules.limits import TTFT_MS, TTFT_OBJECTIVES
from advisor.rules.severity import Severity


class LocalPrefillTuning(Rule):
    """llama.cpp or Ollama prefills long prompts with a small micro-batch or without flash attention.

    ## Why is this bad?
    llama.cpp processes a prompt ``-ub`` tokens per pass (Ollama: ``num_batch``); every pass reads
    all the weights once, so a small micro-batch turns a long prompt into many weight reads and
    keeps the GPU's matmuls small. Flash attention (``-fa``, on by ``auto`` in recent builds;
    ``OLLAMA_FLASH_ATTENTION``) keeps long-prompt attention from materialising the score matrix.
    Turning either off makes TTFT on long prompts several times slower than the hardware allows.

    An engine microbenchmark (llama-bench ``pp8192``, llama-batched-bench) has no user waiting on
    its prompt: its prefill time is not a TTFT. There the finding is an engine note about the
    build's settings, at most ``moderate``, and says so.

    ## Fix
    llama.cpp: ``-ub 1024 -b 2048`` (or larger for long prompts on a big GPU) and ``-fa on`` (or
    leave the default ``auto``); Ollama: ``"num_batch": 1024`` in the request options or
    Modelfile and ``OLLAMA_FLASH_ATTENTION=1``. Mind the context tiers: from Ollama 0.15.5 the
    default ``num_ctx`` grows with VRAM (CFG004). The action is ``raise-batched-tokens`` when the
    micro-batch is small, ``fix-serving-stack`` when only flash attention is off (a runtime
    setting, not a token budget).

    ## Example
    llama.cpp with ``-ub 128 -fa off`` and 6,000-token prompts on an RTX 4090: 47 passes of 128
    tokens per prompt, TTFT p50 2.4 s; ``-ub 1024 -fa on`` needs 6.
    """

    id = "CFG009"
    name = "config.local_prefill_tuning"
    action = "raise-batched-tokens"
    actions: ClassVar[tuple[str, ...]] = ("fix-serving-stack",)
    thresholds: ClassVar[tuple[Spec, ...]] = (
        TTFT_MS,
        ParamSpec(
            "min_ubatch", unit="tokens", doc="micro-batch below which long prompts take too many passes", minimum=32
        ),
        ParamSpec("min_prompt_tokens", unit="tokens", doc="shorter prompts are not affected", minimum=1),
    )

    def evaluate(self, ctx: RunContext) -> Finding | None:
        if ctx.runtime not in ("llamacpp", "ollama") or ctx.hardware is None or ctx.hardware.kind == "cpu":
            return None
        prompt = ctx.measured.uncached_prompt_tokens or ctx.measured.prompt_tokens
        ttft = ttft_typical(ctx)
        if not prompt or prompt < self.p("min_prompt_tokens") or ttft is None:
            return None
        e = ctx.engine
        ubatch = e.micro_batch if ctx.runtime == "llamacpp" else e.batched_tokens
        small = ubatch.explicit and ubatch.value is not None and ubatch.value < self.p("min_ubatch")
        fa_off = e.flash_attention.explicit and e.flash_attention.value is False
        if not small and not fa_off:
            return None
        severity = matter_cap(ctx, self.common, TTFT_OBJECTIVES, self.t("ttft_ms"), ttft[0])
        if not severity:
            return None
        engine_test = ctx.microbenchmark
        if engine_test:
            # No user waits on a pp test's prompt: an engine note about the build, never a TTFT alarm.
            severity = min(severity, Severity.MODERATE)
        evidence: list[Evidence] = [Evidence(ttft[1], ttft[0], f"prompts of {fmt(prompt)} tokens", "run")]
        reasons: list[str] = []
        if small and ubatch.value is not None:
            passes = math.ceil(prompt / ubatch.value)
            reasons.append(f"{passes} passes of {ubatch.value} tokens per prompt")
            evidence.append(
                Evidence(ubatch.arg or "ubatch", float(ubatch.value), ">= 512 (1024 for long prompts)", "run")
            )
        if fa_off:
            reasons.append("flash attention off")
            evidence.append(Evidence(e.flash_attention.arg or "flash_attention", False, "on", "run"))
        lc = [f"{runtimes.flag('llamacpp', '-ub')} 1024 {runtimes.flag('llamacpp', '-b')} 2048"] if small else []
        if fa_off:
            lc.append(
                f"{runtimes.flag('llamacpp', '-fa')} on (builds older than -fa on|off|auto, which b6327 has, "
                "take a bare -fa)"
            )
            if engine_test:
                lc.append(f"(llama-bench takes {runtimes.flag('llamacpp', '-fa')} 1)")
        ol = ['"num_batch": 1024 in the request options or Modelfile'] if small else []
        if fa_off:
            ol.append(f"{runtimes.flag('ollama', 'OLLAMA_FLASH_ATTENTION')}=1")
        if engine_test:
            rate = prompt / ttft[0] * 1000.0
            title = (
                f"The engine prefills {fmt(prompt)}-token tests with {' and '.join(reasons)} "
                f"({fmt(ttft[0], 'ms')} per prompt, {fmt(rate, 'tok/s')}): an engine setting, not a prompt to trim"
            )
        else:
            title = f"Long prompts prefill slowly: {' and '.join(reasons)} (TTFT {fmt(ttft[0], 'ms')})"
        return Finding(
            severity=severity,
            title=title,
            action=None if small else "fix-serving-stack",
            evidence=tuple(evidence),
            fix={
                "llamacpp": " ".join(lc) + ".",
                "ollama": "; ".join(ol) + ".",
                "other": "Prefill with a micro-batch of 1024+ tokens and flash attention on.",
            },
            confidence=0.5,
        )
