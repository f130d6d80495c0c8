"""What each device runs natively and which quantization each runtime runs on it.

Two data files, each row with its source:

* ``data/capabilities.csv``, keyed by hardware id: architecture generation (Turing … Blackwell,
  CDNA2-4, RDNA3, Apple M1-M4, the CPU's ISA), native formats (FP8, FP4, NVFP4, MXFP4, INT8 tensor
  units), the link a tensor-parallel group talks over (``tp_link`` and its per-direction GB/s) and
  the memory the device reads (``memory``: unified, dedicated or host).
* ``data/quant_support.toml``: runtime × method × generation → ``w8a8``, ``weight-only`` or
  ``none``, with the runtime's documented speed-up where it gives one.

:func:`weight_quant_choice` picks the format a runtime actually runs on a generation for a target
bit width, so advice never names a method that hardware cannot run (FP8 on an A10G in
TensorRT-LLM, for example).
"""

from __future__ import annotations

import csv
import functools
import tomllib
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal

__all__ = [
    "Capability",
    "QuantChoice",
    "Support",
    "capabilities",
    "capability",
    "gain_cap",
    "reported_memory_gib",
    "support",
    "support_source",
    "weight_quant_choice",
]

Support = Literal["w8a8", "weight-only", "none"]


@dataclass(frozen=True, slots=True)
class Capability:
    """One device's generation, native number formats and tensor-parallel link."""

    hardware_id: str
    generation: str
    compute_capability: str | None
    fp8: bool
    fp4: bool
    nvfp4: bool
    mxfp4: bool
    int8: bool
    isa: tuple[str, ...]
    tp_link: str
    tp_link_gb_s: float | None
    source: str
    #: ``unified`` (one memory pool the CPU and GPU share: Apple silicon, Strix Halo, DGX Spark GB10,
    #: Jetson), ``dedicated`` (the device's own HBM/GDDR) or ``host`` (a CPU's system memory);
    #: ``unknown`` when the row does not say.
    memory: str = "unknown"

    @property
    def unified_memory(self) -> bool:
        """The GPU reads the same memory as the CPU: there is no separate "system memory" to offload to."""
        return self.memory == "unified"

    @property
    def family(self) -> str:
        """``nvidia``, ``amd``, ``apple``, ``cpu`` or ``other``: the platform a user stays on."""
        prefix = self.hardware_id.split("-", 1)[0]
        return prefix if prefix in ("nvidia", "amd", "apple", "cpu") else "other"


@dataclass(frozen=True, slots=True)
class QuantChoice:
    """A weight format this runtime runs on this generation.

    ``key`` is the what-if key (:data:`advisor.rules.whatif.QUANT_FALLBACKS`), ``method`` the
    support-matrix method, ``how`` its mode, ``max_gain``/``gain_source`` the decode speed-up over
    16-bit weights the format reaches in practice and where that figure comes from (a published
    figure, or ``estimate: …``)."""

    key: str
    method: str
    how: Support
    bits: float
    max_gain: float | None
    gain_source: str | None
    source: str

    @property
    def gain_estimated(self) -> bool:
        """The gain is the advisor's estimate, not a figure the maintainers published."""
        return self.gain_source is not None and self.gain_source.startswith("estimate")


def _yes(value: str) -> bool:
    return value.strip().lower() == "yes"


@functools.cache
def capabilities() -> dict[str, Capability]:
    """Every row of ``capabilities.csv`` by hardware id."""
    text = resources.files("advisor.catalog").joinpath("data", "capabilities.csv").read_text(encoding="utf-8")
    out: dict[str, Capability] = {}
    for row in csv.DictReader(text.splitlines()):
        out[row["id"]] = Capability(
            hardware_id=row["id"],
            generation=row["generation"],
            compute_capability=row["compute_capability"] or None,
            fp8=_yes(row["fp8"]),
            fp4=_yes(row["fp4"]),
            nvfp4=_yes(row["nvfp4"]),
            mxfp4=_yes(row["mxfp4"]),
            int8=_yes(row["int8"]),
            isa=tuple(p for p in row["isa"].split(";") if p),
            tp_link=row["tp_link"] or "none",
            tp_link_gb_s=float(row["tp_link_gb_s"]) if row["tp_link_gb_s"] else None,
            source=row["source"],
            memory=(row.get("memory") or "").strip() or "unknown",
        )
    return out


