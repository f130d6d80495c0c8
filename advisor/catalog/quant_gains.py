"""How much faster decode gets with fewer weight bits: learnt from the reference dataset, or taken
from a maintainer's figure, and turned into the gain a run gets at its own batch and context.

**The kernel efficiency.** A weight format's decode step reads its weights at some efficiency ``k``
relative to 16-bit weights on the same stack: ``k = 1`` would turn the weight-bytes ratio into speed
in full, and dequantising kernels reach less. With ``W`` the weight bytes a step reads, ``c`` the
streams in the batch, ``kv`` the KV bytes one stream reads at its context and ``F`` the FLOPs per
token, the step takes

    ``t = max((W / k + c × kv) / BW, c × F / T)``

so the gain of a format over the current one is ``t_now / t_new`` (:func:`decode_step_gain`). It
shrinks as the batch grows: the KV reads, which weight quantization does not touch, take a larger
share of the step, and at high concurrency compute binds. A weight-only format (W8A16, W4A16) keeps
the 16-bit matmul rate ``T``; a W8A8 format runs them at its 8-bit rate.

**Where ``k`` comes from**, in order (:func:`kernel_efficiency`):

1. *learnt*: pairs of rows of ``advisor/ml/data/public_runs.csv`` from one source, runtime build,
   device, model and workload that differ only in the weight format (the llama.cpp GGUF ladders,
   the MLX bit widths). Each pair gives ``k`` from the measured gain at the pair's own physics
   (``k = W_q / ((W_16 + kv) / gain − kv)`` at batch 1); the median over the pairs of a hardware kind
   is used, the pairs of every kind pooled when that kind has none. Learnt once per process from the
   shipped dataset (:func:`learnt_efficiencies`, about 0.2 s of CPU), never stored: a derived figure
   that cannot go stale against its data, with no generated file or ``make`` target to keep in step.
2. *documented*: a speed-up a runtime's or kernel's maintainers published (``quant_support.toml``
   ``max_gain``/``gain_source``, or ``documented_gain``/``documented_source`` where the cap and the
   figure differ), taken as the gain at batch 1 with a negligible KV cache: ``k = gain / (16 / bits)``.
   The figure also caps the expected gain.
3. *estimate*: the table's ``estimate:`` figure, the same way, with the rules' lower confidence.

Nothing here reads ``/work/shared`` or the database: only package data.
"""

from __future__ import annotations

import functools
import math
import statistics
import tomllib
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal

from advisor.catalog.capabilities import QuantChoice, weight_quant_choice
from advisor.physics import ModelSpec, QuantSpec, Roofline
from advisor.physics.roofline import decode_flops_per_token, weights_read_per_step

__all__ = [
    "LEARNT_PAIRS",
    "GainBasis",
    "GainModel",
    "KernelEfficiency",
    "LearntEfficiency",
    "current_efficiency",
    "decode_step_gain",
    "gain_model",
    "kernel_efficiency",
    "learnt_efficiencies",
    "prefill_step_gain",
]

GainBasis = Literal["learnt", "documented", "estimate"]

#: What-if key → (the dataset's ``quant`` of the format, the dataset's ``quant`` it is measured
#: against, the runtimes whose kernels the rows measure). GGUF rows are llama.cpp's (Ollama embeds
#: it); the MLX pair is 4-bit against 8-bit on one device, so it learns the 4-bit rung *over 8-bit*.
LEARNT_PAIRS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "q8_0": ("Q8_0", "F16", ("llamacpp", "ollama")),
    "q4_k_m": ("Q4_K_M", "F16", ("llamacpp", "ollama")),
    "mlx4": ("MLX 4-bit", "MLX 8-bit", ("mlx",)),
}
#: Raw runtime names of ``public_runs.csv`` that are not the mainline kernels (ik_llama.cpp's own
#: iqk_mul_mat): their pairs would describe another engine.
_FOREIGN_RUNTIMES = ("ik_llama.cpp",)
_SIXTEEN_BIT = 16.0


