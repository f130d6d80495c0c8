from __future__ import annotations

from typing import ClassVar

from advisor.rules.base import Evidence, Finding, Rule
from advisor.rules.config import Spec, ThresholdSpec
from advisor.rules.context import RunContext
from advisor.rules.helpers import describe_setup, fmt


class FasterThanPhysics(Rule):
    """Decode is faster than the physics allows for the declared setup: the setup is wrong.

    ## Why is this bad?
    Without speculative decoding, no engine can decode a stream faster than memory bandwidth ÷
    bytes read per token. A measurement above that ceiling means the declared setup is not the one
    that ran: a different GPU, a quantized checkpoint declared as 16-bit, a mixture-of-experts
    model declared by its total parameters, more GPUs than stated, or a decode rate computed from
    a latency that excludes most tokens. Every physics-based finding on this run would be wrong,
    so the decode findings are replaced by this one.

    ## Fix
    Check and correct ``setup.hardware``, ``setup.quantization``, ``setup.model`` (active
    parameters for MoE), ``tensor_parallel`` and ``gpu_count``; if speculative decoding is on,
    declare it (``engine_args.speculative_config``).

    ## Example
    "Llama-3.1-8B bf16 on an A10G" decoding at 95 tok/s against a 37.5 tok/s ceiling: the
    checkpoint was in fact AWQ 4-bit.
    """

    id = "MEAS006"
    name = "measurement.faster_than_physics"
    action = "improve-measurement"
    supersedes: ClassVar[tuple[str, ...]] = ("DEC001", "DEC002", "DEC003", "DEC004", "REG001")
    thresholds: ClassVar[tuple[Spec, ...]] = (
        ThresholdSpec("over_ceiling", ascending=True, unit="ratio", doc="measured ÷ per-stream decode ceiling"),
    )

    def evaluate(self, ctx: RunContext) -> Finding | None:
        cur = ctx.roofline
        decode = ctx.measured.decode_tok_s
        if cur is None or decode is None or ctx.engine.speculative.value:
            return None
        ratio = decode / cur.decode_ceiling_batch_tok_s
        severity = self.t("over_ceiling").severity_of(ratio)
        if not severity:
            return None
        return Finding(
            severity=severity,
            title=(
                f"Decode at {fmt(decode, 'tok/s')} is {ratio:.1f}× the physical ceiling of "
                f"{fmt(cur.decode_ceiling_batch_tok_s, 'tok/s')} for {describe_setup(ctx)}: the "
                "declared setup is not what ran"
            ),
            evidence=(
                Evidence("decode_tok_s", decode, f"<= {fmt(cur.decode_ceiling_batch_tok_s)}", "physics"),
                Evidence(
                    "decode_source",
                    ctx.measured.decode_source or "",
                    "1000 / TPOT or tokens ÷ decode time",
                    "run",
                ),
                Evidence("bits_per_weight", ctx.bits_per_weight or 0.0, "as declared", "run"),
                Evidence("mem_bandwidth_gb_s", cur.mem_bandwidth_gb_s, "as declared", "run"),
            ),
            fix={
                "other": (
                    "Check setup.hardware, setup.quantization, setup.model (active parameters for "
                    "MoE), tensor_parallel and "
                    "gpu_count; declare speculative decoding in engine_args.speculative_config if it is on."
                )
            },
            expected_gain=None,
            confidence=0.8,
        )
