from __future__ import annotations

from typing import ClassVar

from advisor.rules import whatif
from advisor.rules.base import Evidence, Finding, Gain, Rule
from advisor.rules.config import ParamSpec, Spec, ThresholdSpec
from advisor.rules.context import RunContext
from advisor.rules.helpers import decode_efficiency, dropped, fmt, is_reasoning_model, matter_cap, output_shortfall
from advisor.rules.knobs import normalise_key
from advisor.rules.limits import DECODE_OBJECTIVES, DECODE_TOK_S
from advisor.rules.severity import damp


class FarBelowCeiling(Rule):
    """Decode runs far below what the memory bandwidth allows.

    ## Why is this bad?
    The bandwidth ceiling (bandwidth ÷ bytes read per token, at the run's batch size) is what the
    hardware can do; well-configured engines reach 60-85 % of it. A run far below means time goes
    somewhere other than reading weights: CPU launch overhead without CUDA graphs (eager mode),
    weights offloaded to CPU memory because the model does not fit, a CPU fallback, a slow
    attention backend, or power and clock limits. Buying a faster GPU would not fix any of these.

    ## Fix
    Fix the serving stack before changing hardware or weights: drop ``--enforce-eager``, keep every
    layer on the GPU (``-ngl 999``, no ``--cpu-offload-gb``; quantize or shard if it does not fit),
    check that the GPU backend is actually in use, and compare with a known-good version.

    With tensor parallelism the ceiling is the ideal one times the group's efficiency: two
    all-reduces per layer over NVLink or PCIe (``advisor/physics/parallel.py``), so a 70B model at
    TP8 is not judged against perfect scaling.

    A reasoning model (gpt-oss, DeepSeek-R1, the thinking Qwen3 releases; MEAS007's list), or a run
    that counted far fewer output tokens than it asked for (``workload.output_tokens_requested``
    at least twice the count), may time hidden reasoning tokens it does not count: decode per
    counted token then looks far slower than it is. The finding says so and its confidence is
    halved.

    ## Example
    Llama-3.1-8B bf16 on an A100 80GB with ``--enforce-eager``: 37 tok/s against a 126 tok/s
    ceiling (29 %); with CUDA graphs about 76 tok/s (60 % of the ceiling, a healthy stack).
    """

    id = "DEC002"
    name = "decode.far_below_ceiling"
    action = "fix-serving-stack"
    supersedes: ClassVar[tuple[str, ...]] = ("REG001",)
    thresholds: ClassVar[tuple[Spec, ...]] = (
        ThresholdSpec(
            "efficiency",
            ascending=False,
            unit="ratio",
            doc="measured ÷ per-stream decode ceiling; lower is worse",
        ),
        DECODE_TOK_S,
        ParamSpec(
            "healthy_efficiency",
            unit="ratio",
            doc="efficiency assumed after the fix when no expectation is available",
            minimum=0.1,
            maximum=1,
        ),
    )

    def evaluate(self, ctx: RunContext) -> Finding | None:
        eff = decode_efficiency(ctx)
        decode = ctx.measured.decode_tok_s
        cur = ctx.roofline
        if eff is None or decode is None or cur is None or ctx.engine.speculative.value:
            return None
        if ctx.measured.concurrency is None and (ctx.measured.n_requests or 0) > 1:
            return None  # the per-stream ceiling depends on the batch, which is unknown
        causes = self._causes(ctx)
        # Tensor parallelism pays an all-reduce per layer: the ceiling it can reach is the ideal
        # one times its efficiency over this interconnect (advisor.physics.parallel).
        tp_eff = whatif.tp_efficiency(ctx)
        ceiling = cur.decode_ceiling_batch_tok_s * tp_eff
        if not ceiling > 0.0:  # a degenerate device (bandwidth or TP efficiency underflows to 0)
            return None
        eff = decode / ceiling
        severity = damp(
            self.t("efficiency").severity_of(eff),
            matter_cap(ctx, self.common, DECODE_OBJECTIVES, self.t("decode_tok_s"), decode),
        )
        target = ceiling * self.p("healthy_efficiency")
        band = getattr(ctx.expectations, "decode_tok_s", None) if ctx.expectations is not None else None
        expected = getattr(band, "expected", None)
        if isinstance(expected, int | float) and expected > 0:
            target = float(expected)
        if target <= decode:
            return None
        gain = Gain("decode_tok_s", decode, target)
        if (bare := dropped(self, severity, gain)) is not None:
            return bare
        cause_text = "; ".join(text for text, _ in causes) if causes else "no cause is visible in the run's settings"
        fix = self._fix(ctx, causes)
        hidden = _hidden_tokens(ctx)
        if hidden is not None:
            cause_text += f"; the count may also miss hidden reasoning tokens ({hidden[0]})"
        return Finding(
            severity=severity,
            title=(
                f"Decode reaches only {eff:.0%} of the {fmt(ceiling, 'tok/s')} "
                + ("bandwidth ceiling " if tp_eff >= 1.0 else f"TP{cur.tensor_parallel} bandwidth ceiling ")
                + f"({fmt(decode, 'tok/s')}): {cause_text}"
            ),
            evidence=(
                Evidence(
                    "decode_tok_s",
                    decode,
                    f"≈ {fmt(target)} ({self.p('healthy_efficiency'):.0%}+ of the ceiling)",
                    "physics",
                ),
                Evidence(
                    "decode_ceiling_tok_s",
                    ceiling,
                    f"at batch {cur.concurrency}"
                    + (
                        ""
                        if tp_eff >= 1.0
                        else f", {tp_eff:.0%} of the ideal {fmt(cur.decode_ceiling_batch_tok_s)} after all-reduces "
                        f"over {whatif.tp_interconnect(ctx).kind}"
                    ),
                    "physics",
                ),
                *(Evidence(arg, value, expected_text, "run") for _, (arg, value, expected_text) in causes),
                *((hidden[1],) if hidden is not None and hidden[1] is not None else ()),
            ),
            fix=fix,
            expected_gain=gain,
            confidence=(0.7 if causes else 0.45) * (0.5 if hidden is not None else 1.0),
        )

    @staticmethod
    def _causes(ctx: RunContext) -> list[tuple[str, tuple[str, str | float | bool, str]]]:
        """(explanation, (setting, value, expected)) for each visible cause."""
        e = ctx.engine
        out: list[tuple[str, tuple[str, str | float | bool, str]]] = []
        if e.enforce_eager.value is True:
            out.append(
                (
                    "eager mode (no CUDA graphs) adds CPU overhead to every step",
                    (e.enforce_eager.arg or "enforce_eager", True, "false"),
                )
            )
        if e.cpu_offload_gb.value:
            out.append(
                (
                    f"{fmt(e.cpu_offload_gb.value)} GB of weights are read from CPU memory every step",
                    (e.cpu_offload_gb.arg or "cpu_offload_gb", e.cpu_offload_gb.value, "0"),
                )
            )
        layers = ctx.model.num_hidden_layers if ctx.model is not None else None
        ngl = e.n_gpu_layers.value
        # A negative -ngl (llama-bench's and llama-server's -1) asks for every layer, not none.
        if ngl is not None and ngl >= 0 and layers and ngl < layers:
            what = "the whole model runs on the CPU" if ngl == 0 else f"only {ngl} of {layers} layers are on the GPU"
            out.append((what, (e.n_gpu_layers.arg or "n_gpu_layers", float(ngl), f">= {layers}")))
        elif ctx.roofline is not None and ctx.roofline.fits_in_memory is False and not e.cpu_offload_gb.value:
            out.append(
                (
                    "the model does not fit in device memory, so part of it must be offloaded",
                    ("fits_in_memory", False, "true"),
                )
            )
        return out

    @staticmethod
    def _fix(ctx: RunContext, causes: list[tuple[str, tuple[str, str | float | bool, str]]]) -> dict[str, str]:
        names = {normalise_key(arg) for _, (arg, _v, _x) in causes}
        vllm, sglang, ollama, llamacpp = [], [], [], []
        if names & {"enforce_eager", "disable_cuda_graph"}:
            vllm.append("remove --enforce-eager (CUDA graphs cut per-step launch overhead)")
            sglang.append("remove --disable-cuda-graph")
        if "cpu_offload_gb" in names or "fits_in_memory" in names:
            vllm.append(
                "remove --cpu-offload-gb and fit the model with --tensor-parallel-size N or a quantized checkpoint"
            )
            sglang.append("fit the model on the GPUs with --tp-size N or a quantized checkpoint")
            ollama.append(
                "the model does not fit in VRAM so layers run on the CPU (see `ollama ps`): use a "
                "smaller quantization or a lower num_ctx"
            )
        if names & {"n_gpu_layers", "ngl", "gpu_layers", "num_gpu"}:
            llamacpp.append(
                "-ngl 999 to keep every layer on the GPU (check the build has the CUDA/Metal/ROCm/Vulkan backend)"
            )
            ollama.append(
                "let Ollama offload every layer (do not set num_gpu below the layer count; check "
                "`ollama ps` shows 100% GPU)"
            )
        generic = (
            "Check CUDA graphs are on, no weights are offloaded, the GPU backend is in use, no other "
            "process shares the GPU, "
            "and clocks are not power-capped (nvidia-smi -q -d CLOCK); compare with the previous "
            "engine version."
        )
        out = {"other": generic}
        for key, items in (("vllm", vllm), ("sglang", sglang), ("ollama", ollama), ("llamacpp", llamacpp)):
            if items:
                out[key] = "; ".join(items) + "."
        return out


#: Requested at least this many times the counted output: "requested ≫ counted".
_HIDDEN_RATIO = 2.0


def _hidden_tokens(ctx: RunContext) -> tuple[str, Evidence | None] | None:
    """Why the output count may leave out tokens the run timed: a known reasoning model, or far
    fewer tokens counted than requested. The reason, and the shortfall as evidence when known."""
    shortfall = output_shortfall(ctx, share=1.0 / _HIDDEN_RATIO)
    if shortfall is not None:
        requested, counted = shortfall
        evidence = Evidence("output_tokens_mean", counted, f"{fmt(requested)} requested", "run")
        return f"{fmt(requested)} output tokens requested, {counted:,.0f} counted", evidence
    if is_reasoning_model(ctx):
        model = ctx.model.id if ctx.model is not None else "the model"
        return f"{model} reasons before it answers", None
    return None
