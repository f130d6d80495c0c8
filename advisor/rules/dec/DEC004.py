from __future__ import annotations

import re
from typing import ClassVar

from advisor.catalog.capabilities import capability
from advisor.errors import AdvisorError
from advisor.physics import ModelSpec
from advisor.rules import fixes, runtimes, whatif
from advisor.rules.base import Evidence, Finding, Gain, Rule
from advisor.rules.config import ParamSpec, Spec
from advisor.rules.context import RunContext
from advisor.rules.damping import slo_cap
from advisor.rules.helpers import decode_at_ceiling, fmt, hw_label, matter_cap
from advisor.rules.limits import DECODE_EFFICIENCY, DECODE_OBJECTIVES, DECODE_TOK_S, MAX_EFFICIENCY
from advisor.rules.severity import Severity, damp

#: Embedded modules (hardware.csv names "Jetson AGX Orin 64GB (module)"): built into a robot or an
#: edge box for their power envelope, not a card to swap.
_EMBEDDED = re.compile(r"\(module\)", re.IGNORECASE)


class QuantizationExhausted(Rule):
    """Decode is near the ceiling with weights already quantized to ~4 bits.

    ## Why is this bad?
    With 4-bit weights and decode close to the bandwidth ceiling, neither the serving stack nor
    the weights have much left to give: the bytes per token are already small and the stack already
    streams them near the memory's speed. Further speed has to come from reading fewer bytes
    (a smaller model), producing more than one token per weight read (speculative decoding), or
    more bandwidth (a device whose spec-sheet GB/s is higher; compute does not matter here).
    A mixture-of-experts file whose routed experts alone are narrow (gpt-oss's GGUF "F16" or
    MXFP4_MOE: the attention and output tensors, read by every token, at 16 or 8.5 bits) is not
    exhausted and is not reported here.

    ## Fix
    In order of cost: speculative decoding (an n-gram or EAGLE draft), a smaller model of the same
    family, or hardware with more memory bandwidth. The finding names the catalog devices of the
    same platform (Apple silicon for a Mac, NVIDIA for TensorRT-LLM) that would decode at least
    30 % faster and their predicted tok/s, or failing those a named step up (a data-centre GPU with
    at least the same memory; a server module, SXM or OAM, only for a data-centre user, never for a
    Mac Studio). A CPU run is offered GPUs and CPUs, not a Mac's CPU cores. An Apple or CPU machine
    at its ceiling is healthy: without a missed decode objective the speed that makes it matter is
    one level stricter (a CPU run or an embedded module such as a Jetson: a low note).

    ## Example
    Llama-3.1-8B Q4_K_M on an RTX 4090 (1,008 GB/s): 165 tok/s against a 206 tok/s ceiling. An RTX
    5090 (1,792 GB/s) would give about 290 tok/s.
    """

    id = "DEC004"
    name = "decode.quantization_exhausted"
    action = "upgrade-bandwidth"
    actions: ClassVar[tuple[str, ...]] = ("smaller-model", "speculative-decoding")
    thresholds: ClassVar[tuple[Spec, ...]] = (
        DECODE_EFFICIENCY,
        DECODE_TOK_S,
        ParamSpec(
            "max_bits",
            unit="bits",
            doc="weights at or below this many bits count as already quantized",
            minimum=2,
        ),
        MAX_EFFICIENCY,
        ParamSpec(
            "min_upgrade",
            unit="ratio",
            doc="smallest predicted decode speed-up worth naming a device for",
            minimum=1,
        ),
    )

    def evaluate(self, ctx: RunContext) -> Finding | None:
        at_ceiling = decode_at_ceiling(ctx, self.p("max_efficiency"))
        if at_ceiling is None or at_ceiling.bits > self.p("max_bits"):
            return None
        dense = ctx.quant.dense_bits_per_weight if ctx.quant is not None else None
        if dense is not None and dense > self.p("max_bits"):
            # Only the routed experts are that narrow: the tensors every token reads (gpt-oss's
            # attention and output in a GGUF "F16" or MXFP4_MOE file) are not, so quantization is
            # not exhausted.
            return None
        eff, bits, decode, cur = at_ceiling
        severity = damp(
            self.t("efficiency").severity_of(eff),
            matter_cap(ctx, self.common, DECODE_OBJECTIVES, self.t("decode_tok_s"), decode),
        )
        cap = capability(ctx.hardware.id) if ctx.hardware is not None else None
        unified = cap is not None and cap.unified_memory
        if (
            ctx.hardware is not None
            and (ctx.hardware.kind != "gpu" or unified)
            and slo_cap(ctx, self.common, *DECODE_OBJECTIVES) is None
        ):
            # An Apple or CPU machine at its ceiling is healthy: the remedy is a new machine, so
            # without a decode objective the bar is one level stricter (50 tok/s is a note, 15 a problem).
            # So is a unified-memory GPU (Strix Halo, DGX Spark, Jetson: capabilities.csv `memory`),
            # a machine bought for its memory size, not a card to swap.
            # A CPU deployment at its memory ceiling is a deliberate choice: a GPU is a note. So is
            # an embedded module (a Jetson AGX Orin: hardware.csv "(module)"), chosen for its power
            # envelope and built into its machine: 30 tok/s at 73 % of its 204.8 GB/s is a good run.
            speed = self.t("decode_tok_s").severity_of(decode)
            deliberate = ctx.hardware.kind == "cpu" or _EMBEDDED.search(ctx.hardware.name) is not None
            bar = Severity.LOW if deliberate else Severity(max(int(speed) - 1, 0))
            severity = damp(severity, bar)
        if not severity:
            return None  # hardware search is the costliest what-if: skip it when nothing fires
        options = whatif.hardware_options(ctx, min_ratio=self.p("min_upgrade"))
        smaller = self._smaller_model(ctx)
        lines: list[str] = []
        if options:
            listed = ", ".join(
                f"{hw_label(o.hardware)} ({fmt(o.hardware.mem_bandwidth_gb_s)} GB/s) ≈ {fmt(o.decode_tok_s, 'tok/s')}"
                for o in options
            )
            lines.append(f"More bandwidth: {listed}.")
        if smaller is not None:
            lines.append(f"A smaller model: {smaller[0].id} ≈ {fmt(smaller[1], 'tok/s')} at the same quantization.")
        spec = fixes.speculative_decoding()
        fix = {key: " ".join([*lines, f"Speculative decoding: {text}"]) for key, text in spec.items()}
        if options:
            action, to = "upgrade-bandwidth", options[0].decode_tok_s
        elif smaller is not None:
            action, to = "smaller-model", smaller[1]
        else:
            action, to = "speculative-decoding", decode * 1.5
        headline = (
            f"; {hw_label(options[0].hardware)} would give about {fmt(options[0].decode_tok_s, 'tok/s')}"
            if options
            else ""
        )
        return Finding(
            severity=severity,
            title=(
                f"Decode is at {eff:.0%} of the ceiling with {fmt(bits)}-bit weights: quantization is "
                "exhausted"
                f"{headline}"
            ),
            evidence=(
                Evidence("decode_tok_s", decode, f"<= {fmt(cur.decode_ceiling_batch_tok_s)} (ceiling)", "physics"),
                Evidence("bits_per_weight", bits, f"<= {fmt(self.p('max_bits'))} (already quantized)", "run"),
                Evidence("mem_bandwidth_gb_s", cur.mem_bandwidth_gb_s, "decode speed scales with it", "physics"),
            ),
            fix=runtimes.annotate_fix(fix, ctx.runtime, ctx.run.setup.runtime_version),
            expected_gain=Gain("decode_tok_s", decode, to),
            confidence=0.6 if options else 0.5 if smaller is not None else 0.3,
            action=action,
            details={
                "hardware_options": [o.to_dict() for o in options],
                "smaller_model": {"model": smaller[0].id, "decode_tok_s": round(smaller[1], 1)} if smaller else None,
            },
        )

    @staticmethod
    def _smaller_model(ctx: RunContext) -> tuple[ModelSpec, float] | None:
        """The largest catalog model of the same family with at most 60 % of the active params."""
        model, catalog, decode = ctx.model, ctx.catalog, ctx.measured.decode_tok_s
        if model is None or catalog is None or decode is None or not model.family:
            return None
        try:
            models = list(catalog.list_models())
        except (AdvisorError, ValueError, KeyError, LookupError, TypeError, AttributeError):
            return None
        same = [
            m
            for m in models
            if isinstance(m, ModelSpec)
            and m.family == model.family
            and m.active_params_b <= 0.6 * model.active_params_b
        ]
        if not same:
            return None
        best = max(same, key=lambda m: (m.active_params_b, m.id))
        new = whatif.reanalyse(ctx, model=best)
        ratio = whatif.decode_ratio(ctx, new, model=best) if new is not None else None
        return (best, decode * ratio) if ratio else None