@dataclass(frozen=True, slots=True)
class LearntEfficiency:
    """``k`` of one format on one hardware kind (``*``: every kind pooled), learnt from pairs."""

    key: str
    kind: str
    efficiency: float
    low: float
    high: float
    gain: float  # median measured gain over the base format at the pairs' own workloads
    pairs: int
    devices: int
    sources: tuple[str, ...]
    relative_to: str

    def describe(self) -> str:
        where = "every hardware kind pooled" if self.kind == "*" else self.kind
        return (
            f"median of {self.pairs} same-device pairs on {self.devices} devices ({where}) in "
            f"advisor/ml/data/public_runs.csv, sources {', '.join(self.sources)}: measured gain over "
            f"{self.relative_to} {self.gain:.2f}x, kernel efficiency {self.efficiency:.2f} "
            f"(range {self.low:.2f}-{self.high:.2f})"
        )


@dataclass(frozen=True, slots=True)
class KernelEfficiency:
    """The efficiency ``k`` a format's weights are read at (relative to 16-bit weights, or to
    ``relative_to``), where it comes from, and the documented cap on the gain, if any."""

    key: str
    efficiency: float
    basis: GainBasis
    source: str
    cap: float | None = None
    cap_source: str | None = None
    pairs: int = 0
    relative_to: str = "16-bit"

    @property
    def estimated(self) -> bool:
        return self.basis == "estimate"


def _pair_efficiency(base: Roofline, quant: Roofline, gain: float) -> float | None:
    """``k`` of the quantized row of a batch-1 pair: ``W_q / ((W_b + kv) / gain − kv)`` (bytes; the
    base format read at efficiency 1). None when the measured gain exceeds what any ``k`` allows."""
    kv = base.decode_kv_bytes_per_sequence or 0.0
    denominator = (base.active_weight_bytes + kv) / gain - kv
    if gain <= 0 or denominator <= 0:
        return None
    return quant.active_weight_bytes / denominator


@functools.cache
def learnt_efficiencies() -> dict[tuple[str, str], LearntEfficiency]:
    """Every learnt ``k`` by ``(what-if key, hardware kind)``, the pooled one under kind ``*``.

    Pairs: decode rows at batch 1 of one source, raw runtime, device, model and workload (prompt,
    output and KV depth), one in the format and one in its base. Cached for the process."""
    # Lazy: the learner reads the observations the fitted model trains on (one definition of a
    # row's physics), and advisor.ml imports this package.
    from advisor.catalog.lookup import Catalog
    from advisor.ml.dataset import catalog_hardware_lookup, catalog_model_shape, load_public_rows, public_observations

    catalog = Catalog.default()
    shape, lookup = catalog_model_shape(catalog), catalog_hardware_lookup(catalog)
    groups: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in load_public_rows():
        if row["runtime"].startswith(_FOREIGN_RUNTIMES):
            continue
        for obs in public_observations([row], shape, lookup):
            roof = obs.roofline
            if obs.phase != "decode" or roof.concurrency != 1 or obs.batch_unknown:
                continue
            key = (obs.source, row["runtime"], obs.hardware_name, obs.model.id, roof.prompt_tokens,
                   roof.output_tokens, roof.kv_depth_tokens)  # fmt: skip
            groups.setdefault(key, {})[row["quant"]] = obs
    found: dict[tuple[str, str], list[tuple[float, float, str, str]]] = {}
    for (source, _rt, device, *_), members in groups.items():
        for what_if, (quant, base, _runtimes) in LEARNT_PAIRS.items():
            if quant not in members or base not in members:
                continue
            q, b = members[quant], members[base]
            gain = q.measured / b.measured
            k = _pair_efficiency(b.roofline, q.roofline, gain)
            if k is None:
                continue
            for kind in (q.hardware.kind, "*"):
                found.setdefault((what_if, kind), []).append((k, gain, source, device))
    out: dict[tuple[str, str], LearntEfficiency] = {}
    for (what_if, kind), items in found.items():
        ks = [k for k, _, _, _ in items]
        out[what_if, kind] = LearntEfficiency(
            key=what_if,
            kind=kind,
            efficiency=statistics.median(ks),
            low=min(ks),
            high=max(ks),
            gain=statistics.median(g for _, g, _, _ in items),
            pairs=len(items),
            devices=len({d for _, _, _, d in items}),
            sources=tuple(sorted({s for _, _, s, _ in items})),
            relative_to="16-bit" if LEARNT_PAIRS[what_if][1] in ("F16", "BF16") else LEARNT_PAIRS[what_if][1],
        )
    return out


