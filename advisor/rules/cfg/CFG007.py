from __future__ import annotations

from typing import ClassVar

from advisor.physics import kv_replication
from advisor.rules import runtimes
from advisor.rules.base import Evidence, Finding, Rule
from advisor.rules.config import Spec, ThresholdSpec
from advisor.rules.context import RunContext


class TensorParallelAboveKvHeads(Rule):
    """Tensor parallelism exceeds the model's KV-head count, so every rank stores copies of the KV.

    ## Why is this bad?
    Tensor parallelism shards attention by KV head. With more ranks than KV heads (a GQA model with
    8 KV heads at TP16, or an MLA model at any TP), vLLM and SGLang replicate each head on
    ``tp ÷ kv_heads`` ranks: the cache holds that many copies of every token, so the KV pool serves
    that many times fewer tokens than the memory suggests, and each rank reads the same KV.

    ## Fix
    Keep TP at or below the KV-head count and spread the rest another way: pipeline parallelism
    (vLLM ``--pipeline-parallel-size``), data-parallel replicas, or for MoE models expert
    parallelism (CFG008).

    ## Example
    Llama-3.1-70B (8 KV heads) at TP16: each token's KV is stored twice; TP8 × PP2 stores it once.
    """

    id = "CFG007"
    name = "config.tensor_parallel_above_kv_heads"
    action = "tune-runtime-parallelism"
    thresholds: ClassVar[tuple[Spec, ...]] = (
        ThresholdSpec("replication", ascending=True, unit="copies", doc="copies of each token's KV the group stores"),
    )

    def evaluate(self, ctx: RunContext) -> Finding | None:
        roof, model = ctx.roofline, ctx.model
        if roof is None or model is None or roof.tensor_parallel <= 1:
            return None
        if model.attention == "mla" or model.kv_lora_rank is not None:
            return None  # MLA has no heads to shard: replication is inherent, not a TP choice
        copies = kv_replication(model, roof.tensor_parallel)
        severity = self.t("replication").severity_of(float(copies))
        heads = model.num_key_value_heads or model.num_attention_heads
        if not severity or not heads:
            return None
        tp = roof.tensor_parallel
        pp = max(tp // heads, 1)
        return Finding(
            severity=severity,
            title=f"TP{tp} exceeds the model's {heads} KV heads: every token's KV is stored {copies} times",
            evidence=(
                Evidence("tensor_parallel", float(tp), f"<= {heads} (num_key_value_heads)", "run"),
                Evidence("kv_replication", float(copies), "1", "physics"),
            ),
            fix={
                "vllm": (
                    f"{runtimes.flag('vllm', '--tensor-parallel-size')} {heads} "
                    f"{runtimes.flag('vllm', '--pipeline-parallel-size')} {pp}."
                ),
                "sglang": (
                    f"{runtimes.flag('sglang', '--tp-size')} {heads} {runtimes.flag('sglang', '--dp-size')} {pp}."
                ),
                "other": f"Tensor-parallel over at most {heads} GPUs; use pipeline or data parallelism beyond that.",
            },
            confidence=0.7,
        )