def capability(hardware_id: str | None) -> Capability | None:
    """The catalogued capability of ``hardware_id`` (None for inline or unknown devices)."""
    return capabilities().get(hardware_id) if hardware_id else None


#: Total memory the driver reports (NVML, the ``nvidia-smi`` "Total" MiB), where it is less than the
#: nominal figure: GDDR cards with ECC on (the data-centre default) give up a share to it. What a
#: runtime reads when it sizes by VRAM: Ollama sums ``gpu.TotalMemory`` for its ``num_ctx`` tiers,
#: which ggml's CUDA backend takes from NVML (ggml_nvml_get_device_memory) or cudaMemGetInfo
#: (ollama v0.15.5 server/routes.go, ml/backend/ggml/ggml/src/ggml-cuda/ggml-cuda.cu). Each value
#: with the run that shows it (search, issues corpus, 2026-12-02).
REPORTED_MEMORY_MIB: dict[str, tuple[int, str]] = {
    "nvidia-a10g": (23028, "https://github.com/NVIDIA/DCGM/issues/232 (nvidia-smi: NVIDIA A10G ... / 23028MiB)"),
    "nvidia-a10": (23028, "https://github.com/mayooot/detect-gpu/issues/3 (NVML Total 24146608128 B on NVIDIA A10)"),
    "nvidia-l4": (23034, "https://github.com/modal-labs/modal-client/pull/2797 (nvidia-smi totals: L4 23034MiB)"),
    "nvidia-l40s": (46068, "https://github.com/modal-labs/modal-client/pull/2797 (nvidia-smi totals: L40S 46068MiB)"),
    "nvidia-t4": (15360, "https://github.com/modal-labs/modal-client/pull/2797 (nvidia-smi totals: T4 15360MiB)"),
}


def reported_memory_gib(hardware_id: str | None) -> float | None:
    """The GiB the driver reports for ``hardware_id`` (:data:`REPORTED_MEMORY_MIB`); None when the
    table has no figure (the caller then uses the catalog's nominal memory)."""
    row = REPORTED_MEMORY_MIB.get(hardware_id or "")
    return row[0] / 1024 if row is not None else None