@functools.cache
def _matrix() -> dict[str, dict[str, dict[str, Any]]]:
    text = resources.files("advisor.catalog").joinpath("data", "quant_support.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def _entry(runtime: str | None, method: str) -> dict[str, Any]:
    return _matrix().get(runtime or "", {}).get(method, {}) if runtime else {}


def _figure(value: Any, key: str) -> float | None:
    if isinstance(value, dict):
        value = value.get(key)
    return float(value) if isinstance(value, int | float) else None


@functools.cache
def kernel_efficiency(
    runtime: str | None, choice: QuantChoice, hardware_kind: str | None, bits: float | None = None
) -> KernelEfficiency | None:
    """``k`` of ``choice`` on ``runtime`` and this kind of hardware: learnt, documented or estimated
    (module docstring), with the documented cap. ``bits`` is the format's storage cost with its
    scales (the what-if spec's; the ladder's nominal bits without it). None when nothing is known."""
    bytes_ratio = _SIXTEEN_BIT / (bits or choice.bits)
    learnt_key = LEARNT_PAIRS.get(choice.key)
    if learnt_key is not None and runtime in learnt_key[2]:
        table = learnt_efficiencies()
        row = table.get((choice.key, hardware_kind or "*")) or table.get((choice.key, "*"))
        if row is not None:
            return KernelEfficiency(
                key=choice.key,
                efficiency=row.efficiency,
                basis="learnt",
                source=row.describe(),
                pairs=row.pairs,
                relative_to=row.relative_to,
            )
    entry = _entry(runtime, choice.method)
    documented = _figure(entry.get("documented_gain"), choice.key)
    if documented is not None and "documented_source" in entry:
        cap = choice.max_gain if choice.max_gain is not None and not choice.gain_estimated else None
        return KernelEfficiency(
            key=choice.key,
            efficiency=documented / bytes_ratio,
            basis="documented",
            source=str(entry["documented_source"]),
            cap=documented if cap is None else min(cap, documented),
            cap_source=str(entry["documented_source"]),
        )
    if choice.max_gain is None or choice.gain_source is None:
        return None
    basis: GainBasis = "estimate" if choice.gain_estimated else "documented"
    return KernelEfficiency(
        key=choice.key,
        efficiency=choice.max_gain / bytes_ratio,
        basis=basis,
        source=choice.gain_source,
        cap=choice.max_gain,
        cap_source=choice.gain_source,
    )


def current_efficiency(
    runtime: str | None, generation: str | None, quant: QuantSpec, hardware_kind: str | None
) -> KernelEfficiency | None:
    """``k`` of the run's own weights: 1 at 16 bits and more; else the runtime's 8-bit rung on this
    generation (what the run most likely serves: GGUF Q8_0, FP8, MLX 8-bit). None when unknown."""
    if quant.bits_per_weight >= 12:
        return KernelEfficiency(key="16-bit", efficiency=1.0, basis="documented", source="16-bit weights")
    rung = weight_quant_choice(runtime, generation, 8.0)
    if rung is None or rung.bits < 7:
        return None
    return kernel_efficiency(runtime, rung, hardware_kind)


@dataclass(frozen=True, slots=True)
class GainModel:
    """What :func:`decode_step_gain` needs for one proposal: the efficiency of the weights now and
    of the proposed ones (on one scale), the proposed format's efficiency and where it comes from,
    whether any part is an estimate, and the documented cap on the gain from the current weights."""

    k_now: float
    k_new: float
    efficiency: KernelEfficiency
    estimated: bool
    source: str
    cap: float | None
    cap_source: str | None


@functools.cache
def gain_model(
    runtime: str | None,
    generation: str | None,
    now: QuantSpec,
    choice: QuantChoice,
    hardware_kind: str | None,
    new_bits: float | None = None,
) -> GainModel | None:
    """The efficiencies for moving from ``now`` to ``choice`` on ``runtime``: both relative to
    16-bit weights, or (a pair learnt against the runtime's 8-bit rung, MLX 4-bit) both relative to
    that rung. From 16 bits the cap is the new format's documented figure; from 8 bits the ratio of
    the two figures when both are documented. None when an efficiency is unknown."""
    eff = kernel_efficiency(runtime, choice, hardware_kind, new_bits)
    if eff is None:
        return None
    from_sixteen = now.bits_per_weight >= 12
    rung = weight_quant_choice(runtime, generation, 8.0)
    base = kernel_efficiency(runtime, rung, hardware_kind) if rung is not None and rung.bits >= 7 else None
    if eff.relative_to != "16-bit":  # learnt over the 8-bit rung
        if from_sixteen:
            if base is None:
                return None
            k_now, k_new = 1.0, base.efficiency * eff.efficiency
            estimated = base.estimated
            source = f"{eff.source}; {rung.key if rung else '8-bit'} over 16-bit: {base.source}"
        else:
            k_now, k_new, estimated, source = 1.0, eff.efficiency, False, eff.source
        return GainModel(k_now, k_new, eff, estimated, source, None, None)
    current = base if not from_sixteen else current_efficiency(runtime, generation, now, hardware_kind)
    if current is None:
        return None
    if from_sixteen:
        return GainModel(1.0, eff.efficiency, eff, eff.estimated, eff.source, eff.cap, eff.cap_source)
    cap = eff.cap / current.cap if eff.cap is not None and current.cap is not None else None
    cap_source = (
        f"{eff.cap:g}x for {eff.key} / {current.cap:g}x for {current.key}: {eff.cap_source}; {current.cap_source}"
        if cap is not None
        else None
    )
    source = f"{eff.source}; the current {current.key} weights: {current.source}"
    return GainModel(
        current.efficiency, eff.efficiency, eff, eff.estimated or current.estimated, source, cap, cap_source
    )


def decode_step_gain(
    current: Roofline,
    model: ModelSpec,
    now: QuantSpec,
    new: QuantSpec,
    *,
    k_now: float,
    k_new: float,
    new_tflops: float | None,
) -> float:
    """``t_now / t_new`` for one decode step at the run's own concurrency and context (module
    docstring): ``t = max((W / k + c × kv) / BW, c × F / T)``, ``T`` the current matmul rate for
    the current weights and ``new_tflops`` for the new ones (the same rate for a weight-only format).
    Bandwidth, compute and KV come from ``current`` (TP-scaled as the physics scales them)."""
    bandwidth = current.mem_bandwidth_gb_s * 1e9
    streams = float(current.concurrency)
    kv = current.decode_kv_bytes_per_sequence or 0.0
    flops = decode_flops_per_token(model, current.decode_context_tokens)

    def step(quant: QuantSpec, k: float, tflops: float | None) -> float:
        memory = (weights_read_per_step(model, quant, streams) / k + streams * kv) / bandwidth
        compute = streams * flops / (tflops * 1e12) if tflops else 0.0
        return max(memory, compute)

    t_now = step(now, k_now, current.prefill_tflops)
    t_new = step(new, k_new, new_tflops)
    return t_now / t_new if t_new > 0 and math.isfinite(t_now / t_new) else 1.0


def prefill_step_gain(current: Roofline, new: Roofline, *, new_tflops: float | None) -> float | None:
    """Prefill time now ÷ with the new weights, at the physics' bound ``max(F / T, W / BW)``, the
    new weights' matmuls at ``new_tflops``: a weight-only format keeps the 16-bit rate, so a
    compute-bound prefill gains nothing from 16-bit weights (and loses from W8A8 ones); a W8A8
    format runs them at its 8-bit rate. None without a prompt or a rate."""
    if current.prefill_flops is None or not current.prompt_tokens or not current.prefill_tflops or not new_tflops:
        return None
    bandwidth = current.mem_bandwidth_gb_s * 1e9
    now = max(current.prefill_flops / (current.prefill_tflops * 1e12), current.weight_bytes / bandwidth)
    after = max(current.prefill_flops / (new_tflops * 1e12), new.weight_bytes / bandwidth)
    return now / after if after > 0 else None
