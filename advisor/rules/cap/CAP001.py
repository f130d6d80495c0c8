from __future__ import annotations

from typing import ClassVar

from advisor.catalog.capabilities import capability, support
from advisor.physics import Roofline
from advisor.rules import fixes, whatif
from advisor.rules.base import Evidence, Finding, Gain, Rule
from advisor.rules.config import ParamSpec, Spec, ThresholdSpec
from advisor.rules.context import RunContext
from advisor.rules.helpers import annotate_fix, dropped, fmt
from advisor.rules.limits import FRACTION_TARGET
from advisor.rules.severity import Severity, damp

_FRACTION_RUNTIMES = ("vllm", "sglang", "trtllm")

#: The rest of the ladder, after the lever the finding picked (DESIGN §5: memory fraction, 8-bit KV,
#: a shorter context where it is reserved up front, more GPUs), each lever tagged by what it is so
#: the one already proposed, or one that does not apply, is left out.
_OTHER_LEVERS: dict[str, tuple[tuple[str, str], ...]] = {
    "vllm": (("kv", "--kv-cache-dtype fp8"), ("capacity", "--tensor-parallel-size 2 or a replica")),
    "sglang": (("kv", "--kv-cache-dtype fp8_e5m2"), ("capacity", "--tp-size 2 or --dp-size 2")),
    "tgi": (
        ("kv", "--kv-cache-dtype fp8_e5m2"),
        ("context", "a lower --max-total-tokens"),
        ("capacity", "--num-shard 2"),
    ),
    "trtllm": (("kv", "kv_cache_config dtype fp8"), ("capacity", "--tp_size 2")),
    "ollama": (
        ("context", "a lower num_ctx (reserved per slot)"),
        ("kv", "OLLAMA_KV_CACHE_TYPE=q8_0"),
        ("capacity", "a second GPU or instance"),
    ),
    "llamacpp": (
        ("context", "a lower -c (reserved up front)"),
        ("kv", "-ctk q8_0 -ctv q8_0 with -fa on"),
        ("capacity", "another GPU"),
    ),
    "other": (
        ("kv", "an 8-bit KV cache"),
        ("context", "a shorter context where it is reserved up front"),
        ("capacity", "more GPUs or replicas"),
    ),
}


