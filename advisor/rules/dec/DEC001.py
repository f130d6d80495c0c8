from __future__ import annotations

from typing import ClassVar

from advisor.rules import fixes, whatif
from advisor.rules.base import Evidence, Finding, Gain, Rule
from advisor.rules.config import ParamSpec, Spec, ThresholdSpec
from advisor.rules.context import RunContext
from advisor.rules.helpers import decode_efficiency, fmt, matter_cap
from advisor.rules.severity import damp

DECODE_OBJECTIVES = ("decode_tok_s_min", "itl_p50_ms", "tpot_p99_ms")


class NearCeilingWithWideWeights(Rule):
    """Decode runs near the memory-bandwidth ceiling with 16-bit (or 8-bit) weights.

    ## Why is this bad?
    Each decode step reads every active weight from memory, so a single stream can never exceed
    bandwidth ÷ bytes per token. A run already close to that ceiling has no software headroom left:
    the serving stack is fine, and the only way to go faster on the same hardware is to read fewer
    bytes per token. Quantization is the strongest single lever: 8-bit roughly doubles the ceiling,
    4-bit roughly quadruples it.

    ## Fix
    Serve the weights in fewer bits: 16 → 8 (FP8 on vLLM/SGLang/TGI/TensorRT-LLM, Q8_0 in
    llama.cpp/Ollama), or 8 → 4 (AWQ/GPTQ, Q4_K_M) after checking quality on your own evals.
    Keep the KV cache in mind for long contexts (DEC003).

    ## Example
    Llama-3.1-8B bf16 on an A10G (600 GB/s): ceiling 37.5 tok/s, measured 33.5. FP8 halves the
    bytes per token: about 60 tok/s.
    """

    id = "DEC001"
    name = "decode.near_ceiling_with_wide_weights"
    action = "quantize-weights"
    thresholds: ClassVar[tuple[Spec, ...]] = (
        ThresholdSpec("efficiency", ascending=True, unit="ratio", doc="measured ÷ per-stream decode ceiling"),
        ThresholdSpec(
            "decode_tok_s",
            ascending=False,
            unit="tok/s",
            doc="per-stream decode slow enough to matter (no decode SLO)",
        ),
        ParamSpec(
            "max_efficiency",
            unit="ratio",
            doc="above this the physics is wrong, not the weights (MEAS006)",
            minimum=1,
        ),
        ParamSpec(
            "min_bits",
            unit="bits",
            doc="weights at or below this many bits are already quantized (DEC004)",
            minimum=2,
        ),
    )

    def evaluate(self, ctx: RunContext) -> Finding | None:
        eff = decode_efficiency(ctx)
        bits = ctx.bits_per_weight
        decode = ctx.measured.decode_tok_s
        cur = ctx.roofline
        if eff is None or bits is None or decode is None or cur is None:
            return None
        if bits <= self.p("min_bits") or eff > self.p("max_efficiency") or cur.decode_bound != "bandwidth":
            return None
        if ctx.engine.speculative.value:
            return None
        target_bits, key = self._target(ctx, bits)
        target = whatif.quant_spec(ctx, key)
        new = whatif.reanalyse(ctx, quant=target)
        ratio = whatif.decode_ratio(ctx, new, quant=target) if new is not None else None
        if ratio is None or ratio <= 1.0:
            return None
        to = decode * ratio
        severity = damp(
            self.t("efficiency").severity_of(eff),
            matter_cap(ctx, self.common, DECODE_OBJECTIVES, self.t("decode_tok_s"), decode),
        )
        fix = fixes.weight_quant(target_bits)
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
            ),
            fix=fix,
            expected_gain=Gain("decode_tok_s", decode, to),
            confidence=0.75 if target_bits >= 7 else 0.55,
        )

    @staticmethod
    def _target(ctx: RunContext, bits: float) -> tuple[float, str]:
        gguf = ctx.runtime in ("ollama", "llamacpp") or (ctx.quant is not None and ctx.quant.family == "gguf")
        if bits >= 12:
            return 8.0, "q8_0" if gguf else "fp8"
        return 4.0, "q4_k_m" if gguf else "awq"
