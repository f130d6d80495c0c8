from __future__ import annotations

from typing import ClassVar

from advisor.catalog.capabilities import QuantChoice, capability, gain_cap, weight_quant_choice
from advisor.rules import fixes, whatif
from advisor.rules.base import Evidence, Finding, Gain, Rule
from advisor.rules.config import ParamSpec, Spec
from advisor.rules.context import RunContext
from advisor.rules.helpers import decode_at_ceiling, fmt, matter_cap
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
    (``advisor/catalog/data/quant_support.toml``): FP8 W8A8 on Ada, Hopper and Blackwell; on Ampere
    FP8 weight-only (vLLM, FP8 Marlin) or AWQ/GPTQ 4-bit; on Turing AWQ/GPTQ; TensorRT-LLM INT8/INT4
    weight-only off Ada and Hopper; the GGUF ladder (Q8_0, Q4_K_M) for llama.cpp and Ollama;
    ``mlx_lm.convert -q`` for MLX. Check quality on your own evals; keep the KV cache in mind for
    long contexts (DEC003). The expected gain is capped by the speed-up the format reaches in
    practice (``max_gain`` in quant_support.toml): a published figure (vLLM FP8 "up to 1.6x",
    TensorRT-LLM FP8 1.51x and INT4 AWQ 1.61x) or, where none exists, an estimate from the
    weight-bytes ratio and the dequantising kernel (GGUF, MLX, AWQ/GPTQ: the finding then says so
    and carries less confidence).

    ## Example
    Llama-3.1-8B bf16 on an A10G (600 GB/s) with vLLM: ceiling 37.5 tok/s, measured 33.5. vLLM runs
    FP8 weight-only on Ampere; the ceiling ratio is about 2×, capped at vLLM's documented 1.6×: about
    54 tok/s.
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
        eff, bits, decode, cur = at_ceiling
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
        ratio = whatif.decode_ratio(ctx, new, quant=target) if new is not None else None
        if ratio is None or ratio <= 1.0:
            return None
        limit = gain_cap(ctx.runtime, cap.generation, choice, bits) if choice is not None and cap is not None else None
        ceiling_ratio = ratio
        if limit is not None:
            ratio = min(ratio, limit[0])
        estimated = limit is not None and "estimate:" in limit[1]
        to = decode * ratio
        severity = damp(
            self.t("efficiency").severity_of(eff),
            matter_cap(ctx, self.common, DECODE_OBJECTIVES, self.t("decode_tok_s"), decode),
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
        gain_row = (
            Evidence(
                "expected_speedup",
                ratio,
                (
                    f"expected {fmt(ratio)}× (from {limit[1]}); the predicted ratio is {fmt(ceiling_ratio)}×"
                    if ceiling_ratio > ratio
                    else f"expected {fmt(ratio)}× (predicted; at most {fmt(limit[0])}× from {limit[1]})"
                )
                + ("; the gain is an estimate" if estimated else ""),
                "physics",
            )
            if limit is not None
            else None
        )
        extra = tuple(e for e in (method, gain_row) if e is not None)
        return Finding(
            severity=severity,
            title=(
                f"Decode reaches {eff:.0%} of the {fmt(cur.decode_ceiling_batch_tok_s, 'tok/s')} "
                "bandwidth ceiling with "
                f"{fmt(bits)}-bit weights; {target.name} would give about {fmt(to, 'tok/s')}"
            ),
            evidence=(
                Evidence("decode_tok_s", decode, f"<= {fmt(cur.decode_ceiling_batch_tok_s)} (ceiling)", "physics"),
                Evidence("decode_efficiency", eff, "the stack is already near the ceiling", "physics"),
                Evidence("bits_per_weight", bits, f"{fmt(target.bits_per_weight)} with {target.name}", "physics"),
                Evidence(
                    "weight_gb_read_per_token",
                    cur.active_weight_bytes / 1e9,
                    f"{fmt(new.active_weight_bytes / 1e9 if new else 0)} quantized",
                    "physics",
                ),
                *extra,
            ),
            fix=fix,
            expected_gain=Gain("decode_tok_s", decode, to),
            confidence=round((0.75 if target_bits >= 7 else 0.55) - (0.1 if estimated else 0.0), 2),
        )

    @staticmethod
    def _target(ctx: RunContext, bits: float) -> tuple[float, str]:
        gguf = ctx.runtime in ("ollama", "llamacpp") or (ctx.quant is not None and ctx.quant.family == "gguf")
        if bits >= 12:
            return 8.0, "q8_0" if gguf else "fp8"
        return 4.0, "q4_k_m" if gguf else "awq"
