from __future__ import annotations

from typing import ClassVar, NamedTuple

from advisor.catalog.capabilities import QuantChoice, capability, weight_quant_choice
from advisor.catalog.quant_gains import GainModel, decode_step_gain, gain_model, prefill_step_gain
from advisor.physics import Roofline
from advisor.rules import fixes, whatif
from advisor.rules.base import Evidence, Finding, Gain, Rule
from advisor.rules.config import ParamSpec, Spec
from advisor.rules.context import RunContext, per_setup
from advisor.rules.helpers import decode_at_ceiling, dropped, fmt, matter_cap
from advisor.rules.limits import DECODE_EFFICIENCY, DECODE_OBJECTIVES, DECODE_TOK_S, MAX_EFFICIENCY
from advisor.rules.severity import damp


class NearCeilingWithWideWeights(Rule):
    """Decode runs near the memory-bandwidth ceiling with 16-bit (or 8-bit) weights.

    ## Why is this bad?
    Each decode step reads every active weight from memory, so a single stream can never exceed
    bandwidth ÷ bytes per token. A run already close to that ceiling has no software headroom left:
    the serving stack is fine, and the only way to go faster on the same hardware is to read fewer
    bytes per token. Quantization is the strongest single lever: 8-bit roughly doubles the ceiling,
    4-bit roughly quadruples it.

    ## Fix
    Serve the weights in fewer bits, in a format this runtime runs on this GPU generation
    (``advisor/catalog/data/quant_support.toml``): FP8 W8A8 on Ada, Hopper and Blackwell; on Ampere FP8
    weight-only (vLLM, FP8 Marlin) or AWQ/GPTQ 4-bit; on Turing AWQ/GPTQ; TensorRT-LLM INT8/INT4
    weight-only off Ada and Hopper; the 4-bit step on Blackwell is NVFP4 on its FP4 tensor cores (vLLM
    and TensorRT-LLM; an estimated gain, at most the 2.6x 4-bit weights reach); the GGUF ladder (Q8_0,
    Q4_K_M) for llama.cpp and Ollama; ``mlx_lm.convert -q`` for MLX. Check quality on your own evals;
    keep the KV cache in mind for long contexts (DEC003). The expected gain is the run's own decode step
    with the new weights, ``max((W / k + c × kv) / BW, c × F / T)`` now over after, at its concurrency
    ``c`` and context (``advisor/catalog/quant_gains.py``): the KV reads quantized weights do not
    shrink, and compute at high concurrency, make the same format give less at 64 streams than at one.
    ``k`` is the format's kernel efficiency: learnt from same-device pairs in the reference dataset
    (GGUF Q8_0 and Q4_K_M, MLX 4-bit over 8-bit), else from a published figure that also caps the gain
    (vLLM FP8 "up to 1.6x", vLLM Marlin AWQ/GPTQ "~2x", TensorRT-LLM FP8 1.51x and INT4 AWQ 1.61x), else
    an estimate (SGLang/TGI FP8 and AWQ, TensorRT-LLM INT8 weight-only, NVFP4, MLX 8-bit: the finding
    then says so and carries less confidence). A weight-only format (W8A16, W4A16) keeps the 16-bit
    matmul rate, so it does not speed up a compute-bound prefill; the evidence says what prefill gains.

    ## Example
    Llama-3.1-8B bf16 on an A10G (600 GB/s) with vLLM: ceiling 37.2 tok/s, measured 33.5. vLLM runs
    FP8 weight-only on Ampere; its documented "up to 1.6×" is a kernel efficiency of 0.8 on the 2×
    bytes ratio, and at one stream of 628 tokens the step gains 1.6×: about 53 tok/s.
    """

    id = "DEC001"
    name = "decode.near_ceiling_with_wide_weights"
    action = "quantize-weights"
    thresholds: ClassVar[tuple[Spec, ...]] = (
        DECODE_EFFICIENCY,
        DECODE_TOK_S,
        MAX_EFFICIENCY,
        ParamSpec(
            "min_bits",
            unit="bits",
            doc="weights at or below this many bits are already quantized (DEC004)",
            minimum=2,
        ),
    )

    def evaluate(self, ctx: RunContext) -> Finding | None:
        at_ceiling = decode_at_ceiling(ctx, self.p("max_efficiency"))
        if at_ceiling is None or at_ceiling.bits <= self.p("min_bits"):
            return None
        eff, decode = at_ceiling.efficiency, at_ceiling.decode_tok_s
        # What the setup alone decides (the target format, its expected speed-up, the fix and the
        # evidence behind them), once per setup; None when no format helps this setup.
        plan = per_setup(ctx, self, "plan", self._plan)
        if plan is None:
            return None
        to = decode * plan.ratio
        severity = damp(
            self.t("efficiency").severity_of(eff),
            matter_cap(ctx, self.common, DECODE_OBJECTIVES, self.t("decode_tok_s"), decode),
        )
        gain = Gain("decode_tok_s", decode, to)
        if (bare := dropped(self, severity, gain)) is not None:
            return bare
        return Finding(
            severity=severity,
            title=f"Decode reaches {eff:.0%} of the {plan.title_middle}{fmt(to, 'tok/s')}",
            evidence=(
                Evidence("decode_tok_s", decode, plan.ceiling_text, "physics"),
                Evidence("decode_efficiency", eff, "the stack is already near the ceiling", "physics"),
                *plan.evidence,
            ),
            fix=dict(plan.fix),
            expected_gain=gain,
            confidence=plan.confidence,
        )

    def _plan(self, ctx: RunContext) -> _Plan | None:
        """The quantization DEC001 proposes for this setup (:func:`per_setup`: reads only the
        setup, its roofline and expectations): None when there is none, or it is no faster."""
        cur, bits = ctx.roofline, ctx.bits_per_weight
        if cur is None or bits is None:
            return None
        target_bits, key = self._target(ctx, bits)
        cap = capability(ctx.hardware.id if ctx.hardware is not None else None)
        choice: QuantChoice | None = None
        if cap is not None and ctx.runtime is not None:
            choice = weight_quant_choice(ctx.runtime, cap.generation, target_bits)
            if choice is None:
                return None  # nothing this runtime runs on this generation at fewer bits
            target_bits, key = (8.0 if choice.bits >= 7 else 4.0), choice.key
            if target_bits >= bits:
                return None
        target = whatif.quant_spec(ctx, key)
        new = whatif.reanalyse(ctx, quant=target)
        if new is None or ctx.model is None or ctx.quant is None:
            return None
        ceiling_ratio = whatif.decode_ratio(ctx, new, quant=target)
        gains = (
            gain_model(ctx.runtime, cap.generation, ctx.quant, choice, ctx.hardware.kind if ctx.hardware else None,
                       target.bits_per_weight)
            if choice is not None and cap is not None
            else None
        )  # fmt: skip
        weight_only = choice is None or choice.how == "weight-only"
        # A weight-only format runs its matmuls at the 16-bit rate, whatever the device's 8-bit units.
        new_tflops = self._sixteen_bit_tflops(ctx, cur) if weight_only else new.prefill_tflops
        if gains is not None:
            ratio = decode_step_gain(
                cur,
                ctx.model,
                ctx.quant,
                target,
                k_now=gains.k_now,
                k_new=gains.k_new,
                new_tflops=new_tflops,
            )
            physics_ratio = ratio
            if gains.cap is not None:
                ratio = min(ratio, gains.cap)
        else:
            ratio = ceiling_ratio if ceiling_ratio is not None else 0.0
            physics_ratio = ratio
        if ratio <= 1.0:
            return None
        # An estimate, or a figure learnt from fewer than 3 pairs, carries less confidence.
        estimated = gains is not None and (
            gains.estimated or (gains.efficiency.basis == "learnt" and gains.efficiency.pairs < 3)
        )
        fix = fixes.weight_quant(target_bits, cap.generation if cap is not None else None)
        method = (
            Evidence(
                "quant_support",
                f"{choice.method} {choice.how}",
                f"on {cap.generation} in {ctx.runtime} (quant_support.toml: {choice.source.split(';')[0]})",
                "physics",
            )
            if choice is not None and cap is not None
            else None
        )
        gain_row = self._gain_evidence(cur, ratio, physics_ratio, gains, estimated) if gains is not None else None
        prefill = prefill_step_gain(cur, new, new_tflops=new_tflops)
        prefill_row = (
            Evidence(
                "prefill_speedup",
                prefill,
                (
                    "weight-only: the matmuls still run at the 16-bit rate, so a compute-bound prefill "
                    "gains nothing; only its one weight read shrinks"
                    if weight_only
                    else f"{choice.how if choice else 'w8a8'}: the matmuls run at the "
                    f"{fmt(new.prefill_tflops)} TFLOPS 8-bit rate"
                ),
                "physics",
            )
            if prefill is not None
            else None
        )
        extra = tuple(e for e in (method, gain_row, prefill_row) if e is not None)
        return _Plan(
            ratio=ratio,
            title_middle=(
                f"{fmt(cur.decode_ceiling_batch_tok_s, 'tok/s')} bandwidth ceiling with {fmt(bits)}-bit weights; "
                f"{target.name} would give about "
            ),
            ceiling_text=f"<= {fmt(cur.decode_ceiling_batch_tok_s)} (ceiling)",
            # Frozen evidence rows are shared by the findings of the setup; the fix is copied per finding.
            evidence=(
                Evidence("bits_per_weight", bits, f"{fmt(target.bits_per_weight)} with {target.name}", "physics"),
                Evidence(
                    "weight_gb_read_per_token",
                    cur.active_weight_bytes / 1e9,
                    f"{fmt(new.active_weight_bytes / 1e9)} quantized",
                    "physics",
                ),
                *extra,
            ),
            fix=tuple(fix.items()),
            confidence=round((0.75 if target_bits >= 7 else 0.55) - (0.1 if estimated else 0.0), 2),
        )

    @staticmethod
    def _sixteen_bit_tflops(ctx: RunContext, cur: Roofline) -> float | None:
        """The group's 16-bit matmul rate: the run's own when its weights are 16-bit, else the
        device's bf16 figure × the TP degree (as the physics scales it)."""
        if ctx.quant is not None and ctx.quant.bits_per_weight >= 12:
            return cur.prefill_tflops
        if ctx.hardware is None:
            return cur.prefill_tflops
        return ctx.hardware.compute_tflops("bf16")[0] * cur.tensor_parallel

    @staticmethod
    def _gain_evidence(
        cur: Roofline, ratio: float, physics_ratio: float, gains: GainModel, estimated: bool
    ) -> Evidence:
        """The expected speed-up with the step physics behind it and where the efficiency comes from."""
        kv = (cur.decode_kv_bytes_per_sequence or 0.0) * cur.concurrency
        step = (
            f"at concurrency {cur.concurrency} and {fmt(cur.decode_context_tokens)} tokens of context a step reads "
            f"{fmt(cur.active_weight_bytes / 1e9)} GB of weights and {fmt(kv / 1e9)} GB of KV cache"
        )
        basis = gains.efficiency.basis
        source = gains.source.removeprefix(f"{basis}:").strip()
        efficiency = f"kernel efficiency {fmt(gains.k_new)}, {basis}: {source}"
        cap_text = ""
        if gains.cap is not None:
            cap_text = (
                f"; that figure caps it at {fmt(gains.cap)}×"
                if gains.cap_source == gains.source
                else f"; capped at {fmt(gains.cap)}× by {gains.cap_source}"
            )
        if gains.cap is not None and physics_ratio > ratio:
            text = (
                f"expected {fmt(ratio)}× (the step physics gives {fmt(physics_ratio)}×: {step}; {efficiency}{cap_text})"
            )
        else:
            text = f"expected {fmt(ratio)}× from the step physics ({step}; {efficiency}{cap_text})"
        if gains.efficiency.basis == "learnt" and gains.efficiency.pairs < 3:
            text += f"; learnt from only {gains.efficiency.pairs} pair(s)"
        return Evidence(
            "expected_speedup", ratio, text + ("; the gain is an estimate" if gains.estimated else ""), "physics"
        )

    @staticmethod
    def _target(ctx: RunContext, bits: float) -> tuple[float, str]:
        gguf = ctx.runtime in ("ollama", "llamacpp") or (ctx.quant is not None and ctx.quant.family == "gguf")
        if bits >= 12:
            return 8.0, "q8_0" if gguf else "fp8"
        return 4.0, "q4_k_m" if gguf else "awq"


class _Plan(NamedTuple):
    """What DEC001 proposes for a setup (:meth:`NearCeilingWithWideWeights._plan`)."""

    ratio: float
    #: The title between the run's efficiency and its expected decode, and the ceiling's evidence text.
    title_middle: str
    ceiling_text: str
    evidence: tuple[Evidence, ...]
    fix: tuple[tuple[str, str], ...]
    confidence: float