@functools.cache
def _matrix() -> dict[str, dict[str, dict[str, Any]]]:
    text = resources.files("advisor.catalog").joinpath("data", "quant_support.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def _entry(runtime: str | None, method: str) -> dict[str, Any] | None:
    if runtime is None:
        return None
    return _matrix().get(runtime, {}).get(method)


def support(runtime: str | None, method: str, generation: str | None) -> Support | None:
    """How ``runtime`` runs ``method`` on ``generation``; None when the matrix does not say."""
    entry = _entry(runtime, method)
    if entry is None:
        return None
    if "any" in entry:
        value: Any = entry["any"]
    elif generation is None:
        return None
    else:
        value = entry.get("generations", {}).get(generation)
    return value if value in ("w8a8", "weight-only", "none") else None


def support_source(runtime: str | None, method: str) -> str | None:
    """Where the matrix row for ``runtime`` × ``method`` was checked."""
    entry = _entry(runtime, method)
    return str(entry["source"]) if entry is not None else None


#: Candidate methods per runtime and target bits, in order of preference: (method, what-if key, bits).
_LADDER: dict[str, dict[int, tuple[tuple[str, str, float], ...]]] = {
    "vllm": {8: (("fp8", "fp8", 8.0),), 4: (("nvfp4", "nvfp4", 4.5), ("awq", "awq", 4.0), ("gptq", "awq", 4.0))},
    "sglang": {8: (("fp8", "fp8", 8.0),), 4: (("awq", "awq", 4.0),)},
    "tgi": {8: (("fp8", "fp8", 8.0),), 4: (("awq", "awq", 4.0),)},
    "trtllm": {
        8: (("fp8", "fp8", 8.0), ("int8_weight_only", "int8", 8.0)),
        4: (("nvfp4", "nvfp4", 4.5), ("int4_awq", "awq", 4.0)),
    },
    "llamacpp": {8: (("gguf", "q8_0", 8.5),), 4: (("gguf", "q4_k_m", 4.89),)},
    "ollama": {8: (("gguf", "q8_0", 8.5),), 4: (("gguf", "q4_k_m", 4.89),)},
    "mlx": {8: (("mlx", "mlx8", 8.5),), 4: (("mlx", "mlx4", 4.5),)},
}


#: Methods proposed only where they run natively (``w8a8``: FP4 tensor cores, Blackwell). Elsewhere
#: vLLM runs NVFP4 weight-only through FP4 Marlin, the W4A16 path AWQ already takes with far more
#: checkpoints, so the ladder moves on to AWQ.
_NATIVE_ONLY = frozenset({"nvfp4"})


@functools.cache  # pure over the two data files (themselves cached); QuantChoice is frozen
def weight_quant_choice(runtime: str | None, generation: str | None, target_bits: float) -> QuantChoice | None:
    """The first method of the runtime's ladder at ``target_bits`` (8 or 4) that the matrix says
    runs on ``generation``. At 8 bits with none available the 4-bit rung is tried (Ampere on TGI
    gets AWQ). None when the runtime or generation is unknown or nothing runs."""
    ladder = _LADDER.get(runtime or "")
    if ladder is None:
        return None
    rungs = (8, 4) if target_bits >= 7 else (4,)
    for rung in rungs:
        for method, key, bits in ladder[rung]:
            how = support(runtime, method, generation)
            if how is None or how == "none" or (method in _NATIVE_ONLY and how != "w8a8"):
                continue
            entry = _entry(runtime, method) or {}
            gain = entry.get("max_gain")
            if isinstance(gain, dict):  # per rung (GGUF Q8_0 / Q4_K_M, MLX 8 / 4 bits)
                gain = gain.get(key)
            return QuantChoice(
                key=key,
                method=method,
                how=how,
                bits=bits,
                max_gain=float(gain) if isinstance(gain, int | float) else None,
                gain_source=str(entry["gain_source"]) if "gain_source" in entry else None,
                source=str(entry.get("source", "")),
            )
    return None


def gain_cap(
    runtime: str | None, generation: str | None, choice: QuantChoice, from_bits: float
) -> tuple[float, str] | None:
    """The most decode speed-up ``choice`` gives weights now ``from_bits`` wide, with its source.

    From 16-bit weights it is ``choice.max_gain``; from 8-bit weights, the 4-bit gain divided by the
    gain of the runtime's 8-bit rung on this generation (both over 16 bits). None when either figure
    is missing."""
    if choice.max_gain is None or choice.gain_source is None:
        return None
    if from_bits >= 12:
        return choice.max_gain, choice.gain_source
    base = weight_quant_choice(runtime, generation, 8.0)
    if base is None or base.bits < 7 or choice.bits >= 7 or base.max_gain is None or base.gain_source is None:
        return None
    ratio = f"{choice.max_gain:g}x for {choice.key} / {base.max_gain:g}x for {base.key}"
    same = base.gain_source == choice.gain_source
    source = f"{ratio}, {choice.gain_source}" if same else f"{ratio}: {choice.gain_source}; {base.gain_source}"
    return choice.max_gain / base.max_gain, source
