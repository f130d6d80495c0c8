from __future__ import annotations

from typing import ClassVar, NamedTuple

from advisor.catalog.capabilities import capability
from advisor.physics import Roofline, kv_bytes, weights_read_per_step
from advisor.rules import fixes, whatif
from advisor.rules.base import Evidence, Finding, Gain, Rule
from advisor.rules.config import ParamSpec, Spec, ThresholdSpec
from advisor.rules.context import RunContext, per_setup
from advisor.rules.helpers import annotate_fix, dropped, fmt, matter_cap
from advisor.rules.limits import DECODE_OBJECTIVES, DECODE_TOK_S
from advisor.rules.severity import Severity, damp


class LongContextKvReads(Rule):
    """KV-cache reads, not weights, dominate each decode step.

    ## Why is this bad?
    Every decode step re-reads the KV cache of every token in context, for every sequence in the
    batch: ``2 × layers × kv_heads × head_dim × bytes`` per token (128 KiB for Llama-3.1-8B in 16
    bits, so an 8,000-token conversation is about 1 GB). With long contexts or large batches
    those reads outgrow the weights, so decode slows down and the KV pool fills, and weight
    quantization helps less than expected.

    ## Fix
    Store the KV cache in 8 bits (vLLM ``--kv-cache-dtype fp8``, Ollama ``OLLAMA_KV_CACHE_TYPE=q8_0``,
    llama.cpp ``-ctk q8_0 -ctv q8_0``), which halves the bytes read and held per token; and trim
    what stays in context (summarise history, cap retrieved documents).

    ## Example
    Llama-3.1-8B bf16 on an H100 with 32 streams at 12,000 tokens of context: KV reads are 76 % of the
    bytes each step reads (3.2× the weights); an FP8 KV cache makes decode about 1.6× faster.
    """

    id = "DEC003"
    name = "decode.long_context_kv_reads"
    action = "quantize-kv-cache"
    actions: ClassVar[tuple[str, ...]] = ("reduce-context",)
    thresholds: ClassVar[tuple[Spec, ...]] = (
        ThresholdSpec("kv_share", ascending=True, unit="ratio", doc="KV bytes ÷ all bytes read per decode step"),
        DECODE_TOK_S,
        ParamSpec(
            "trim_fraction",
            unit="ratio",
            doc="context kept in the reduce-context what-if",
            minimum=0.05,
            maximum=0.95,
        ),
    )

    def evaluate(self, ctx: RunContext) -> Finding | None:
        decode = ctx.measured.decode_tok_s
        if decode is None:
            return None
        # The KV share, the what-if and the fix follow from the setup alone: once per setup.
        plan = per_setup(ctx, self, "plan", self._plan)
        if plan is None:
            return None
        cur = plan.roofline
        share = plan.share
        severity = damp(
            plan.share_severity,
            matter_cap(ctx, self.common, DECODE_OBJECTIVES, self.t("decode_tok_s"), decode),
        )
        to = decode * plan.ratio
        gain = Gain("decode_tok_s", decode, to)
        if (bare := dropped(self, severity, gain)) is not None:
            return bare
        what = plan.what
        return Finding(
            severity=severity,
            title=(
                f"KV-cache reads are {share:.0%} of the bytes each decode step reads "
                f"({fmt(cur.decode_context_tokens)} tokens of context × {cur.concurrency} streams); {what} gives "
                f"about {fmt(to, 'tok/s')}"
            ),
            evidence=(
                *plan.evidence,
                Evidence("decode_tok_s", decode, f"≈ {fmt(to)} with {what}", "physics"),
            ),
            fix=dict(plan.fix),
            expected_gain=gain,
            confidence=plan.confidence,
            action=plan.action,
        )

    def _plan(self, ctx: RunContext) -> _Plan | None:
        """The KV share of a decode step, the what-if that shrinks it and its fix, for this setup
        (:func:`per_setup`: reads only the setup, its roofline and expectations); None when the
        rule cannot fire on this setup."""
        cur, model, quant = ctx.roofline, ctx.model, ctx.quant
        if cur is None or model is None or quant is None or cur.decode_bound != "bandwidth":
            return None
        per_seq = kv_bytes(model, cur.decode_context_tokens, cur.kv_cache_dtype)
        if not per_seq:
            return None
        batch = cur.concurrency
        kv_read = batch * per_seq
        weights = weights_read_per_step(model, quant, batch)
        share = kv_read / (kv_read + weights)
        sixteen = ctx.engine.kv_cache_16bit is not False
        dtype = "q8_0" if ctx.runtime in ("ollama", "llamacpp") else "fp8"
        keep = self.p("trim_fraction")
        if sixteen:
            new = whatif.reanalyse(ctx, kv_cache_dtype=dtype)
        else:
            new = whatif.reanalyse(
                ctx,
                prompt_tokens=round((cur.prompt_tokens or 0) * keep),
                kv_depth_tokens=round(cur.kv_depth_tokens * keep),
            )
        ratio = whatif.decode_ratio(ctx, new) if new is not None else None
        if ratio is None or ratio <= 1.0:
            return None
        if sixteen:
            action, fix, what = (
                "quantize-kv-cache",
                fixes.kv_cache_quant(_generation(ctx)),
                f"an 8-bit ({dtype}) KV cache",
            )
        else:
            action, what = "reduce-context", f"keeping {keep:.0%} of the context"
            fix = {
                "other": (
                    f"Trim the context to about {keep:.0%}: summarise old turns, cap retrieved documents "
                    "and tool output."
                )
            }
        return _Plan(
            roofline=cur,
            share=share,
            share_severity=self.t("kv_share").severity_of(share),
            ratio=ratio,
            what=what,
            action=action,
            # Frozen evidence rows are shared by the findings of the setup; the fix is copied per finding.
            evidence=(
                Evidence("kv_share_of_step_bytes", share, f"< {self.t('kv_share').low:g}", "physics"),
                Evidence("decode_context_tokens", cur.decode_context_tokens, "", "run"),
                Evidence(
                    "kv_bytes_per_token",
                    cur.kv_bytes_per_token or 0.0,
                    f"{cur.kv_cache_dtype} KV cache",
                    "physics",
                ),
            ),
            fix=tuple(annotate_fix(fix, ctx.runtime, ctx.run.setup.runtime_version).items()),
            confidence=0.7 if sixteen else 0.5,
        )


class _Plan(NamedTuple):
    """What DEC003 finds of a setup (:meth:`LongContextKvReads._plan`)."""

    roofline: Roofline
    share: float
    share_severity: Severity
    ratio: float
    what: str
    action: str
    evidence: tuple[Evidence, ...]
    fix: tuple[tuple[str, str], ...]
    confidence: float


def _generation(ctx: RunContext) -> str | None:
    """The device generation (capabilities.csv): FP8 KV caveats apply off Hopper and Blackwell."""
    cap = capability(ctx.hardware.id if ctx.hardware is not None else None)
    return cap.generation if cap is not None else None
