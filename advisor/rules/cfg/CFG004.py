from __future__ import annotations

from typing import ClassVar

from advisor.rules import runtimes
from advisor.rules.base import Evidence, Finding, Rule
from advisor.rules.config import ParamSpec, Spec, ThresholdSpec
from advisor.rules.context import RunContext
from advisor.rules.helpers import dropped, fmt
from advisor.rules.severity import Severity

#: Ollama's default num_ctx over the years; a prompt of exactly this length was likely cut to it.
_OLLAMA_DEFAULT_CONTEXTS = (2048.0, 4096.0, 8192.0)


class ContextWindowTruncatesPrompt(Rule):
    """The context window is smaller than the prompts, so they are silently truncated.

    ## Why is this bad?
    Ollama cuts a prompt that does not fit ``num_ctx`` (2,048 or 4,096 tokens by default in many
    releases) without an error: the model answers without the beginning of the conversation,
    usually the system prompt. llama.cpp with an explicit ``-np`` gives each slot ``-c / -np``
    tokens, so raising parallelism quietly shrinks every slot's window (with a unified KV cache,
    ``-np`` auto or ``--kv-unified``, each slot may use all of ``-c``). llama-server refuses a prompt
    that does not fit. Latency looks fine; the answers are not.

    ## Fix
    Raise the window to cover prompt + output: Ollama ``"num_ctx"`` in the request options or
    ``OLLAMA_CONTEXT_LENGTH``; llama.cpp ``-c`` = slots × per-slot window, or the window itself
    with ``--kv-unified``. Memory grows with it
    (``num_ctx × OLLAMA_NUM_PARALLEL``); an 8-bit KV cache halves it.

    ## Example
    Ollama with the default context and 6,000-token RAG prompts: ``prompt_eval_count`` is exactly
    4,096 on every request.
    """

    id = "CFG004"
    name = "config.context_window_truncates_prompt"
    action = "fix-serving-stack"
    thresholds: ClassVar[tuple[Spec, ...]] = (
        ThresholdSpec("fill", ascending=True, unit="ratio", doc="(prompt + output) ÷ context window"),
        ParamSpec(
            "exact_tolerance",
            unit="ratio",
            doc="a prompt this close to a default window counts as cut to it",
            minimum=0,
            maximum=0.1,
        ),
    )

    def evaluate(self, ctx: RunContext) -> Finding | None:
        if ctx.runtime not in ("ollama", "llamacpp"):
            return None
        prompt = ctx.measured.prompt_tokens
        if not prompt:
            return None
        output = ctx.measured.output_tokens or 0.0
        knob = ctx.engine.context_length
        tol = self.p("exact_tolerance")
        if knob.value and not knob.explicit and abs(prompt - knob.value) <= tol * knob.value:
            # The version's default window (runtimes.toml) and a prompt of exactly that length.
            window, fill = float(knob.value), (prompt + output) / knob.value
            severity, confidence, inferred = Severity.MODERATE, 0.5, True
        elif knob.value and not knob.explicit:
            # A measured prompt longer than a *default* window: the server was given a bigger one
            # (OLLAMA_CONTEXT_LENGTH, a Modelfile), since a cut prompt never counts more than num_ctx.
            return None
        elif knob.value:
            window = float(knob.value)
            fill = (prompt + output) / window
            severity = self.t("fill").severity_of(fill)
            confidence, inferred = 0.8, False
        else:
            hit = next(
                (w for w in _OLLAMA_DEFAULT_CONTEXTS if ctx.runtime == "ollama" and abs(prompt - w) <= tol * w),
                None,
            )
            if hit is None:
                return None
            window, fill = hit, (prompt + output) / hit
            severity, confidence, inferred = Severity.MODERATE, 0.5, True
        if (bare := dropped(self, severity, None)) is not None:
            return bare
        needed = int(2 ** (int(prompt + output - 1).bit_length()))
        slots = ctx.engine.max_num_seqs.value or 1
        return Finding(
            severity=severity,
            title=(
                f"Prompts of {fmt(prompt)} tokens {'match' if inferred else 'fill'} a "
                f"{fmt(window)}-token context window"
                + (
                    " (a default): they were probably cut"
                    if inferred
                    else f" to {fill:.0%}: "
                    + (
                        ("they are cut or refused" if fill >= 1 else "long ones are cut or refused")
                        if ctx.runtime == "ollama"
                        else ("they fail" if fill >= 1 else "long ones fail")
                        + " (llama-server answers 400 exceed_context_size)"
                    )
                )
            ),
            evidence=(
                Evidence(
                    "workload.prompt_tokens_mean",
                    prompt,
                    f"< {fmt(window)} with room for {fmt(output)} output tokens",
                    "run",
                ),
                Evidence(
                    knob.arg or "num_ctx",
                    knob.describe() if knob.known else f"{fmt(window)} (inferred default)",
                    f">= {needed}",
                    "run",
                ),
            ),
            fix=runtimes.annotate_fix(
                {
                    "ollama": (
                        f'"num_ctx": {needed} in the request options (or OLLAMA_CONTEXT_LENGTH={needed}); '
                        "memory grows with num_ctx × OLLAMA_NUM_PARALLEL."
                    ),
                    "llamacpp": (
                        f"-c {needed}: with a unified KV cache (-np auto, or --kv-unified) every slot may "
                        f"use all of it, shared with the others."
                        if ctx.engine.kv_unified.value
                        else f"-c {needed * slots} for -np {slots} (each slot gets -c / -np = {needed}), or "
                        f"-c {needed} with --kv-unified (the slots share it)."
                    ),
                },
                ctx.runtime,
                ctx.run.setup.runtime_version,
            ),
            expected_gain=None,
            confidence=confidence,
        )
