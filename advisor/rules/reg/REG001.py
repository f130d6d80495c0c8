from __future__ import annotations

from typing import ClassVar

from advisor.rules.base import Evidence, Finding, Gain, Rule
from advisor.rules.config import Spec, ThresholdSpec
from advisor.rules.context import RunContext
from advisor.rules.helpers import describe_setup, expected_by, fmt, fmt_range, matter_cap
from advisor.rules.limits import DECODE_OBJECTIVES, DECODE_TOK_S
from advisor.rules.severity import damp
from advisor.rules.whatif import tp_efficiency


class DecodeBelowExpected(Rule):
    """Decode is well below what runs with the same hardware, model and quantization reach.

    ## Why is this bad?
    The expectation combines the physics ceiling with the efficiency that published and fleet runs
    of the same runtime on the same kind of hardware actually reach. A run below the whole band is
    not explained by the setup: something specific to this deployment costs speed (an older engine
    version, a different attention backend, power or clock limits, a noisy neighbour, a client
    that cannot read the stream fast enough).

    A tensor-parallel group does not scale perfectly: the all-reduce per layer costs time on the
    interconnect. The physics prior's band assumes the ideal ``TP ×`` ceiling, so for multi-GPU runs
    it is scaled by the share the group keeps (:func:`advisor.physics.parallel.tp_efficiency` over
    the catalogued link) before the run is judged. The fitted model carries ``tensor_parallel`` as a
    feature, so its band is used as it is.

    ## Fix
    Compare this deployment with a reference run of the same setup: engine version and flags,
    driver and CUDA versions, GPU clocks and power limits (``nvidia-smi -q -d CLOCK,POWER``), other
    processes on the GPU, and the benchmark client itself. When DEC002 names a concrete cause it
    replaces this finding.

    ## Example
    vLLM, Llama-3.1-8B bf16 on an A10G at batch 1: runs like it reach 28–35 tok/s; this one
    reaches 19.
    """

    id = "REG001"
    name = "expectation.decode_below_expected"
    action = "fix-serving-stack"
    thresholds: ClassVar[tuple[Spec, ...]] = (
        ThresholdSpec(
            "ratio",
            ascending=False,
            unit="ratio",
            doc="measured ÷ expected decode (only below the band's low end)",
        ),
        DECODE_TOK_S,
    )

    def evaluate(self, ctx: RunContext) -> Finding | None:
        exp = ctx.expectations
        band = exp.decode_tok_s if exp is not None else None
        decode = ctx.measured.decode_tok_s
        if band is None or decode is None:
            return None
        scale = self._tp_scale(ctx)
        low, expected, high = band.low * scale, band.expected * scale, band.high * scale
        if decode >= low:
            return None
        if ctx.measured.concurrency is None and (ctx.measured.n_requests or 0) > 1:
            return None  # the expectation depends on the batch, which is unknown
        severity = damp(
            self.t("ratio").severity_of(decode / expected),
            matter_cap(ctx, self.common, DECODE_OBJECTIVES, self.t("decode_tok_s"), decode),
        )
        tp = ctx.roofline.tensor_parallel if ctx.roofline is not None else 1
        scaled = f" (× {scale:.2f}: the share of the ideal TP{tp} ceiling the group keeps)" if scale < 1.0 else ""
        return Finding(
            severity=severity,
            title=(
                f"{expected_by(ctx)} {fmt_range(low, high, 'tok/s')} from {describe_setup(ctx)}; "
                f"this run reaches {fmt(decode)}"
            ),
            evidence=(
                Evidence("decode_tok_s", decode, fmt_range(low, high) + scaled, "model"),
                Evidence(
                    "expectations.source",
                    exp.source if exp else "",
                    exp.model_version if exp else "",
                    "model",
                ),
            ),
            fix={
                "other": (
                    "Compare with a reference run of the same setup: engine version and flags, "
                    "driver/CUDA, GPU clocks and "
                    "power limits (nvidia-smi -q -d CLOCK,POWER), other processes on the GPU, and the "
                    "benchmark client."
                )
            },
            expected_gain=Gain("decode_tok_s", decode, expected),
            confidence=0.5,
        )

    @staticmethod
    def _tp_scale(ctx: RunContext) -> float:
        """The tensor-parallel efficiency the band is scaled by: 1.0 without TP and for the fitted
        model's band, which already learns from ``tensor_parallel``."""
        exp = ctx.expectations
        if exp is None or exp.carried_by == "model" or exp.source.startswith("fitted model"):
            return 1.0
        return min(tp_efficiency(ctx), 1.0)
