"""Small pure helpers the rules share: number formatting, the "does it matter" caps they combine,
and estimates of prefill time from the best evidence available."""

from __future__ import annotations

import math

from advisor.physics import HardwareSpec, prefill_flops
from advisor.rules.base import EvidenceSource
from advisor.rules.config import RuleConfig
from advisor.rules.context import RunContext
from advisor.rules.damping import slo_cap
from advisor.rules.severity import Severity, Thresholds

__all__ = [
    "ASSUMED_PREFILL_MFU",
    "decode_efficiency",
    "describe_setup",
    "fmt",
    "fmt_range",
    "hw_label",
    "latency_label",
    "matter_cap",
    "prefill_ms",
    "prefill_rate",
    "prefill_work_ratio",
    "ttft_typical",
]

#: Fraction of the compute ceiling prefill reaches when nothing better is known. Published vLLM and
#: SGLang prefill runs land at 40-60 % MFU for 7-70B models; 0.5 keeps estimates in that band.
ASSUMED_PREFILL_MFU = 0.5


def fmt(value: float | None, unit: str = "") -> str:
    """3 significant digits, thousands separators, optional unit: ``"33.5 tok/s"``, ``"8,192"``."""
    if value is None or not math.isfinite(value):
        return "unknown"
    magnitude = abs(value)
    if magnitude >= 1000:
        text = f"{value:,.0f}"
    elif magnitude >= 100:
        text = f"{value:.0f}"
    elif magnitude >= 10:
        text = f"{value:.1f}".rstrip("0").rstrip(".")
    else:
        text = f"{value:.2f}".rstrip("0").rstrip(".")
    return f"{text} {unit}".strip() if unit else text


def fmt_range(low: float, high: float, unit: str = "") -> str:
    """``"41–52 tok/s"``."""
    return f"{fmt(low)}–{fmt(high)}{(' ' + unit) if unit else ''}"


def matter_cap(
    ctx: RunContext,
    common: RuleConfig,
    objectives: tuple[str, ...],
    absolute: Thresholds,
    value: float | None,
) -> Severity:
    """Whether the metric a finding would improve matters: judged by the deployment's SLO on it
    when there is one, else by the rule's absolute limits on ``value``."""
    cap = slo_cap(ctx, common, *objectives)
    if cap is not None:
        return cap
    return absolute.severity_of(value)


def ttft_typical(ctx: RunContext) -> tuple[float, str] | None:
    """The TTFT a user typically sees: p50, else mean."""
    t = ctx.run.metrics.ttft_ms
    for key in ("p50", "mean"):
        value = getattr(t, key)
        if value is not None and value > 0:
            return float(value), f"ttft_ms.{key}"
    return None


def prefill_rate(ctx: RunContext) -> tuple[float, EvidenceSource] | None:
    """Prompt tokens per second this setup prefills at: measured, expected, or the physics
    ceiling at :data:`ASSUMED_PREFILL_MFU`."""
    if ctx.measured.prefill_tok_s:
        return ctx.measured.prefill_tok_s, "run"
    exp = ctx.expectations
    band = getattr(exp, "prefill_tok_s", None) if exp is not None else None
    expected = getattr(band, "expected", None) if band is not None else None
    if isinstance(expected, int | float) and expected > 0:
        return float(expected), "model"
    if ctx.roofline is not None and ctx.roofline.prefill_ceiling_tok_s:
        return ctx.roofline.prefill_ceiling_tok_s * ASSUMED_PREFILL_MFU, "physics"
    return None


def prefill_ms(ctx: RunContext, tokens: float) -> float | None:
    """Estimated milliseconds to prefill ``tokens`` on this setup."""
    rate = prefill_rate(ctx)
    if rate is None or tokens <= 0:
        return None
    return tokens / rate[0] * 1000.0


def decode_efficiency(ctx: RunContext) -> float | None:
    """Measured per-stream decode ÷ the per-stream ceiling at the run's concurrency."""
    if ctx.roofline is None or ctx.measured.decode_tok_s is None:
        return None
    return ctx.measured.decode_tok_s / ctx.roofline.decode_ceiling_batch_tok_s


def prefill_work_ratio(
    ctx: RunContext, new_tokens: float, new_depth: float, old_tokens: float, old_depth: float
) -> float:
    """Prefill FLOPs of ``new_tokens`` after ``new_depth`` cached ÷ the same for the old prompt
    (linear matmuls + quadratic attention); token ratio when the model's shape is unknown."""
    if old_tokens <= 0:
        return 1.0
    if ctx.model is None:
        return max(new_tokens, 0.0) / old_tokens
    old = prefill_flops(ctx.model, old_tokens, old_depth)
    return prefill_flops(ctx.model, max(new_tokens, 0.0), new_depth) / old if old > 0 else 1.0


def latency_label(path: str) -> str:
    """``"itl_ms"`` → ``"ITL"``, ``"tpot_ms.p99"`` → ``"TPOT"``."""
    return path.split(".", maxsplit=1)[0].removesuffix("_ms").upper()


def describe_setup(ctx: RunContext) -> str:
    """``"nvidia-a10g, llama-3.1-8b and F16 / BF16 on vllm"``."""
    hw = ctx.hardware.id if ctx.hardware else "this hardware"
    model = ctx.model.id if ctx.model else "this model"
    quant = ctx.quant.name if ctx.quant else "this quantization"
    runtime = f" on {ctx.runtime}" if ctx.runtime else ""
    return f"{hw}, {model} and {quant}{runtime}"


def hw_label(hw: HardwareSpec) -> str:
    """``"AMD Instinct MI210 (64GB HBM2e; PCIe)"``: the catalog name with its vendor."""
    return hw.name if hw.name.lower().startswith(hw.vendor.lower()) else f"{hw.vendor} {hw.name}"
