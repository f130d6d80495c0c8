from __future__ import annotations

from typing import ClassVar

from advisor.rules import runtimes
from advisor.rules.base import Evidence, Finding, Rule
from advisor.rules.config import Spec, ThresholdSpec
from advisor.rules.context import RunContext
from advisor.rules.helpers import fmt

_RUNTIMES = ("vllm", "sglang", "trtllm")


class MoeWithoutExpertParallel(Rule):
    """A mixture-of-experts model is spread over several GPUs without expert parallelism.

    ## Why is this bad?
    Under plain tensor parallelism every expert's matrices are sliced across all ranks, so each
    expert a token visits costs small, inefficient matmuls on every GPU plus the layer's
    all-reduces. Expert parallelism places whole experts on ranks and sends each token to the ranks
    holding its experts (an all-to-all per MoE layer, ``advisor/physics/parallel.py``): the expert
    matmuls stay large and, as batches grow, the dispatch is cheaper than slicing every expert.

    ## Fix
    Turn expert parallelism on: vLLM ``--enable-expert-parallel`` (vLLM 0.8 and later), SGLang
    ``--ep-size N``, TensorRT-LLM ``--ep_size N``. Measure at your concurrency: at one or two
    streams the gain is small.

    ## Example
    Mixtral-8x7B at TP4 on H100s serving 64 streams without ``--enable-expert-parallel``.
    """

    id = "CFG008"
    name = "config.moe_without_expert_parallel"
    action = "tune-runtime-parallelism"
    thresholds: ClassVar[tuple[Spec, ...]] = (
        ThresholdSpec(
            "concurrency", ascending=True, unit="streams", doc="streams in flight (EP pays off as they grow)"
        ),
    )

    def evaluate(self, ctx: RunContext) -> Finding | None:
        roof, model = ctx.roofline, ctx.model
        conc = ctx.measured.concurrency
        if roof is None or model is None or not model.is_moe or ctx.runtime not in _RUNTIMES:
            return None
        if roof.tensor_parallel <= 1 or ctx.engine.expert_parallel.value is True or conc is None:
            return None
        severity = self.t("concurrency").severity_of(conc)
        if not severity:
            return None
        tp = roof.tensor_parallel
        note = runtimes.applies_note("vllm", "--enable-expert-parallel", ctx.run.setup.runtime_version)
        return Finding(
            severity=severity,
            title=(
                f"{model.id} (mixture of experts) runs at TP{tp} without expert parallelism at "
                f"{fmt(conc)} stream{'' if conc == 1 else 's'}"
            ),
            evidence=(
                Evidence(
                    "expert_parallel", ctx.engine.expert_parallel.describe(), "true for MoE over several GPUs", "run"
                ),
                Evidence("tensor_parallel", float(tp), "", "run"),
                Evidence("concurrency", conc, f">= {fmt(self.t('concurrency').moderate)} gains most", "run"),
            ),
            fix={
                "vllm": f"{runtimes.flag('vllm', '--enable-expert-parallel')}{note}",
                "sglang": f"{runtimes.flag('sglang', '--ep-size')} {tp}",
                "trtllm": f"{runtimes.flag('trtllm', '--ep_size')} {tp}",
                "other": "Enable expert parallelism so whole experts live on each GPU.",
            },
            confidence=0.5,
        )
