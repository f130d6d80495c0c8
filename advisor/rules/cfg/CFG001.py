from __future__ import annotations

from typing import ClassVar

from advisor.catalog.capabilities import capability
from advisor.rules import fixes, runtimes, whatif
from advisor.rules.base import Evidence, Finding, Gain, Rule
from advisor.rules.config import ParamSpec, Spec, ThresholdSpec
from advisor.rules.context import RunContext
from advisor.rules.helpers import fmt
from advisor.rules.knobs import knob_name, normalise_key

#: A compute-bound batch serves no more when it grows: the queue needs another replica.
_REPLICAS = {
    "vllm": "Add a replica: --data-parallel-size 2, or a second server behind a load balancer.",
    "sglang": "Add a replica: --dp-size 2, or a second server behind a load balancer.",
    "other": "Add a replica behind a load balancer: the batch is compute-bound, a larger one serves no more.",
}


def _seqs_fix(ctx: RunContext, n: int) -> dict[str, str]:
    """:func:`fixes.max_seqs` with TGI's text fitted to where the cap comes from.

    TGI's router caps every batch at ``--max-batch-size`` when it is given, on CUDA too
    (backends/v3/src/queue.rs, ``if Some(batch_requests.len()) == max_size { break; }``), so a cap
    set by it is raised by it; on Gaudi it is *the* decode batch size (docs/source/backends/gaudi.mdx,
    "set --max-batch-size as bs, where bs is your expected maximum decode batch size")."""
    fix = fixes.max_seqs(n, ctx.run.setup.runtime_version)
    if ctx.runtime != "tgi":
        return fix
    knob = ctx.engine.max_num_seqs
    cap = capability(ctx.hardware.id if ctx.hardware is not None else None)
    gaudi = cap is not None and cap.generation.startswith("gaudi")  # capabilities.csv: gaudi2, gaudi3
    by_batch_size = knob.explicit and knob.arg is not None and normalise_key(knob.arg) == "max_batch_size"
    batch_size = runtimes.flag("tgi", "--max-batch-size")
    concurrent = runtimes.flag("tgi", "--max-concurrent-requests")
    if gaudi:
        fix["tgi"] = (
            f"{batch_size} {n} (on Gaudi the decode batch is padded to it) with "
            f"{runtimes.flag('tgi', '--max-batch-prefill-tokens')} sized for the prefill batch and {concurrent} "
            f"of at least {n}."
        )
    elif by_batch_size:
        fix["tgi"] = (
            f"{batch_size} {n} (the router stops every batch at it) and {concurrent} of at least {n}; "
            f"or drop {batch_size} and let the KV pool bound the batch."
        )
    return fix


