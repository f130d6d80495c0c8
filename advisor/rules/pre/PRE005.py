from __future__ import annotations

from typing import ClassVar

from advisor.rules.base import Evidence, Finding, Gain, Rule
from advisor.rules.config import Spec, ThresholdSpec
from advisor.rules.context import RunContext
from advisor.rules.helpers import fmt, matter_cap, ttft_typical, workload_advice_applies
from advisor.rules.limits import TTFT_MS, TTFT_OBJECTIVES
from advisor.rules.severity import damp


class QueueBeforeModel(Rule):
    """Requests wait in the server's queue before the model sees them.

    ## Why is this bad?
    ``num_requests_waiting > 0`` means requests arrive faster than the engine admits them. Their
    TTFT then includes the wait, which has nothing to do with the model, the prompt or the
    hardware's speed: it is a capacity problem. Tuning prefill does not help; checking the queue
    before blaming the model does.

    ## Fix
    Add capacity: another replica behind the load balancer, tensor parallelism across more GPUs,
    or (when the KV pool has room and the running batch sits at its cap) a larger batch (CFG001).
    When the KV pool is what is full, CAP001 replaces this finding with the memory fix.

    ## Example
    vLLM at 12 req/s: ``vllm:num_requests_waiting`` averages 6, throughput is 5 req/s, so each
    request waits about 1.2 s; TTFT p50 is 1.4 s of which prefill is 0.2 s.
    """

    id = "PRE005"
    name = "prefill.queue_before_model"
    action = "add-capacity"
    thresholds: ClassVar[tuple[Spec, ...]] = (
        ThresholdSpec(
            "waiting",
            ascending=True,
            unit="requests",
            doc="mean requests waiting (vllm:num_requests_waiting)",
        ),
        ThresholdSpec("queue_share", ascending=True, unit="ratio", doc="queue time ÷ TTFT"),
        TTFT_MS,
    )

    def evaluate(self, ctx: RunContext) -> Finding | None:
        if not workload_advice_applies(ctx):
            return None  # an engine microbenchmark has no request queue
        m = ctx.run.metrics
        waiting = (
            m.queue_waiting_mean
            if m.queue_waiting_mean is not None
            else (m.queue_waiting_max / 2.0 if m.queue_waiting_max else None)
        )
        queue_ms = m.queue_ms.p50 or m.queue_ms.mean
        ttft = ttft_typical(ctx)
        if ttft is None or (not waiting and not queue_ms):
            return None
        ttft_value, ttft_path = ttft
        if not queue_ms and waiting and m.request_throughput_rps:
            # Little's law: time in queue = requests waiting ÷ the rate they leave it.
            queue_ms = waiting / m.request_throughput_rps * 1000.0
        share = min(queue_ms / ttft_value, 1.0) if queue_ms else None
        severity = damp(
            max(self.t("waiting").severity_of(waiting), self.t("queue_share").severity_of(share)),
            matter_cap(ctx, self.common, TTFT_OBJECTIVES, self.t("ttft_ms"), ttft_value),
        )
        evidence = []
        if waiting is not None:
            evidence.append(Evidence("queue_waiting_mean", waiting, "0", "run"))
        if queue_ms:
            evidence.append(Evidence("queue_ms.p50", queue_ms, f"< {fmt(0.1 * ttft_value)} (10% of TTFT)", "run"))
        evidence.append(
            Evidence(
                ttft_path,
                ttft_value,
                f"≈ {fmt(ttft_value - queue_ms)} without the queue" if queue_ms else "lower without a queue",
                "run",
            )
        )
        gain = Gain(ttft_path, ttft_value, max(ttft_value - queue_ms, ttft_value * 0.05)) if queue_ms else None
        what = (
            f"{fmt(queue_ms, 'ms')} of the {fmt(ttft_value, 'ms')} TTFT is queueing"
            if queue_ms
            else f"{fmt(waiting)} requests wait on average"
        )
        return Finding(
            severity=severity,
            title=f"Requests queue before the model: {what}; this is a capacity problem, not a model one",
            evidence=tuple(evidence),
            fix={
                "vllm": (
                    "Add a replica behind the load balancer (or --tensor-parallel-size over more GPUs); if "
                    "KV usage is low and running = --max-num-seqs, raise --max-num-seqs."
                ),
                "sglang": (
                    "Add a replica or --dp-size 2 (data parallel); if token usage is low, raise --max-running-requests."
                ),
                "tgi": ("Add a replica behind the load balancer (--max-concurrent-requests only bounds the queue)."),
                "trtllm": "Add a replica, or raise --max_batch_size if the KV cache has room.",
                "ollama": (
                    "Raise OLLAMA_NUM_PARALLEL (requests beyond it queue, up to OLLAMA_MAX_QUEUE) or run "
                    "another instance."
                ),
                "llamacpp": (
                    "Raise -np (server slots; extra requests are deferred) together with -c, or run another instance."
                ),
                "other": (
                    "Add serving capacity (replicas or GPUs) or raise the engine's concurrent-request "
                    "limit if memory allows."
                ),
            },
            expected_gain=gain,
            confidence=0.75 if queue_ms else 0.55,
        )
