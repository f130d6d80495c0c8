from __future__ import annotations

from typing import ClassVar

from advisor.rules import fixes, runtimes, whatif
from advisor.rules.base import Evidence, Finding, Gain, Rule
from advisor.rules.budget import itl_guard
from advisor.rules.config import Spec, ThresholdSpec
from advisor.rules.context import RunContext
from advisor.rules.damping import sample_cap
from advisor.rules.helpers import annotate_fix, dropped, fmt, latency_label, matter_cap, prefill_ms
from advisor.rules.limits import TAIL_OBJECTIVES, TAIL_RATIO

#: A prompt chunk whose prefill takes at least this share of the p99-p50 gap explains the tail.
_PREFILL_SHARE = 0.5


class TailLatencyUnderBatching(Rule):
    """Under batching, the slowest tokens are many times slower than the typical one.

    ## Why is this bad?
    Batching raises total throughput almost linearly, because one weight read serves the whole
    batch, but it worsens the tails: every step is as slow as the biggest batch and the longest
    contexts in it, scheduling hiccups hit all streams at once, and users feel p99 inter-token
    latency as mid-sentence stalls. A p99/p50 ratio far above 1 means the stream is not smooth.

    ## Fix
    Cap the batch (vLLM ``--max-num-seqs``, SGLang ``--max-running-requests``, TGI
    ``--max-batch-size``, Ollama ``OLLAMA_NUM_PARALLEL``, llama.cpp ``-np``) and serve the remaining
    load from more replicas, trading some per-GPU throughput for smoother streams. If long prompts
    cause the stalls, SCH001 (smaller prefill chunks) replaces this finding. With speculative decoding or
    ``--stream-interval`` above 1 tokens arrive in bursts by design, so the ITL tail is not judged
    (TPOT, a request's mean per token, still is). When one prompt chunk's prefill takes half the
    p99-p50 gap or more, the tail is the prefill's (SCH001, CFG002), and a smaller batch would not
    shorten it: this rule stays silent.

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
        # Token gaps are bursty by design with speculative decoding or --stream-interval above 1,
        # so ITL says nothing about batching there; TPOT (a request's mean per token) still does.
        paths = ("tpot_ms",) if itl_guard(ctx) else ("itl_ms", "tpot_ms")
        picked = next(
            (
                (p, getattr(ctx.run.metrics, p))
                for p in paths
                if getattr(ctx.run.metrics, p).p99 and getattr(ctx.run.metrics, p).p50
            ),
            None,
        )
        if picked is None:
            return None
        path, dist = picked
        p50, p99 = float(dist.p50), float(dist.p99)  # type: ignore[arg-type]
        if self._prefill_explains(ctx, p99 - p50):
            return None  # the prefill dial's tail (SCH001, CFG002, PRE004), not the batch's
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
        gain = Gain(f"{path}.p99", p99, to)
        if (bare := dropped(self, severity, gain)) is not None:
            return bare
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
            fix=annotate_fix(
                fixes.merge(
                    self._cap(ctx, half),
                    {
                        k: (
                            f"(per-GPU decode throughput drops to about {throughput_ratio:.0%}; add replicas "
                            "for the rest)"
                        )
                        for k in fixes.max_seqs(half, ctx.run.setup.runtime_version)
                    },
                ),
                ctx.runtime,
                ctx.run.setup.runtime_version,
            ),
            expected_gain=gain,
            # The step-time what-if is a lower bound: fewer streams also means fewer prefills
            # and less scheduling contention per step, which it does not model.
            confidence=0.35,
        )

    @staticmethod
    def _prefill_explains(ctx: RunContext, gap_ms: float) -> bool:
        """One prompt chunk's prefill (the whole uncached prompt, or the per-step budget when it
        is smaller) takes at least :data:`_PREFILL_SHARE` of the p99-p50 gap: halving the batch
        would not shorten that stall, so the tail is not this rule's."""
        uncached = ctx.measured.uncached_prompt_tokens
        if not uncached or gap_ms <= 0:
            return False
        budget = ctx.engine.batched_tokens.value if ctx.engine.chunked_prefill.value is not False else None
        chunk = min(uncached, float(budget)) if budget else uncached
        stall = prefill_ms(ctx, chunk)
        return stall is not None and stall >= _PREFILL_SHARE * gap_ms

    @staticmethod
    def _cap(ctx: RunContext, n: int) -> dict[str, str]:
        """Cap the batch at ``n``. TGI's router stops every batch at ``--max-batch-size`` (on CUDA
        too: backends/v3/src/queue.rs, ``if Some(batch_requests.len()) == max_size``) and keeps the
        rest queued, whereas ``--max-concurrent-requests`` turns requests beyond it away (429)."""
        fix = fixes.max_seqs(n, ctx.run.setup.runtime_version)
        fix["tgi"] = (
            f"{runtimes.flag('tgi', '--max-batch-size')} {n} (the router stops every batch at it; the rest wait in "
            "its queue)"
        )
        return fix
