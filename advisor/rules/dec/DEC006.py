from __future__ import annotations

from typing import ClassVar

from advisor.rules import runtimes
from advisor.rules.base import Evidence, Finding, Gain, Rule
from advisor.rules.config import ParamSpec, Spec, ThresholdSpec
from advisor.rules.context import RunContext
from advisor.rules.helpers import decode_efficiency, fmt
from advisor.rules.limits import MAX_EFFICIENCY

_RUNTIMES = ("ollama", "llamacpp")


class PartialCpuOffload(Rule):
    """Decode speed says part of the model is read from CPU memory every token.

    ## Why is this bad?
    llama.cpp and Ollama keep the layers that do not fit in VRAM (or the MoE experts sent to the
    CPU with ``--n-cpu-moe``) in system memory. Each token then reads those weights at CPU memory
    speed (60-100 GB/s on a desktop) instead of the GPU's hundreds: a decode that lands between the
    CPU and GPU ceilings is the signature. The share read from the CPU follows from the numbers:
    ``1 / decode = W × (f / BW_cpu + (1 − f) / BW_gpu)``. Ollama shows it as ``size_vram`` below
    ``size`` (``ollama ps`` "48%/52% CPU/GPU"), llama.cpp as "offloaded N/M layers to GPU".

    ## Fix
    Make the whole model fit: a smaller quantization, a smaller context (``num_ctx``, ``-c``: the KV
    cache competes with the weights for VRAM), ``-ngl 999`` / no ``num_gpu`` limit, and for MoE the
    smallest ``--n-cpu-moe`` that fits.

    ## Example
    Llama-3.1-8B F16 (16 GB) with Ollama on an A10G, a large ``num_ctx`` pushing layers out of
    VRAM, at 15 tok/s: against a ~37 tok/s GPU ceiling and ~5.6 tok/s on the CPU alone, about a
    quarter of the weights stream from system memory.
    """

    id = "DEC006"
    name = "decode.partial_cpu_offload"
    action = "fix-serving-stack"
    supersedes: ClassVar[tuple[str, ...]] = ("DEC002",)
    thresholds: ClassVar[tuple[Spec, ...]] = (
        ThresholdSpec("cpu_share", ascending=True, unit="ratio", doc="share of the weights read from CPU memory"),
        ParamSpec("cpu_bandwidth_gb_s", unit="GB/s", doc="host memory bandwidth assumed when unknown", minimum=1),
        MAX_EFFICIENCY,
    )

    def evaluate(self, ctx: RunContext) -> Finding | None:
        roof, hw = ctx.roofline, ctx.hardware
        decode = ctx.measured.decode_tok_s
        eff = decode_efficiency(ctx)
        if ctx.runtime not in _RUNTIMES or roof is None or hw is None or hw.kind != "gpu" or decode is None:
            return None
        if eff is None or eff > self.p("max_efficiency") or (ctx.measured.concurrency or 1.0) > 1.5:
            return None
        weights = roof.active_weight_bytes
        gpu_bw = roof.mem_bandwidth_gb_s * 1e9
        cpu_bw = self.p("cpu_bandwidth_gb_s") * 1e9
        # 1/decode = W (f / BW_cpu + (1 - f) / BW_gpu), at the healthy 75 % of each ceiling.
        step = 1.0 / decode * 0.75
        share = (step / weights - 1.0 / gpu_bw) / (1.0 / cpu_bw - 1.0 / gpu_bw)
        cpu_only = cpu_bw / weights
        if not 0.0 < share < 1.0 or decode <= cpu_only:
            return None
        severity = self.t("cpu_share").severity_of(share)
        e = ctx.engine
        causes = []
        if e.n_cpu_moe.value:
            causes.append(Evidence(e.n_cpu_moe.arg or "n_cpu_moe", float(e.n_cpu_moe.value), "0", "run"))
        if roof.fits_in_memory is False:
            causes.append(Evidence("fits_in_memory", False, "true", "physics"))
        if not severity:
            return None
        to = min(roof.decode_ceiling_batch_tok_s * 0.75, decode / max(1.0 - share, 0.05))
        return Finding(
            severity=severity,
            title=(
                f"{fmt(decode, 'tok/s')} sits between the CPU ({fmt(cpu_only)}) and GPU "
                f"({fmt(roof.decode_ceiling_batch_tok_s)}) ceilings: about {share:.0%} of the weights are read "
                "from system memory"
            ),
            evidence=(
                Evidence(
                    "decode_tok_s", decode, f"≈ {fmt(roof.decode_ceiling_batch_tok_s * 0.75)} all on the GPU", "physics"
                ),
                Evidence("cpu_share", share, "0", "physics"),
                *causes,
            ),
            fix={
                "ollama": (
                    "Check `ollama ps` (size_vram below size means CPU offload): pull a smaller quantization, lower "
                    f"num_ctx, and do not cap {runtimes.flag('ollama', 'num_gpu')}."
                ),
                "llamacpp": (
                    f"{runtimes.flag('llamacpp', '-ngl')} 999 with a smaller quantization or "
                    f"{runtimes.flag('llamacpp', '-c')} so every layer fits; for MoE the smallest "
                    f"{runtimes.flag('llamacpp', '--n-cpu-moe')} that fits."
                ),
                "other": "Fit the whole model in GPU memory (smaller quantization or context).",
            },
            expected_gain=Gain("decode_tok_s", decode, to),
            confidence=0.5,
        )
