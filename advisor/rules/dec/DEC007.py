from __future__ import annotations

from typing import ClassVar

from advisor.rules import fixes, runtimes
from advisor.rules.base import Evidence, Finding, Rule
from advisor.rules.config import Spec, ThresholdSpec
from advisor.rules.context import RunContext
from advisor.rules.helpers import fmt
from advisor.rules.knobs import normalise_key
from advisor.rules.severity import Severity

#: Where a run may report the draft acceptance rate (vLLM spec-decode metrics, SGLang, llama.cpp).
_ACCEPTANCE_KEYS = ("spec_acceptance_rate", "acceptance_rate", "draft_acceptance_rate", "spec_decode_acceptance_rate")


class SpeculativeDecodingJudged(Rule):
    """Speculative decoding is on where it costs more than it saves.

    ## Why is this bad?
    A draft proposes tokens that one pass of the big model verifies. It pays off when decode is
    bandwidth-bound and most drafted tokens are accepted. At high concurrency the batch already
    amortises the weight read, so verifying drafts adds compute to a step that is no longer
    bandwidth-bound; and with a low acceptance rate most drafted tokens are thrown away. vLLM's
    docs warn speculation helps at low QPS and can hurt at high QPS.

    ## Fix
    Turn speculation off at high concurrency (or lower the number of drafted tokens), and keep it
    only where acceptance is high: vLLM ``--speculative-config`` with fewer
    ``num_speculative_tokens``, SGLang ``--speculative-num-steps``, llama.cpp ``--spec-draft-n-max``
    (``--draft-max`` in builds before ggml-org/llama.cpp#22397).

    ## Example
    vLLM with an n-gram draft of 5 tokens serving 64 streams with an acceptance rate of 0.3.
    """

    id = "DEC007"
    name = "decode.speculative_decoding_judged"
    action = "speculative-decoding"
    thresholds: ClassVar[tuple[Spec, ...]] = (
        ThresholdSpec("concurrency", ascending=True, unit="streams", doc="streams in flight where speculation hurts"),
        ThresholdSpec("acceptance", ascending=False, unit="ratio", doc="draft acceptance rate (lower is worse)"),
    )

    def evaluate(self, ctx: RunContext) -> Finding | None:
        if not ctx.engine.speculative.value:
            return None
        conc = _decoding_streams(ctx)
        acceptance = _acceptance(ctx)
        by_load = self.t("concurrency").severity_of(conc)
        by_accept = self.t("acceptance").severity_of(acceptance)
        severity = max(by_load, by_accept)
        if not severity:
            return None
        reasons = []
        if by_load:
            reasons.append(f"{fmt(conc)} streams already share each weight read")
        if by_accept and acceptance is not None:
            reasons.append(f"only {acceptance:.0%} of drafted tokens are accepted")
        evidence = [Evidence("concurrency", conc, f"< {fmt(self.t('concurrency').low)}", "run")]
        if acceptance is not None:
            evidence.append(Evidence("acceptance_rate", acceptance, f">= {self.t('acceptance').low:.0%}", "run"))
        return Finding(
            severity=min(severity, Severity.SEVERE),
            title="Speculative decoding is on where it costs more than it saves: " + "; ".join(reasons),
            evidence=tuple(evidence),
            fix=runtimes.annotate_fix(
                {
                    "vllm": "Remove --speculative-config at this load, or lower num_speculative_tokens in it.",
                    "sglang": "Drop --speculative-algorithm at this load, or lower --speculative-num-steps.",
                    "llamacpp": (
                        f"Drop -md at this load, or lower {fixes.llamacpp_draft_max(ctx.run.setup.runtime_version)}."
                    ),
                    "other": "Turn speculative decoding off at high concurrency or low acceptance.",
                },
                ctx.runtime,
                ctx.run.setup.runtime_version,
            ),
            confidence=0.5,
        )


def _decoding_streams(ctx: RunContext) -> float | None:
    """Streams that share one verify step: the offered concurrency, capped by the engine's batch
    (``--max-num-seqs``, TensorRT-LLM ``--max_batch_size``, ``-np``...). Requests queued beyond the cap
    wait and do not batch with the drafts (a real trtllm-bench report: 505 in flight, batch size 10)."""
    conc = ctx.measured.concurrency
    cap = ctx.engine.max_num_seqs.value
    if conc is not None and isinstance(cap, int | float) and not isinstance(cap, bool) and cap > 0:
        return min(conc, float(cap))
    return conc


def _acceptance(ctx: RunContext) -> float | None:
    sources = {normalise_key(k): v for k, v in ctx.run.setup.engine_args.items()}
    sources.update({normalise_key(k): v for k, v in ctx.run.labels.items()})
    for key in _ACCEPTANCE_KEYS:
        value = sources.get(key)
        try:
            rate = float(value) if value is not None else None
        except (TypeError, ValueError):
            rate = None
        if rate is not None and 0.0 <= rate <= 1.0:
            return rate
    return None
