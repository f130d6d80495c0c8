from __future__ import annotations

from typing import ClassVar

from advisor.rules.base import Evidence, Finding, Rule
from advisor.rules.config import ParamSpec, Spec, ThresholdSpec
from advisor.rules.context import RunContext
from advisor.rules.helpers import annotate_fix, fmt
from advisor.rules.knobs import knob_name
from advisor.rules.severity import Severity, damp

#: Runtimes that allocate every slot's full context up front (so an overflow is never hypothetical).
_UPFRONT = ("ollama", "llamacpp")


class ConfiguredContextExceedsPool(Rule):
    """The configured context length × concurrent sequences cannot fit the KV pool.

    ## Why is this bad?
    ``max_model_len × max_num_seqs`` is the KV the configuration allows in flight. vLLM, SGLang,
    TGI and TensorRT-LLM page the cache and are meant to over-commit it: the product only bites
    when requests actually grow long, and then the pool fills and requests queue or are pre-empted.
    So on a paged engine this rule speaks only when the run shows that pressure. A vLLM that started
    already has ``max_model_len ≤ pool`` (it refuses to start otherwise), so a vLLM run whose limit
    exceeds the estimated pool says the estimate is off, not the run. Ollama and llama.cpp allocate
    ``num_ctx × OLLAMA_NUM_PARALLEL`` (``-c``, split among ``-np`` slots, or shared by them with a
    unified KV cache) up front: when it does not fit, layers are moved to the CPU and everything
    slows down.

    ## Fix
    Make the product fit: lower the number of concurrent sequences (``--max-num-seqs``,
    ``OLLAMA_NUM_PARALLEL``, ``-np``) to what the pool holds at the context requests really use;
    on a paged engine the context limit only has to stay within the pool (``--max-model-len ≤
    pool``). Where the context is reserved up front, lower it (``num_ctx``, ``-c``). Or grow the pool
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
        # llama.cpp's unified KV cache (-np auto, --kv-unified) is one -c shared by the slots.
        unified = ctx.runtime == "llamacpp" and bool(e.kv_unified.value)
        offered = ctx.run.workload.concurrency
        in_flight = seqs if upfront or not offered else min(seqs, max(1, round(offered)))
        pool = cur.kv_pool_tokens
        allocated = ctx_len if unified else ctx_len * in_flight
        ratio = allocated / pool
        single_too_long = ctx_len > pool
        severity = self.t("overcommit").severity_of(ratio)
        m = ctx.run.metrics
        bit = bool(m.preemptions) or (m.kv_cache_usage_max or 0.0) >= 0.9 or bool(m.queue_waiting_mean)
        if not upfront and not bit:
            return None  # paged engines over-commit by design; the worst case did not happen here
        if single_too_long and ctx.runtime == "vllm":
            return None  # vLLM refuses to start when max_model_len exceeds its pool: our estimate is off
        if single_too_long:
            severity = damp(severity, Severity.SEVERE)
        used = (
            (ctx.measured.prompt_tokens or 0.0)
            + (ctx.measured.output_tokens or 0.0)
            + (ctx.run.workload.kv_depth_tokens or 0.0)
        )
        # Up-front allocators reserve the limit for every slot; paged engines only need the
        # context requests really use per sequence, and their limit only has to fit the pool.
        fit_len = pool if unified or not upfront else max(pool // in_flight, 1)
        # Under one token a sequence (a denormal mean) says nothing of how many fit.
        fit_seqs = max(pool // ctx_len, 0) if upfront or used < 1 else max(int(pool // used), 0)
        # Paged engines (vLLM, SGLang) do not reserve the context limit per sequence, so lowering it
        # only helps the up-front allocators, or when one full-length request cannot fit at all.
        if not upfront and used > 0:
            # Paged: what the requests really hold, not the limit, is what fills the pool.
            demand = used * in_flight / pool
            if demand < 1.0:
                return None  # the pool holds this load; its pressure comes from elsewhere (CAP001/PRE005)
            severity = self.t("overcommit").severity_of(demand)
        unused = used > 0 and ctx_len / used >= self.p("unused_context")
        reduce_context = (upfront and unused) or single_too_long or fit_seqs < 1
        fix = self._fix(ctx, fit_len, fit_seqs, used, reduce_context)
        return Finding(
            severity=severity,
            title=(
                (
                    f"{fmt(float(ctx_len))} tokens of unified KV cache shared by {in_flight} slots, "
                    if unified
                    else f"{fmt(float(ctx_len))} tokens of context × {in_flight} "
                    f"sequence{'s' if in_flight != 1 else ''} = {fmt(float(allocated))} tokens of KV, "
                )
                + f"{ratio:.1f}× the pool of {fmt(float(pool))}"
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
                Evidence("kv_pool_tokens", float(pool), f">= {fmt(float(allocated))}", "physics"),
            ),
            fix=annotate_fix(fix, ctx.runtime, ctx.run.setup.runtime_version),
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
            "vllm": f"--max-num-seqs {fit_seqs}{need}; --max-model-len only has to stay within the pool "
            f"(<= {fit_len}).",
            "sglang": f"--max-running-requests {fit_seqs}{need}; --context-length only has to stay within the pool "
            f"(<= {fit_len}).",
        }
        texts = {
            "vllm": f"--max-model-len {fit_len}{need}" + (f", or --max-num-seqs {fit_seqs}." if alt else "."),
            "sglang": f"--context-length {fit_len}{need}"
            + (f", or --max-running-requests {fit_seqs}." if alt else "."),
            "tgi": f"--max-total-tokens {fit_len}{need}.",
            "trtllm": f"--max_seq_len {fit_len}{need}" + (f", or --max_batch_size {fit_seqs}." if alt else "."),
            "ollama": f'"num_ctx": {fit_len}{need} (or OLLAMA_CONTEXT_LENGTH)'
            + (f", or OLLAMA_NUM_PARALLEL={fit_seqs}." if alt else "."),
            "llamacpp": (
                f"-c {fit_len}{need}: the slots share one unified KV cache (-np auto or --kv-unified)."
                if ctx.engine.kv_unified.value
                else f"-c {fit_len * slots} with -np {slots} gives each slot {fit_len} tokens{need}."
            ),
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
