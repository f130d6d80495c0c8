from __future__ import annotations

from typing import ClassVar

from advisor.rules.base import Evidence, Finding, Gain, Rule
from advisor.rules.config import Spec, ThresholdSpec
from advisor.rules.context import RunContext
from advisor.rules.helpers import fmt
from advisor.rules.severity import damp


class ColdLoadInTtft(Rule):
    """Loading the model is counted in the time to first token.

    ## Why is this bad?
    Ollama unloads an idle model after ``keep_alive`` (5 minutes by default); the next request
    waits for the weights to be read from disk into memory before prefill even starts, and its
    ``load_duration`` shows it. In production, users who arrive after a quiet spell see seconds of
    TTFT; in a benchmark, one cold call inflates the mean. A warm model reports a load of a few
    milliseconds.

    ## Fix
    Keep the model resident (Ollama ``OLLAMA_KEEP_ALIVE=-1`` or ``"keep_alive": -1`` per request)
    and send a warm-up request after every start or deploy, before traffic or measurement. Check
    that several models do not evict each other (``OLLAMA_MAX_LOADED_MODELS``).

    ## Example
    Ollama, Mistral-7B Q4_K_M: ``load_duration`` 2.4 s of a 2.7 s TTFT on the first call after
    idling; warm calls load in 15 ms.
    """

    id = "PRE006"
    name = "prefill.cold_load_in_ttft"
    action = "warm-up-model"
    thresholds: ClassVar[tuple[Spec, ...]] = (
        ThresholdSpec("load_share", ascending=True, unit="ratio", doc="load time ÷ TTFT"),
        ThresholdSpec("load_ms", ascending=True, unit="ms", doc="load time; a warm model loads in milliseconds"),
    )

    def evaluate(self, ctx: RunContext) -> Finding | None:
        m = ctx.run.metrics
        load = m.load_ms
        if not load:
            return None
        found = next(((f"ttft_ms.{k}", v) for k in ("mean", "p50") if (v := getattr(m.ttft_ms, k))), None)
        if found is None and m.e2e_ms.mean:
            found = ("e2e_ms.mean", m.e2e_ms.mean)
        if found is None or found[1] <= 0:
            return None
        ttft_path, ttft = found
        share = min(load / ttft, 1.0)
        severity = damp(self.t("load_share").severity_of(share), self.t("load_ms").severity_of(load))
        to = max(ttft - load, 1.0)
        what = "time to first token" if ttft_path.startswith("ttft") else "request latency"
        return Finding(
            severity=severity,
            title=f"Model loading takes {fmt(load, 'ms')}, {share:.0%} of the {fmt(ttft, 'ms')} {what}",
            evidence=(
                Evidence("load_ms", load, f"< {fmt(self.t('load_ms').low)} (model already resident)", "run"),
                Evidence(ttft_path, ttft, f"≈ {fmt(to)} warm", "run"),
            ),
            fix={
                "ollama": (
                    'Keep the model loaded: OLLAMA_KEEP_ALIVE=-1 (or "keep_alive": -1 per request; '
                    "default 5m) and send "
                    "one warm-up request after start-up; raise OLLAMA_MAX_LOADED_MODELS if models "
                    "evict each other."
                ),
                "llamacpp": (
                    "llama-server loads at start-up: route traffic only after /health is ok and one "
                    "warm-up completion (do not pass --no-warmup)."
                ),
                "other": (
                    "Load and warm the model before taking traffic (readiness probe after one completion), "
                    "and exclude the first call from measurements."
                ),
            },
            expected_gain=Gain(ttft_path, ttft, to),
            confidence=0.85 if ctx.runtime == "ollama" else 0.6,
        )
