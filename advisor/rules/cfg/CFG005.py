from __future__ import annotations

from typing import ClassVar

from advisor.rules import runtimes, whatif
from advisor.rules.base import Evidence, Finding, Rule
from advisor.rules.config import ParamSpec, Spec, ThresholdSpec
from advisor.rules.context import RunContext
from advisor.rules.helpers import fmt


class TensorParallelOverPcie(Rule):
    """Tensor parallelism over PCIe at low concurrency spends much of each token on all-reduces.

    ## Why is this bad?
    Tensor parallelism splits every layer across the GPUs and joins the halves with two
    all-reduces per layer. Without NVLink each all-reduce crosses the PCIe host bridge, whose
    latency (tens of µs, growing with the number of ranks) is paid 2 × layers times per decode
    step. At low concurrency the per-GPU weight read is short, so that latency is a large share of
    each token: the group keeps only part of the bandwidth it adds
    (``advisor/physics/parallel.py``).

    ## Fix
    Prefer fewer ranks: quantize so the model fits one or two GPUs, or split by layers instead
    (pipeline parallelism exchanges activations once per stage, vLLM ``--pipeline-parallel-size``),
    or serve on NVLink-connected GPUs. At high concurrency the cost is amortised and TP is fine.

    ## Example
    Llama-3.1-8B bf16 at TP4 on four PCIe A10G at concurrency 1: the ideal 4-GPU ceiling is ~149
    tok/s, but 64 all-reduces of ~28 µs add 1.8 ms to a 6.7 ms step: the group keeps ~79 %. At TP8
    on L4s it keeps ~67 %, and with AWQ weights (a 1.7 ms read) ~34 %.
    """

    id = "CFG005"
    name = "config.tensor_parallel_over_pcie"
    action = "tune-runtime-parallelism"
    thresholds: ClassVar[tuple[Spec, ...]] = (
        ThresholdSpec("tp_efficiency", ascending=False, unit="ratio", doc="share of the ideal TP decode ceiling kept"),
        ParamSpec("max_concurrency", unit="streams", doc="streams at or below which latency dominates", minimum=1),
    )

    def evaluate(self, ctx: RunContext) -> Finding | None:
        roof = ctx.roofline
        conc = ctx.measured.concurrency
        if roof is None or roof.tensor_parallel <= 1 or conc is None or conc > self.p("max_concurrency"):
            return None
        link = whatif.tp_interconnect(ctx)
        over_pcie = link.kind in ("pcie", "none") or (
            link.max_ranks is not None and roof.tensor_parallel > link.max_ranks
        )
        if not over_pcie:
            return None
        eff = whatif.tp_efficiency(ctx)
        severity = self.t("tp_efficiency").severity_of(eff)
        if not severity:
            return None
        tp = roof.tensor_parallel
        ideal = roof.decode_ceiling_batch_tok_s
        return Finding(
            severity=severity,
            title=(
                f"TP{tp} over PCIe at concurrency {fmt(conc)} keeps {eff:.0%} of the ideal "
                f"{fmt(ideal, 'tok/s')} ceiling: all-reduces take the rest"
            ),
            evidence=(
                Evidence("tensor_parallel", float(tp), "1-2 without NVLink at low concurrency", "run"),
                Evidence("interconnect", link.kind, "nvlink (capabilities.csv)", "physics"),
                Evidence("tp_efficiency", eff, f">= {self.t('tp_efficiency').low:.0%}", "physics"),
                Evidence("concurrency", conc, f"> {fmt(self.p('max_concurrency'))} amortises the all-reduces", "run"),
            ),
            fix={
                "vllm": (
                    f"{runtimes.flag('vllm', '--pipeline-parallel-size')} {tp} "
                    f"{runtimes.flag('vllm', '--tensor-parallel-size')} 1 (one exchange per stage, not two per "
                    "layer), or a quantized checkpoint that fits fewer GPUs."
                ),
                "sglang": f"{runtimes.flag('sglang', '--tp-size')} 1 with a quantized checkpoint that fits one GPU.",
                "tgi": f"{runtimes.flag('tgi', '--num-shard')} 1 with a quantized checkpoint that fits one GPU.",
                "trtllm": f"{runtimes.flag('trtllm', '--tp_size')} 1 with a quantized checkpoint that fits one GPU.",
                "other": (
                    "Use fewer tensor-parallel ranks (quantize to fit), pipeline parallelism, or NVLink-connected GPUs."
                ),
            },
            confidence=0.55,
        )
