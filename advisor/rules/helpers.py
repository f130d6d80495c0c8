"""Small pure helpers the rules share: number formatting, the "does it matter" caps they combine,
and estimates of prefill time from the best evidence available."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

from advisor.ml.prior import PREFILL_ATTENTION_SLOWDOWN
from advisor.physics import HardwareSpec, ModelSpec, Roofline
from advisor.physics.roofline import prefill_attention_flops, prefill_matmul_flops, prefill_seconds_split
from advisor.rules import runtimes
from advisor.rules.base import EvidenceSource, Finding, Gain, Rule
from advisor.rules.config import RuleConfig
from advisor.rules.context import ASSUMED_PREFILL_MFU, RunContext, per_run, per_setup
from advisor.rules.damping import BARE, FLOOR, ranked_severity, slo_cap
from advisor.rules.severity import Severity, Thresholds

__all__ = [
    "ASSUMED_PREFILL_MFU",
    "PREFILL_DOMINANT_SHARE",
    "QUEUE_DOMINANT_SHARE",
    "DecodeAtCeiling",
    "annotate_fix",
    "compute_is_estimated",
    "decode_at_ceiling",
    "decode_efficiency",
    "describe_setup",
    "dropped",
    "expected_by",
    "fmt",
    "fmt_range",
    "hw_label",
    "is_reasoning_model",
    "latency_label",
    "matter_cap",
    "output_shortfall",
    "prefill_advice_applies",
    "prefill_dominates",
    "prefill_ms",
    "prefill_rate",
    "prefill_work_ratio",
    "ttft_typical",
    "workload_advice_applies",
]

#: ``isinstance(x, _NUMBER)``: a tuple, since ``int | float`` builds a Union on every call (hot paths).
_NUMBER = (int, float)

#: Prefill (net of the prefix cache) below this share of the TTFT is a minor part of it: prompt,
#: prefix and batched-token advice then stays silent. Kept low on purpose: the prefill estimate
#: comes from an expected rate, and a false silence costs more than a weak finding.
PREFILL_DOMINANT_SHARE = 0.2
#: A queue at or above this share of the TTFT, measured with at least this confidence, is where the
#: time goes (the TTFT breakdown's queueing part).
QUEUE_DOMINANT_SHARE = 0.5
QUEUE_CONFIDENCE = 0.6
#: Model names (lower case) of models that think before they answer: their first *visible* token
#: comes after hidden reasoning tokens, which the TTFT includes (gpt-oss, DeepSeek-R1 and its
#: distills, the Qwen3 Thinking releases, QwQ, Magistral, Phi-4-reasoning, EXAONE Deep).
_REASONING_MARKERS = (
    "gpt-oss",
    "gpt_oss",
    "deepseek-r1",
    "-r1-",
    "qwq",
    "thinking",
    "magistral",
    "reasoning",
    "exaone-deep",
)


def fmt(value: float | None, unit: str = "") -> str:
    """3 significant digits, thousands separators, optional unit: ``"33.5 tok/s"``, ``"8,192"``."""
    if value is None or not math.isfinite(value):
        return "unknown"
    if value == 0:  # 0.0 and -0.0 are one key of the cache below but print "0" and "-0"
        return _fmt(value, unit)
    return _fmt_remembered(value, unit)


def _fmt(value: float, unit: str) -> str:
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


#: :func:`fmt` remembered by value (and type: a numpy float is another key) and unit: some 30 calls
#: a run, most of them on a setup's ceilings and a rule's limits, which repeat from run to run.
_fmt_remembered = functools.lru_cache(maxsize=4096, typed=True)(_fmt)


#: The fix of a bare finding (never read: the engine drops it).
_NO_FIX: Mapping[str, str] = MappingProxyType({})


def dropped(rule: Rule, severity: Severity, gain: Gain | None = None) -> Finding | None:
    """A bare finding (``severity`` and ``gain``, no title, evidence or fix) when the engine will
    rank it below the floor it drops findings at, else ``None``: build the finding in full. A rule
    returns it as soon as it knows both numbers, and skips the texts nobody would read; the engine
    lists it as suppressed exactly as it would the full one (the same :func:`ranked_severity`).
    A severity of ``none`` may be dropped before its gain is known (damping only lowers it), by a
    rule that returns a finding from there on whatever it computes. Outside the engine the floor is
    ``none``: every finding is built."""
    ranked = ranked_severity(rule, severity, gain)
    if ranked >= FLOOR.get():  # floor(), without the call
        return None
    # Carries the ranked severity, marked BARE, so that the engine does not rank it again.
    return Finding(ranked, "", (), _NO_FIX, gain, details=BARE)


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
    breakdown = ctx.ttft
    if breakdown is not None:  # the breakdown starts from the same p50-else-mean (a dozen rules ask)
        return breakdown.total_ms, breakdown.basis
    # The two keys spelled out.
    t = ctx.run.metrics.ttft_ms
    value = t.p50
    if value is not None and value > 0:
        return float(value), "ttft_ms.p50"
    value = t.mean
    if value is not None and value > 0:
        return float(value), "ttft_ms.mean"
    return None


def prefill_dominates(ctx: RunContext) -> bool:
    """Whether prefill is the main part of the TTFT (:func:`advisor.rules.context.ttft_breakdown`).
    True when the breakdown cannot tell (no prefill estimate): the rules then judge as before."""
    breakdown = ctx.ttft
    if breakdown is None:
        return True
    queue = breakdown.queueing
    if (
        queue.ms is not None
        and queue.confidence >= QUEUE_CONFIDENCE
        and breakdown.share("queueing") >= QUEUE_DOMINANT_SHARE
    ):
        return False
    if breakdown.prefill.ms is None:
        return True
    if is_reasoning_model(ctx) and breakdown.dominant == "remainder":
        return False  # hidden reasoning tokens come before the first visible one
    return breakdown.share("prefill") >= PREFILL_DOMINANT_SHARE


def workload_advice_applies(ctx: RunContext) -> bool:
    """Prompt, prefix and queue advice is for user traffic: not for an engine microbenchmark."""
    return not ctx.microbenchmark


def prefill_advice_applies(ctx: RunContext) -> bool:
    """Prompt, prefix and batched-token advice (PRE001-PRE003) applies: user traffic
    (:func:`workload_advice_applies`) whose TTFT is mostly prefill (:func:`prefill_dominates`),
    not queue or hidden reasoning. Once per run (three rules ask)."""
    return per_run(ctx, "prefill_advice_applies", _prefill_advice_applies)


def _prefill_advice_applies(ctx: RunContext) -> bool:
    return workload_advice_applies(ctx) and prefill_dominates(ctx)


def is_reasoning_model(ctx: RunContext) -> bool:
    """A known reasoning model, by the catalog id or the name the run gave. Once per run."""
    return per_run(ctx, "is_reasoning_model", _is_reasoning_model)


def _is_reasoning_model(ctx: RunContext) -> bool:
    names = [ctx.model.id if ctx.model is not None else None, getattr(ctx.model, "name", None)]
    given = ctx.run.setup.model
    names.append(given if isinstance(given, str) else None)
    names.append(ctx.run.source.given.get("model") if isinstance(ctx.run.source.given.get("model"), str) else None)
    return _reasoning_names(tuple(names))


@functools.lru_cache(maxsize=1024)
def _reasoning_names(names: tuple[str | None, ...]) -> bool:
    """:func:`is_reasoning_model` of the names (a deployment's few setups; rules ask per run)."""
    text = " ".join(n.lower() for n in names if n)
    # Only names that always think: a hybrid (the April 2025 Qwen3) thinks only through the chat
    # template, and a benchmark on /v1/completions never applies it.
    return any(marker in text for marker in _REASONING_MARKERS)


@functools.lru_cache(maxsize=1024)
def _annotated(
    items: tuple[tuple[str, str], ...], runtime: str | None, version: str | None
) -> tuple[tuple[str, str], ...]:
    return tuple(runtimes.annotate_fix(dict(items), runtime, version).items())


def annotate_fix(fix: dict[str, str], runtime: str | None, version: str | None) -> dict[str, str]:
    """:func:`advisor.rules.runtimes.annotate_fix`, memoised (it is pure over the runtime table,
    and a rule's fix texts repeat across runs of one setup); a new dict each call."""
    return dict(_annotated(tuple(fix.items()), runtime, version))


def prefill_rate(ctx: RunContext) -> tuple[float, EvidenceSource] | None:
    """Prompt tokens per second this setup prefills at: measured, expected, or the physics
    ceiling at :data:`ASSUMED_PREFILL_MFU`."""
    if ctx.measured.prefill_tok_s:
        return ctx.measured.prefill_tok_s, "run"
    # Otherwise the expectations' or the physics': the setup's alone, once per setup.
    return per_setup(ctx, prefill_rate, "prefill_rate", _setup_prefill_rate)


def _setup_prefill_rate(ctx: RunContext) -> tuple[float, EvidenceSource] | None:
    exp = ctx.expectations
    band = getattr(exp, "prefill_tok_s", None) if exp is not None else None
    expected = getattr(band, "expected", None) if band is not None else None
    if isinstance(expected, _NUMBER) and expected > 0:
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


class DecodeAtCeiling(NamedTuple):
    """A bandwidth-bound decode whose quantization the decode rules judge (DEC001, DEC004)."""

    efficiency: float
    bits: float
    decode_tok_s: float
    roofline: Roofline


def decode_at_ceiling(ctx: RunContext, max_efficiency: float) -> DecodeAtCeiling | None:
    """The run's decode when it is bandwidth-bound, without a speculative draft, and its efficiency
    (:func:`decode_efficiency`) and bits per weight are known, the efficiency at most
    ``max_efficiency`` (above it the physics is wrong: MEAS006). ``None`` otherwise."""
    eff = decode_efficiency(ctx)
    bits = ctx.bits_per_weight
    decode = ctx.measured.decode_tok_s
    cur = ctx.roofline
    if eff is None or bits is None or decode is None or cur is None or ctx.engine.speculative.value:
        return None
    if eff > max_efficiency or cur.decode_bound != "bandwidth":
        return None
    return DecodeAtCeiling(eff, bits, decode, cur)


def prefill_work_ratio(
    ctx: RunContext, new_tokens: float, new_depth: float, old_tokens: float, old_depth: float
) -> float:
    """Prefill time of ``new_tokens`` after ``new_depth`` cached ÷ the same for the old prompt, with
    the physics' two efficiencies (:func:`advisor.physics.roofline.prefill_seconds_split`): the
    matmuls at one share of peak and the attention :data:`PREFILL_ATTENTION_SLOWDOWN` times slower
    per FLOP (the prior's calibrated ``r``), so a prompt that moves attention-heavy work (deep KV,
    long prompts) changes by more than its FLOP ratio. The device's rate cancels in the ratio. Token
    ratio when the model's shape is unknown."""
    if old_tokens <= 0:
        return 1.0
    if ctx.model is None:
        return max(new_tokens, 0.0) / old_tokens
    # Pure in the model and the four numbers, which repeat across a setup's runs: once per setup.
    model = ctx.model
    return per_setup(
        ctx,
        prefill_work_ratio,
        ("prefill_work_ratio", new_tokens, new_depth, old_tokens, old_depth),
        lambda _ctx: _prefill_work_ratio(model, new_tokens, new_depth, old_tokens, old_depth),
    )


def _prefill_work_ratio(
    model: ModelSpec, new_tokens: float, new_depth: float, old_tokens: float, old_depth: float
) -> float:
    old = _relative_prefill_seconds(model, old_tokens, old_depth)
    return _relative_prefill_seconds(model, max(new_tokens, 0.0), new_depth) / old if old > 0 else 1.0


def _relative_prefill_seconds(model: ModelSpec, tokens: float, depth: float) -> float:
    """Prefill seconds at 1 TFLOPS with the matmuls at full rate and the attention at ``1 / r``."""
    if tokens <= 0:
        return 0.0
    return prefill_seconds_split(
        matmul_flops=prefill_matmul_flops(model, tokens),
        attention_flops=prefill_attention_flops(model, tokens, depth),
        tflops=1.0,
        attention_efficiency=1.0 / PREFILL_ATTENTION_SLOWDOWN,
    )


def latency_label(path: str) -> str:
    """``"itl_ms"`` → ``"ITL"``, ``"tpot_ms.p99"`` → ``"TPOT"``."""
    return path.split(".", maxsplit=1)[0].removesuffix("_ms").upper()


def expected_by(ctx: RunContext) -> str:
    """Who expects a band, true to its source: ``"The fitted model expects"`` or ``"The physics
    prior expects"``. Never "runs like yours reach": an expectation is not a count of runs."""
    exp = ctx.expectations
    if exp is None:
        return "Nothing expects"
    carried = exp.carried_by or ("model" if exp.source.startswith("fitted model") else "prior")
    if carried == "model":
        return f"The fitted model ({exp.model_version}) expects"
    if carried == "baseline":
        return "The physics ceiling scaled to this kind of device expects"
    return "The physics prior expects"


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


def compute_is_estimated(ctx: RunContext) -> bool:
    """Whether the device's compute figure is an estimate rather than a published rate: derived by
    the physics (``Roofline.prefill_tflops_estimated``) or marked ``estimated`` in the catalog's
    ``hardware_compute.csv`` (the DGX Spark's BF16 rate, halved down from a sparse FP4 figure)."""
    return per_setup(ctx, compute_is_estimated, "estimated", _compute_is_estimated)


def _compute_is_estimated(ctx: RunContext) -> bool:
    if ctx.roofline is not None and ctx.roofline.prefill_tflops_estimated:
        return True
    if ctx.hardware is None or ctx.catalog is None:
        return False
    compute = ctx.catalog.extra("hardware", ctx.hardware.id).get("compute")
    return isinstance(compute, dict) and compute.get("estimated") is True


#: Counted output below this share of the requested length is a shortfall worth naming.
OUTPUT_SHORTFALL_SHARE = 0.8


def output_shortfall(ctx: RunContext, share: float = OUTPUT_SHORTFALL_SHARE) -> tuple[float, float] | None:
    """``(requested, counted)`` output tokens when the run counted fewer than ``share`` of what it
    asked for (``workload.output_tokens_requested``). Only supporting evidence: hidden reasoning
    tokens count fewer, and so does a model stopping early at EOS."""
    w = ctx.run.workload
    requested, counted = w.output_tokens_requested, w.output_tokens_mean
    if not requested or counted is None or counted < 0 or counted >= share * requested:
        return None
    return float(requested), float(counted)
