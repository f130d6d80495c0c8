from __future__ import annotations

from typing import ClassVar

from advisor.rules import whatif
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
    so the decode findings are replaced by this one. With more GPUs than one model copy uses
    (``gpu_count`` above tensor × pipeline parallel), the streams are taken as shared by the
    replicas, so each stream's ceiling is a replica's. For a mixture-of-experts model decoding
    several streams, the ceiling is the one where every token of a step routes to the same experts
    (the fewest bytes a step can read): the per-stream ceiling the physics quotes assumes uniform
    routing, whose expert union is the largest a batch reads on average, and real routing is
    skewed, so a measurement above it is no proof of a wrong setup.

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
        ceiling = cur.decode_ceiling_batch_tok_s
        replicas = self._replicas(ctx)
        if replicas > 1 and cur.concurrency > 1:
            # More GPUs than one model copy uses: the streams are shared by the replicas (data
            # parallel, or P/D instances), so each one's batch, and its per-stream ceiling, is
            # the replica's. The most generous split is the one a "faster than physics" claim needs.
            per = whatif.reanalyse(ctx, concurrency=max(1, round(cur.concurrency / replicas)))
            if per is not None:
                ceiling = max(ceiling, per.decode_ceiling_batch_tok_s)
        model = ctx.model
        if model is not None and model.is_moe and cur.concurrency > 1:
            # The upper bound at a skewed routing: one token's experts serve the whole step.
            skewed = (
                cur.mem_bandwidth_gb_s
                * 1e9
                / (cur.active_weight_bytes + cur.concurrency * (cur.decode_kv_bytes_per_sequence or 0.0))
            )
            ceiling = max(ceiling, skewed)
        ratio = decode / ceiling
        severity = self.t("over_ceiling").severity_of(ratio)
        if not severity:
            return None
        return Finding(
            severity=severity,
            title=(
                f"Decode at {fmt(decode, 'tok/s')} is {ratio:.1f}× the physical ceiling of "
                f"{fmt(ceiling, 'tok/s')} for {describe_setup(ctx)}: the "
                "declared setup is not what ran"
            ),
            evidence=(
                Evidence("decode_tok_s", decode, f"<= {fmt(ceiling)}", "physics"),
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

    @staticmethod
    def _replicas(ctx: RunContext) -> int:
        """Model copies the stated GPUs hold: ``gpu_count`` ÷ (tensor × pipeline parallel)."""
        s = ctx.run.setup
        per_copy = max(s.tensor_parallel or 1, 1) * max(s.pipeline_parallel or 1, 1)
        return max((s.gpu_count or 1) // per_copy, 1)