class ParallelismBelowConcurrency(Rule):
    """The runtime decodes fewer sequences at once than the load offers, with memory to spare.

    ## Why is this bad?
    Batching is nearly free for a bandwidth-bound decode: one weight read serves every sequence in
    the step. A runtime capped below the offered concurrency serialises requests instead: Ollama
    runs ``OLLAMA_NUM_PARALLEL`` (default 1) requests per model and queues the rest, llama.cpp
    serves ``-np`` slots, vLLM ``--max-num-seqs``. Throughput stays low and TTFT includes the wait,
    although the KV pool could hold more sequences.

    A server scrape shows the same from the inside: requests waiting (vLLM
    ``num_requests_waiting``, ``num_requests_waiting_by_reason{reason="capacity"}``, SGLang's queue)
    while the running count sits at the cap (the configured value, the version's default, or for
    vLLM with neither known the running count itself) and the KV cache is less than
    ``kv_headroom`` full. The sequence cap binds, not memory; with the KV cache full it is CAP001's.

    ## Fix
    Raise the limit towards the offered concurrency, as far as the KV pool allows (the finding
    computes it): ``OLLAMA_NUM_PARALLEL``, ``-np`` (with ``-c`` raised so each slot keeps its
    context), ``--max-num-seqs``, ``--max-running-requests``, TGI ``--max-concurrent-requests``.
    For a queue at the cap, raise it to running plus waiting (as far as the KV pool allows); if the
    GPU is already compute-bound, a larger batch will not serve more, so add capacity instead.

    ## Example
    Ollama with the default ``OLLAMA_NUM_PARALLEL=1`` serving 8 concurrent users of an 8B Q4_K_M
    model on an RTX 4090: one stream at a time at about 140 tok/s. With 8 slots aggregate decode
    rises about 7×.
    """

    id = "CFG001"
    name = "config.parallelism_below_concurrency"
    action = "tune-runtime-parallelism"
    actions: ClassVar[tuple[str, ...]] = ("add-capacity",)
    supersedes: ClassVar[tuple[str, ...]] = ("PRE005",)
    thresholds: ClassVar[tuple[Spec, ...]] = (
        ThresholdSpec(
            "oversubscription",
            ascending=True,
            unit="ratio",
            doc="offered concurrency ÷ sequences the runtime decodes at once",
        ),
        ParamSpec(
            "kv_headroom",
            unit="fraction",
            doc="KV-cache use below which requests waiting at the sequence cap mean the cap binds, not memory",
            minimum=0.0,
            maximum=1.0,
        ),
    )

    def evaluate(self, ctx: RunContext) -> Finding | None:
        knob = ctx.engine.max_num_seqs
        offered = ctx.run.workload.concurrency
        cur = ctx.roofline
        if not knob.value or not offered or offered <= knob.value:
            return self._cap_binds_with_a_queue(ctx)
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
            fix=_seqs_fix(ctx, target),
            expected_gain=gain,
            confidence=0.75,
        )

    def _cap_binds_with_a_queue(self, ctx: RunContext) -> Finding | None:
        """Requests wait while the running count sits at the sequence cap and the KV cache is far
        from full (a server scrape: vLLM ``num_requests_waiting``/``_by_reason``, SGLang's queue)."""
        m = ctx.run.metrics
        waiting, running, kv = m.queue_waiting_mean, m.running_max, m.kv_cache_usage_mean
        if not waiting or waiting <= 0 or not running or kv is None or kv >= self.p("kv_headroom"):
            return None  # no queue, or memory is the limit (CAP001)
        knob = ctx.engine.max_num_seqs
        if knob.value:
            cap, cap_source = knob.value, knob.describe()
            cap_label = f"{knob_name('max_num_seqs', ctx.runtime, knob)} {cap}{'' if knob.explicit else ', default'}"
        elif ctx.runtime == "vllm":
            # No configured or versioned default: a vLLM scheduler that leaves requests waiting with
            # free KV blocks is held by max_num_seqs, so the running count is the cap in force.
            cap, cap_source = round(running), f"{running:g} (the running count: cap not given)"
            cap_label = f"{knob_name('max_num_seqs', ctx.runtime, knob)} {cap}, read from the running count"
        else:
            return None
        if running < cap:
            return None  # below the cap: something else holds the queue
        target = round(running + waiting)
        cur = ctx.roofline
        if cur is not None and cur.max_concurrent_sequences is not None:
            target = min(target, cur.max_concurrent_sequences)
        if target <= cap:
            return None
        name = knob_name("max_num_seqs", ctx.runtime, knob)
        ratio = (running + waiting) / cap
        at_cap = whatif.reanalyse(ctx, concurrency=round(running)) if cur is not None else None
        compute_bound = at_cap is not None and at_cap.decode_bound == "compute"
        return Finding(
            severity=self.t("oversubscription").severity_of(ratio),
            title=(
                f"{fmt(running)} requests run at the sequence cap ({cap_label}) while {fmt(waiting)} wait "
                f"and the KV cache is {kv:.0%} full: the cap binds, not memory"
                + ("; decode is already compute-bound, so add capacity" if compute_bound else "")
            ),
            evidence=(
                Evidence(name, cap_source, f">= {target}", "physics"),
                Evidence("running_max", running, f"< {cap}", "run"),
                Evidence("queue_waiting_mean", waiting, "0", "run"),
                Evidence("kv_cache_usage_mean", kv, f"< {self.p('kv_headroom'):g} (memory is not the limit)", "run"),
            ),
            fix=(
                runtimes.annotate_fix(_REPLICAS, ctx.runtime, ctx.run.setup.runtime_version)
                if compute_bound
                else _seqs_fix(ctx, target)
            ),
            action="add-capacity" if compute_bound else None,
            confidence=0.7,
        )
