from __future__ import annotations

from typing import ClassVar

from advisor.rules import runtimes, whatif
from advisor.rules.base import Evidence, Finding, Gain, Rule
from advisor.rules.config import Spec, ThresholdSpec
from advisor.rules.context import RunContext
from advisor.rules.helpers import fmt


class TensorParallelOnAModelThatFits(Rule):
    """Tensor parallelism splits a model that fits one GPU: replicas would serve more.

    ## Why is this bad?
    When the weights and the KV cache for the offered load fit one GPU, splitting the model over
    several adds all-reduces (two per layer per step) to every token. At a light, bandwidth-bound
    load TP still wins on latency (each step reads the weights N times faster). But once the group
    is saturated (decode compute-bound, or requests queueing) throughput is what counts, and N
    independent replicas, each running its own full batch with no communication, serve about
    ``1 / tp_efficiency`` times more.

    ## Fix
    Serve one replica per GPU behind a load balancer: vLLM ``--tensor-parallel-size 1
    --data-parallel-size N``, SGLang ``--tp-size 1 --dp-size N``, or N separate servers. Keep TP
    when single-stream latency matters more than throughput.

    ## Example
    Llama-3.1-8B bf16 at TP2 on two PCIe L40S with 256 streams and requests queueing: TP1 fits
    (48 GiB each), and two replicas would serve about 1.6× the group's throughput.
    """

    id = "CFG006"
    name = "config.tensor_parallel_on_a_model_that_fits"
    action = "tune-runtime-parallelism"
    thresholds: ClassVar[tuple[Spec, ...]] = (
        ThresholdSpec("replica_gain", ascending=True, unit="ratio", doc="replicas' aggregate decode ÷ the TP group's"),
    )

    def evaluate(self, ctx: RunContext) -> Finding | None:
        roof = ctx.roofline
        conc = ctx.measured.concurrency
        if roof is None or roof.tensor_parallel <= 1 or conc is None or ctx.hardware is None:
            return None
        tp = roof.tensor_parallel
        per_replica = max(round(conc / tp), 1)
        queued = (ctx.run.metrics.queue_waiting_mean or 0.0) > 0
        if roof.decode_bound != "compute" and not queued:
            return None  # unsaturated and bandwidth-bound: TP's lower latency is worth its all-reduces
        single = whatif.reanalyse(ctx, tensor_parallel=1, concurrency=per_replica)
        if single is None or single.fits_in_memory is not True:
            return None
        if single.max_concurrent_sequences is not None and single.max_concurrent_sequences < per_replica:
            return None  # one GPU could not hold its share of the streams
        eff = whatif.tp_efficiency(ctx)
        # Saturated, each replica runs a full batch: the group's work at 100 % instead of eff.
        ratio = 1.0 / eff
        group = roof.decode_aggregate_ceiling_tok_s * eff
        replicas = roof.decode_aggregate_ceiling_tok_s
        severity = self.t("replica_gain").severity_of(ratio)
        if not severity:
            return None
        measured = ctx.run.metrics.output_throughput_tok_s
        gain = Gain("output_throughput_tok_s", measured, measured * ratio) if measured else None
        return Finding(
            severity=severity,
            title=(
                f"The model fits one GPU, yet runs at TP{tp}: {tp} replicas would decode about {ratio:.1f}× "
                "the group's throughput"
            ),
            evidence=(
                Evidence("tensor_parallel", float(tp), "1 (the model and its KV fit one GPU)", "run"),
                Evidence("weight_gb", roof.weight_bytes / 1e9, f"fits {fmt(ctx.hardware.memory_gb)} GB", "physics"),
                Evidence(
                    "aggregate_decode_ceiling_tok_s",
                    group,
                    f"≈ {fmt(replicas)} as {tp} saturated replicas (TP keeps {eff:.0%})",
                    "physics",
                ),
            ),
            fix=runtimes.annotate_fix(
                {
                    "vllm": (
                        f"{runtimes.flag('vllm', '--tensor-parallel-size')} 1 "
                        f"{runtimes.flag('vllm', '--data-parallel-size')} {tp} (or {tp} servers behind a balancer)."
                    ),
                    "sglang": f"{runtimes.flag('sglang', '--tp-size')} 1 {runtimes.flag('sglang', '--dp-size')} {tp}.",
                    "tgi": f"{runtimes.flag('tgi', '--num-shard')} 1 on each GPU, {tp} replicas behind a balancer.",
                    "trtllm": f"{runtimes.flag('trtllm', '--tp_size')} 1 on each GPU, {tp} instances.",
                    "other": f"Run {tp} single-GPU replicas instead of one TP{tp} group.",
                },
                ctx.runtime,
                ctx.run.setup.runtime_version,
            ),
            expected_gain=gain,
            confidence=0.55,
        )
