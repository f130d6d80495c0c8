from __future__ import annotations

from typing import ClassVar

from advisor.rules.base import Evidence, Finding, Rule
from advisor.rules.config import ParamSpec, Spec, ThresholdSpec
from advisor.rules.context import RunContext
from advisor.rules.helpers import fmt
from advisor.rules.knobs import knob_name
from advisor.rules.severity import Severity, damp

#: Runtimes that allocate every slot's full context up front (so an overflow is never hypothetical).
_UPFRONT = ("ollama", "llamacpp")


class ConfiguredContextExceedsPool(Rule):
    """The configured context length × concurrent sequences cannot fit the KV pool.

    ## Why is this bad?
    ``max_model_len × max_num_seqs`` is the KV the configuration allows in flight. vLLM and SGLang
    page the cache, so an oversized product only bites when requests actually grow long: then the
    pool fills, requests queue or are pre-empted. Ollama and llama.cpp allocate ``num_ctx ×
    OLLAMA_NUM_PARALLEL`` (``-c``, split among ``-np`` slots) up front: when it does not fit,
    layers are moved to the CPU and everything slows down. And a context longer than the whole
    pool cannot be served at all.

    ## Fix
    Make the product fit: lower the number of concurrent sequences (``--max-num-seqs``,
    ``OLLAMA_NUM_PARALLEL``, ``-np``) or, where the context is reserved up front or one request
    cannot fit, the context limit (``num_ctx``, ``-c``, ``--max-model-len``); or grow the pool
    (CAP001). The finding computes values that fit.

    ## Example
    Ollama with ``num_ctx`` 32768 and ``OLLAMA_NUM_PARALLEL=4`` for an 8B model on a 24 GB GPU:
    131,072 tokens of KV (16 GB in f16) next to 16 GB of weights does not fit, so layers spill to
    the CPU. ``num_ctx`` 8192 fits.
    """

    id = "CAP003"
    name = "capacity.configured_context_exceeds_pool"
    action = "reduce-max-num-seqs"
    actions: ClassVar[tuple[str, ...]] = ("reduce-context",)
    thresholds: ClassVar[tuple[Spec, ...]] = (
        ThresholdSpec(
            "overcommit",
            ascending=True,
            unit="ratio",
            doc="context limit × sequences in flight ÷ KV pool tokens",
        ),
        ParamSpec(
            "unused_context",
            unit="ratio",
            doc="context limit ÷ tokens actually used above which the fix is to lower the limit",
            minimum=1,
        ),
    )

    def evaluate(self, ctx: RunContext) -> Finding | None:
        cur = ctx.roofline
        e = ctx.engine
        if cur is None or not cur.kv_pool_tokens:
            return None
        # Only a limit the run states: defaults (the model's full window in vLLM) are often
        # overridden on the command line without the benchmark file knowing.
        ctx_len = e.context_length.value if e.context_length.explicit else None
        seqs = e.max_num_seqs.value
        if not ctx_len or not seqs:
            return None
        upfront = ctx.runtime in _UPFRONT
        offered = ctx.run.workload.concurrency
        in_flight = seqs if upfront or not offered else min(seqs, max(1, round(offered)))
        pool = cur.kv_pool_tokens
        ratio = ctx_len * in_flight / pool
        single_too_long = ctx_len > pool
        severity = self.t("overcommit").severity_of(ratio)
        m = ctx.run.metrics
        bit = bool(m.preemptions) or (m.kv_cache_usage_max or 0.0) >= 0.9 or bool(m.queue_waiting_mean)
        if single_too_long:
            severity = damp(severity, Severity.SEVERE)
        elif not upfront and not bit:
            severity = damp(severity, Severity.LOW)  # paged: the worst case did not happen in this run
        used = (
            (ctx.measured.prompt_tokens or 0.0)
            + (ctx.measured.output_tokens or 0.0)
            + (ctx.run.workload.kv_depth_tokens or 0.0)
        )
        fit_len = max(pool // in_flight, 1)
        fit_seqs = max(pool // ctx_len, 0)
        # Paged engines (vLLM, SGLang) do not reserve the context limit per sequence, so lowering it
        # only helps the up-front allocators, or when one full-length request cannot fit at all.
        unused = used > 0 and ctx_len / used >= self.p("unused_context")
        reduce_context = (upfront and unused) or single_too_long or fit_seqs < 1
        fix = self._fix(ctx, fit_len, fit_seqs, used, reduce_context)
        return Finding(
            severity=severity,
            title=(
                f"{fmt(float(ctx_len))} tokens of context × {in_flight} sequence{'s' if in_flight != 1 else ''} = "
                f"{fmt(float(ctx_len * in_flight))} tokens of KV, "
                f"{ratio:.1f}× the pool of {fmt(float(pool))}"
                + ("; one full-length request does not fit" if single_too_long else "")
            ),
            evidence=(
                Evidence(
                    knob_name("context_length", ctx.runtime, e.context_length),
                    e.context_length.describe(),
                    f"<= {fmt(float(fit_len))}",
                    "physics",
                ),
                Evidence(
                    knob_name("max_num_seqs", ctx.runtime, e.max_num_seqs),
                    e.max_num_seqs.describe(),
                    f"<= {max(fit_seqs, 1)}",
                    "physics",
                ),
                Evidence("kv_pool_tokens", float(pool), f">= {fmt(float(ctx_len * in_flight))}", "physics"),
            ),
            fix=fix,
            expected_gain=None,
            confidence=0.7 if upfront or single_too_long else 0.5,
            action="reduce-context" if reduce_context else "reduce-max-num-seqs",
        )

    @staticmethod
    def _fix(ctx: RunContext, fit_len: int, fit_seqs: int, used: float, reduce_context: bool) -> dict[str, str]:
        """Numbers computed for this run's runtime only; other runtimes get the principle."""
        need = f" (requests use about {fmt(used)})" if used else ""
        slots = ctx.engine.max_num_seqs.value or 1
        alt = fit_seqs >= 1
        paged = {
            "vllm": f"--max-num-seqs {fit_seqs} (or --max-model-len {fit_len} if requests never need more{need}).",
            "sglang": f"--max-running-requests {fit_seqs} (or --context-length {fit_len}{need}).",
        }
        texts = {
            "vllm": f"--max-model-len {fit_len}{need}" + (f", or --max-num-seqs {fit_seqs}." if alt else "."),
            "sglang": f"--context-length {fit_len}{need}"
            + (f", or --max-running-requests {fit_seqs}." if alt else "."),
            "tgi": f"--max-total-tokens {fit_len}{need}.",
            "trtllm": f"--max_seq_len {fit_len}{need}" + (f", or --max_batch_size {fit_seqs}." if alt else "."),
            "ollama": f'"num_ctx": {fit_len}{need} (or OLLAMA_CONTEXT_LENGTH)'
            + (f", or OLLAMA_NUM_PARALLEL={fit_seqs}." if alt else "."),
            "llamacpp": f"-c {fit_len * slots} with -np {slots} gives each slot {fit_len} tokens{need}.",
        }
        out = {
            "other": (
                f"Fit context × sequences in the KV pool: about {fit_len} tokens per sequence at this "
                "concurrency, or fewer sequences."
            )
        }
        if ctx.runtime in paged and not reduce_context:
            out[ctx.runtime] = paged[ctx.runtime]
        elif ctx.runtime in texts:
            out[ctx.runtime] = texts[ctx.runtime]
        return out
