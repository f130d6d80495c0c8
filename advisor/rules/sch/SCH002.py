from __future__ import annotations

from typing import ClassVar

from advisor.rules import fixes, whatif
from advisor.rules.base import Evidence, Finding, Gain, Rule
from advisor.rules.config import Spec, ThresholdSpec
from advisor.rules.context import RunContext
from advisor.rules.damping import sample_cap
from advisor.rules.helpers import fmt, latency_label, matter_cap
from advisor.rules.limits import TAIL_OBJECTIVES, TAIL_RATIO


class TailLatencyUnderBatching(Rule):
    """Under batching, the slowest tokens are many times slower than the typical one.

    ## Why is this bad?
    Batching raises total throughput almost linearly, because one weight read serves the whole
    batch, but it worsens the tails: every step is as slow as the biggest batch and the longest
    contexts in it, scheduling hiccups hit all streams at once, and users feel p99 inter-token
    latency as mid-sentence stalls. A p99/p50 ratio far above 1 means the stream is not smooth.

    ## Fix
    Cap the batch (vLLM ``--max-num-seqs``, SGLang ``--max-running-requests``, Ollama
    ``OLLAMA_NUM_PARALLEL``, llama.cpp ``-np``) and serve the remaining load from more replicas,
    trading some per-GPU throughput for smoother streams. If long prompts cause the stalls, SCH001
    (smaller prefill chunks) replaces this finding.

    ## Example
    64 streams of short chat on an L40S: TPOT p50 28 ms, p99 160 ms. The step is weight-dominated,
    so at 32 streams each step is only about a tenth shorter (p99 about 143 ms): a low finding.
    """

    id = "SCH002"
    name = "scheduling.tail_latency_under_batching"
    action = "reduce-max-num-seqs"
    thresholds: ClassVar[tuple[Spec, ...]] = (
        TAIL_RATIO,
        ThresholdSpec("p99_ms", ascending=True, unit="ms", doc="p99 that users feel as a stall (no ITL SLO)"),
    )

    def evaluate(self, ctx: RunContext) -> Finding | None:
        conc = ctx.measured.concurrency
        cur = ctx.roofline
        if conc is None or conc < 2 or cur is None or cur.concurrency < 2:
            return None
        picked = next(
            (
                (p, getattr(ctx.run.metrics, p))
                for p in ("itl_ms", "tpot_ms")
                if getattr(ctx.run.metrics, p).p99 and getattr(ctx.run.metrics, p).p50
            ),
            None,
        )
        if picked is None:
            return None
        path, dist = picked
        p50, p99 = float(dist.p50), float(dist.p99)  # type: ignore[arg-type]
        half = max(1, cur.concurrency // 2)
        new = whatif.reanalyse(ctx, concurrency=half)
        if new is None:
            return None
        step_ratio = new.itl_floor_ms / cur.itl_floor_ms
        throughput_ratio = new.decode_aggregate_ceiling_tok_s / cur.decode_aggregate_ceiling_tok_s
        to = max(p50 * step_ratio, p99 * step_ratio)
        severity = min(
            self.t("tail_ratio").severity_of(p99 / p50),
            matter_cap(ctx, self.common, TAIL_OBJECTIVES, self.t("p99_ms"), p99),
            sample_cap(self.common, ctx.measured.n_requests),
        )
        label = latency_label(path)
        return Finding(
            severity=severity,
            title=(
                f"{label} p99 is {p99 / p50:.1f}× the p50 ({fmt(p99, 'ms')} vs {fmt(p50, 'ms')}) with "
                f"{fmt(conc)} streams batched"
            ),
            evidence=(
                Evidence(
                    f"{path}.p99",
                    p99,
                    f"< {fmt(self.t('tail_ratio').low * p50)} ({self.t('tail_ratio').low:g}× p50)",
                    "run",
                ),
                Evidence(f"{path}.p50", p50, "", "run"),
                Evidence("concurrency", conc, f"{half} in the what-if", "run"),
            ),
            fix=fixes.merge(
                fixes.max_seqs(half),
                {
                    k: (f"(per-GPU decode throughput drops to about {throughput_ratio:.0%}; add replicas for the rest)")
                    for k in fixes.max_seqs(half)
                },
            ),
            expected_gain=Gain(f"{path}.p99", p99, to),
            # The step-time what-if is a lower bound: fewer streams also means fewer prefills
            # and less scheduling contention per step, which it does not model.
            confidence=0.35,
        )
