from __future__ import annotations

from typing import ClassVar

from advisor.rules import fixes, whatif
from advisor.rules.base import Evidence, Finding, Gain, Rule
from advisor.rules.config import Spec, ThresholdSpec
from advisor.rules.context import RunContext
from advisor.rules.helpers import fmt
from advisor.rules.knobs import knob_name


class ParallelismBelowConcurrency(Rule):
    """The runtime decodes fewer sequences at once than the load offers, with memory to spare.

    ## Why is this bad?
    Batching is nearly free for a bandwidth-bound decode: one weight read serves every sequence in
    the step. A runtime capped below the offered concurrency serialises requests instead: Ollama
    runs ``OLLAMA_NUM_PARALLEL`` (default 1) requests per model and queues the rest, llama.cpp
    serves ``-np`` slots, vLLM ``--max-num-seqs``. Throughput stays low and TTFT includes the wait,
    although the KV pool could hold more sequences.

    ## Fix
    Raise the limit towards the offered concurrency, as far as the KV pool allows (the finding
    computes it): ``OLLAMA_NUM_PARALLEL``, ``-np`` (with ``-c`` raised so each slot keeps its
    context), ``--max-num-seqs``, ``--max-running-requests``.

    ## Example
    Ollama with the default ``OLLAMA_NUM_PARALLEL=1`` serving 8 concurrent users of an 8B Q4_K_M
    model on an RTX 4090: one stream at a time at about 140 tok/s. With 8 slots aggregate decode
    rises about 7×.
    """

    id = "CFG001"
    name = "config.parallelism_below_concurrency"
    action = "tune-runtime-parallelism"
    supersedes: ClassVar[tuple[str, ...]] = ("PRE005",)
    thresholds: ClassVar[tuple[Spec, ...]] = (
        ThresholdSpec(
            "oversubscription",
            ascending=True,
            unit="ratio",
            doc="offered concurrency ÷ sequences the runtime decodes at once",
        ),
    )

    def evaluate(self, ctx: RunContext) -> Finding | None:
        knob = ctx.engine.max_num_seqs
        offered = ctx.run.workload.concurrency
        cur = ctx.roofline
        if not knob.value or not offered or offered <= knob.value:
            return None
        target = round(offered)
        if cur is not None and cur.max_concurrent_sequences is not None:
            target = min(target, cur.max_concurrent_sequences)
        if target <= knob.value:
            return None  # memory, not the setting, is the limit: CAP001/CAP003 speak to that
        ratio = offered / knob.value
        name = knob_name("max_num_seqs", ctx.runtime, knob)
        gain: Gain | None = None
        measured = ctx.run.metrics.output_throughput_tok_s
        if cur is not None and measured:
            bigger = whatif.reanalyse(ctx, concurrency=target)
            if bigger is not None:
                gain = Gain(
                    "output_throughput_tok_s",
                    measured,
                    measured * bigger.decode_aggregate_ceiling_tok_s / cur.decode_aggregate_ceiling_tok_s,
                )
        return Finding(
            severity=self.t("oversubscription").severity_of(ratio),
            title=(
                f"The runtime decodes {knob.value} sequence{'s' if knob.value != 1 else ''} at once ({name}"
                f"{'' if knob.explicit else ', default'}) while {fmt(offered)} are offered"
                + (
                    f"; the KV pool has room for {cur.max_concurrent_sequences}"
                    if cur is not None and cur.max_concurrent_sequences
                    else ""
                )
            ),
            evidence=(
                Evidence(name, knob.describe(), f">= {target}", "physics"),
                Evidence("workload.concurrency", offered, f"<= {knob.value}", "run"),
                *(
                    (Evidence("max_concurrent_sequences", float(cur.max_concurrent_sequences), "", "physics"),)
                    if cur and cur.max_concurrent_sequences
                    else ()
                ),
            ),
            fix=fixes.max_seqs(target),
            expected_gain=gain,
            confidence=0.75,
        )