class KvPoolSaturated(Rule):
    """The KV-cache pool is full and requests wait for room.

    ## Why is this bad?
    The KV pool is sized once at start-up (vLLM: ``--gpu-memory-utilization`` × memory − weights).
    Every running sequence holds its context there. When it is full, new requests wait even though
    the GPU could batch more of them (batching is nearly free for a bandwidth-bound decode), or
    running ones are pre-empted and recomputed, which users see as stalls.

    ## Fix
    Make the pool hold more tokens, cheapest first: let the engine use more memory
    (``--gpu-memory-utilization 0.95``), store KV in 8 bits (``--kv-cache-dtype fp8``, Ollama
    ``OLLAMA_KV_CACHE_TYPE=q8_0``), or add GPUs (tensor parallelism multiplies the pool) or
    replicas. The finding picks the first that applies and predicts the new pool size. TensorRT-LLM
    runs no FP8 on Ampere or Turing, so there the 8-bit cache is skipped for more GPUs or replicas.

    ## Example
    Llama-3.1-8B bf16 on an A10G (24 GiB) at ``--gpu-memory-utilization 0.8``: the pool holds about
    18,000 tokens, KV usage averages 0.97 with 5 requests waiting. At 0.95 it holds about 48,000.
    """

    id = "CAP001"
    name = "capacity.kv_pool_saturated"
    action = "raise-gpu-memory-utilization"
    actions: ClassVar[tuple[str, ...]] = ("quantize-kv-cache", "add-capacity")
    supersedes: ClassVar[tuple[str, ...]] = ("PRE005",)
    thresholds: ClassVar[tuple[Spec, ...]] = (
        ThresholdSpec("usage", ascending=True, unit="ratio", doc="KV-cache usage (mean, else max)"),
        ParamSpec(
            "fraction_below",
            unit="ratio",
            doc="a memory fraction below this is raised first",
            minimum=0.1,
            maximum=1,
        ),
        FRACTION_TARGET,
    )

    def evaluate(self, ctx: RunContext) -> Finding | None:
        m = ctx.run.metrics
        usage = m.kv_cache_usage_mean if m.kv_cache_usage_mean is not None else m.kv_cache_usage_max
        if usage is None:
            return None
        waiting = m.queue_waiting_mean or m.queue_waiting_max
        pressure: Severity | None
        if waiting or m.preemptions:
            pressure = None
        elif m.queue_waiting_mean is not None or m.queue_waiting_max is not None:
            pressure = Severity.LOW  # full but nobody waits: the pool is merely well used
        else:
            pressure = Severity.MODERATE
        severity = damp(self.t("usage").severity_of(usage), pressure)
        if severity is Severity.NONE and (bare := dropped(self, severity)) is not None:
            return bare  # no gain lifts it above none: the what-ifs are not needed to drop it
        action, fix, new, what = self._plan(ctx)
        cur = ctx.roofline
        gain: Gain | None = None
        pool_ratio: float | None = None
        if cur is not None and new is not None and cur.kv_pool_tokens and new.kv_pool_tokens:
            pool_ratio = new.kv_pool_tokens / cur.kv_pool_tokens
            gain = self._throughput_gain(ctx, cur, pool_ratio) or Gain(
                "kv_pool_tokens", float(cur.kv_pool_tokens), float(new.kv_pool_tokens)
            )
        if (bare := dropped(self, severity, gain)) is not None:
            return bare
        # Leave out the lever already proposed, an 8-bit KV cache that is already 8-bit (or that
        # TensorRT-LLM cannot run on this GPU), and more GPUs when that is the proposal.
        skip = {"quantize-kv-cache": "kv", "add-capacity": "capacity"}.get(action)
        kv_done = ctx.engine.kv_cache_16bit is False or _trtllm_without_fp8(ctx)
        levers = {
            k: "; ".join(text for kind, text in v if kind != skip and not (kind == "kv" and kv_done))
            for k, v in _OTHER_LEVERS.items()
        }
        fix = {k: f"{t.rstrip('.')}. Other levers: {levers[k]}." if levers.get(k) else t for k, t in fix.items()}
        evidence = [
            Evidence(
                "kv_cache_usage_mean" if m.kv_cache_usage_mean is not None else "kv_cache_usage_max",
                usage,
                f"< {self.t('usage').low:g}",
                "run",
            )
        ]
        if waiting:
            evidence.append(Evidence("queue_waiting_mean", waiting, "0", "run"))
        if m.preemptions:
            evidence.append(Evidence("preemptions", m.preemptions, "0", "run"))
        if cur is not None and cur.kv_pool_tokens:
            evidence.append(
                Evidence(
                    "kv_pool_tokens",
                    float(cur.kv_pool_tokens),
                    f"≈ {fmt(new.kv_pool_tokens) if new and new.kv_pool_tokens else '?'} with {what}",
                    "physics",
                )
            )
        wait_text = f", {fmt(waiting)} requests waiting" if waiting else ""
        grow = f"; {what} grows it {pool_ratio:.1f}×" if pool_ratio else f"; try {what}"
        return Finding(
            severity=severity,
            title=f"The KV-cache pool is {usage:.0%} full{wait_text}{grow}",
            evidence=tuple(evidence),
            fix=annotate_fix(fix, ctx.runtime, ctx.run.setup.runtime_version),
            expected_gain=gain,
            confidence=0.7 if pool_ratio else 0.5,
            action=action,
        )

    def _plan(self, ctx: RunContext) -> tuple[str, dict[str, str], Roofline | None, str]:
        e = ctx.engine
        fraction = e.memory_fraction
        target = self.p("fraction_target")
        if (
            ctx.runtime in _FRACTION_RUNTIMES
            and fraction.value is not None
            and fraction.value < self.p("fraction_below")
        ):
            if ctx.runtime == "sglang":
                # fixes.memory_fraction holds SGLang's --mem-fraction-static to 0.9 (it also sizes
                # the CUDA-graph and activation room); predict and title the value the fix names.
                target = min(target, 0.9)
            new = whatif.reanalyse(ctx, gpu_memory_utilization=target)
            return (
                "raise-gpu-memory-utilization",
                fixes.memory_fraction(target),
                new,
                f"a memory fraction of {target:g}",
            )
        if e.kv_cache_16bit is not False and not _trtllm_without_fp8(ctx):
            dtype = "q8_0" if ctx.runtime in ("ollama", "llamacpp") else "fp8"
            return (
                "quantize-kv-cache",
                fixes.kv_cache_quant(_generation(ctx)),
                whatif.reanalyse(ctx, kv_cache_dtype=dtype),
                f"an 8-bit ({dtype}) KV cache",
            )
        tp = ctx.roofline.tensor_parallel if ctx.roofline is not None else 1
        fix = {
            "vllm": (f"--tensor-parallel-size {tp * 2} (the pool grows with the added memory) or another replica."),
            "sglang": f"--tp-size {tp * 2} or another replica (--dp-size).",
            "tgi": f"--num-shard {tp * 2} or another replica.",
            "trtllm": f"--tp_size {tp * 2} or another replica.",
            "other": "Add GPUs (tensor parallelism) or replicas.",
        }
        return "add-capacity", fix, whatif.reanalyse(ctx, tensor_parallel=tp * 2), f"{tp * 2} GPUs"

    @staticmethod
    def _throughput_gain(ctx: RunContext, cur: Roofline, pool_ratio: float) -> Gain | None:
        """More pool → a bigger running batch (up to the offered load) → more aggregate decode."""
        measured = ctx.run.metrics.output_throughput_tok_s
        offered = ctx.run.workload.concurrency
        running = ctx.run.metrics.running_mean or float(cur.concurrency)
        if not measured or not offered or offered <= running:
            return None
        batch = round(min(offered, running * pool_ratio))
        if ctx.engine.max_num_seqs.value:
            batch = min(batch, ctx.engine.max_num_seqs.value)
        if batch <= cur.concurrency:
            return None
        bigger = whatif.reanalyse(ctx, concurrency=batch)
        if bigger is None:
            return None
        ratio = bigger.decode_aggregate_ceiling_tok_s / cur.decode_aggregate_ceiling_tok_s
        return Gain("output_throughput_tok_s", measured, measured * ratio)


def _trtllm_without_fp8(ctx: RunContext) -> bool:
    """TensorRT-LLM on a GPU it runs no FP8 on (Ampere, Turing: quant_support.toml trtllm.fp8), so
    ``kv_cache_config dtype fp8`` is no lever there."""
    return ctx.runtime == "trtllm" and support("trtllm", "fp8", _generation(ctx)) == "none"


def _generation(ctx: RunContext) -> str | None:
    """The device generation (capabilities.csv): FP8 KV caveats apply off Hopper and Blackwell."""
    cap = capability(ctx.hardware.id if ctx.hardware is not None else None)
    return cap.generation if cap is not None else None
