from __future__ import annotations

from typing import ClassVar

from advisor.catalog.capabilities import capability
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
    ``size`` (``ollama ps`` "48%/52% CPU/GPU"), llama.cpp as "offloaded N/M layers to GPU"; a run
    that reports it (``metrics.gpu_resident_share``, or a short ``-ngl`` / ``num_gpu``) is judged on
    that share, with no inference from the speed, and a run that reports 1 (all on the GPU) is not
    offloaded whatever its speed. ``--n-cpu-moe N`` on an MoE model with known expert counts gives
    the share too: the experts of ``N`` of the ``L`` layers, ``N / L × k × e / active`` of each
    token's reads (``k`` experts of ``e`` parameters each). A ``-ngl`` / ``num_gpu`` that covers
    every layer of a model whose weights and KV fit the GPU (the physics' ``fits_in_memory``) ends
    the inference: nothing is left for ``--fit`` to move, and a slow decode is the stack's
    (DEC002). On a unified-memory device (the catalog's ``memory`` column: Apple silicon, AMD
    Strix Halo, DGX Spark GB10, Jetson) GPU memory *is* system memory: there is no second ceiling
    to land between, and the rule stays silent.

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
        if ctx.runtime not in _RUNTIMES or roof is None or hw is None or hw.kind != "gpu" or decode is None:
            return None
        cap = capability(hw.id)
        if cap is not None and cap.unified_memory:
            # Strix Halo, DGX Spark GB10, Jetson (Apple silicon is not kind gpu): the GPU reads the one
            # LPDDR pool the CPU does. There is no second, slower memory to hold layers in, so a decode
            # below the ceiling is not offload (DEC002 judges the efficiency).
            return None
        weights = roof.active_weight_bytes
        gpu_bw = roof.mem_bandwidth_gb_s * 1e9
        cpu_bw = self.p("cpu_bandwidth_gb_s") * 1e9
        cpu_only = cpu_bw / weights
        reported = _reported_cpu_share(ctx)
        if reported is not None:
            # The run says where the weights are (Ollama size_vram, llama.cpp offloaded layers):
            # no inference from the speed is needed, and a model wholly on the GPU is not offloaded.
            share, source, evidence = reported
            if share <= 0.0:
                return None
            confidence = 0.8
        elif _all_layers_fit(ctx):
            return None  # every layer asked onto the GPU and the physics says the model fits there
        else:
            eff = decode_efficiency(ctx)
            if eff is None or eff > self.p("max_efficiency") or (ctx.measured.concurrency or 1.0) > 1.5:
                return None
            # 1/decode = W (f / BW_cpu + (1 - f) / BW_gpu), at the healthy 75 % of each ceiling.
            step = 1.0 / decode * 0.75
            share = (step / weights - 1.0 / gpu_bw) / (1.0 / cpu_bw - 1.0 / gpu_bw)
            if not 0.0 < share < 1.0 or decode <= cpu_only:
                return None
            source, evidence, confidence = "physics", None, 0.5
        severity = self.t("cpu_share").severity_of(share)
        e = ctx.engine
        causes = [evidence] if evidence is not None else []
        if e.n_cpu_moe.value and not any(c.metric == (e.n_cpu_moe.arg or "n_cpu_moe") for c in causes):
            causes.append(Evidence(e.n_cpu_moe.arg or "n_cpu_moe", float(e.n_cpu_moe.value), "0", "run"))
        if roof.fits_in_memory is False:
            causes.append(Evidence("fits_in_memory", False, "true", "physics"))
        if not severity:
            return None
        # What the same step takes with every weight on the GPU: W / BW_gpu against
        # W (f / BW_cpu + (1 - f) / BW_gpu).
        slowdown = (share / cpu_bw + (1.0 - share) / gpu_bw) * gpu_bw
        to = min(roof.decode_ceiling_batch_tok_s * 0.75, decode * slowdown)
        how = "reported" if reported is not None else "about"
        # --n-cpu-moe moves experts, which a token reads only k of: its share is of each step's reads.
        held = "each token's weight reads" if source.startswith(e.n_cpu_moe.arg or "n_cpu_moe") else "the model"
        return Finding(
            severity=severity,
            title=(
                f"{fmt(decode, 'tok/s')} sits between the CPU ({fmt(cpu_only)}) and GPU "
                f"({fmt(roof.decode_ceiling_batch_tok_s)}) ceilings: {how} {share:.0%} of the weights are read "
                "from system memory"
                if reported is None
                else f"{share:.0%} of {held} is held in system memory ({source}), so {fmt(decode, 'tok/s')} "
                f"decode reads it at CPU speed; all on the GPU it would reach about {fmt(to, 'tok/s')}"
            ),
            evidence=(
                Evidence(
                    "decode_tok_s", decode, f"≈ {fmt(roof.decode_ceiling_batch_tok_s * 0.75)} all on the GPU", "physics"
                ),
                Evidence("cpu_share", share, "0", "run" if reported is not None else "physics"),
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
            expected_gain=Gain("decode_tok_s", decode, max(to, decode)),
            confidence=confidence,
        )


def _reported_cpu_share(ctx: RunContext) -> tuple[float, str, Evidence] | None:
    """The share of the model outside GPU memory as the run reports it: ``metrics.gpu_resident_share``
    (Ollama ``size_vram / size``, llama.cpp "offloaded N/M layers"), else a short llama.cpp ``-ngl`` /
    Ollama ``num_gpu`` against the model's layers (both count the output layer too: M = layers + 1).
    ``-ngl 0`` is a CPU run, DEC002's."""
    resident = ctx.run.metrics.gpu_resident_share
    if resident is not None:
        return (
            max(0.0, 1.0 - resident),
            "metrics.gpu_resident_share",
            Evidence("gpu_resident_share", resident, "1", "run"),
        )
    ngl = ctx.engine.n_gpu_layers
    layers = ctx.model.num_hidden_layers if ctx.model is not None else None
    if ctx.engine.n_cpu_moe.value:
        # --n-cpu-moe keeps experts on the CPU whatever -ngl says: the config gives the share.
        return _cpu_moe_share(ctx)
    if not layers:
        return None
    total = layers + 1
    if ngl.explicit and ngl.value is not None and 0 < ngl.value < total:
        # Only a short -ngl is evidence: -ngl 999 asks for every layer, not that they fit
        # (--fit may still move some), so a full request falls back to the speed.
        on_gpu = ngl.value
        return (
            (total - on_gpu) / total,
            f"{ngl.arg} {ngl.value} of {total} layers",
            Evidence(ngl.arg or "n_gpu_layers", float(ngl.value), f">= {total}", "run"),
        )
    return None


def _cpu_moe_share(ctx: RunContext) -> tuple[float, str, Evidence] | None:
    """The share of each token's weight reads that ``--n-cpu-moe N`` leaves in system memory: the
    experts of the first ``N`` of ``L`` layers (llama.cpp's -ncmoe keeps "the MoE weights of the
    first N layers" on the CPU, tools/server/README.md). A token reads ``k`` experts of size
    ``e = (total − active) / (E − k)`` (summed over layers), so the CPU part of the active weights is
    ``min(N, L) / L × k × e / active``. None without the model's expert counts (the speed decides)."""
    model, n = ctx.model, ctx.engine.n_cpu_moe.value
    if model is None or not n or not model.is_moe or not model.num_hidden_layers:
        return None
    experts, per_tok = model.num_experts, model.num_experts_per_tok
    if not experts or not per_tok or experts <= per_tok or model.active_params_b <= 0:
        return None
    expert = (model.params_b - model.active_params_b) / (experts - per_tok)
    layers = model.num_hidden_layers
    share = min(n, layers) / layers * min(per_tok * expert / model.active_params_b, 1.0)
    arg = ctx.engine.n_cpu_moe.arg or "n_cpu_moe"
    return (
        share,
        f"{arg} {min(n, layers)} of {layers} layers' experts",
        Evidence(arg, float(n), "0", "run"),
    )


def _all_layers_fit(ctx: RunContext) -> bool:
    """``-ngl`` / ``num_gpu`` explicitly covers every layer (``-1`` or at least layers + 1), no
    experts are sent to the CPU, and the physics says the weights and KV fit the GPU: a slow decode
    then is the stack (DEC002), not offload. A request alone is not enough (``--fit`` may still
    move layers when they do not fit)."""
    ngl = ctx.engine.n_gpu_layers
    layers = ctx.model.num_hidden_layers if ctx.model is not None else None
    if ctx.engine.n_cpu_moe.value or not ngl.explicit or ngl.value is None or ctx.roofline is None:
        return False
    every = ngl.value < 0 or (layers is not None and ngl.value >= layers + 1)
    return every and ctx.roofline.fits_in_memory is True
