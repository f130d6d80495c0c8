"""What-if predictions for expected gains (DESIGN §6).

A gain is never "the ceiling of the new setup". It is the *measured* value scaled by the predicted
ratio between the changed setup and the current one, so the run's own inefficiency carries over
and systematic error cancels: measured 33.5 tok/s × (expected at fp8 / expected at bf16).
The ratio comes from the expectations function when there is one (it knows, for example, that
4-bit kernels reach a lower fraction of the ceiling) and from the physics ceilings otherwise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from advisor.catalog.capabilities import capability
from advisor.errors import AdvisorError
from advisor.physics import HardwareSpec, ModelSpec, QuantSpec, Roofline, analyse
from advisor.physics.parallel import Interconnect, interconnect_of
from advisor.physics.parallel import tp_efficiency as _tp_efficiency
from advisor.rules.context import TGI_WIGGLE_ROOM, RunContext, expectations_of, kv_pool_runtime, normalise_kv_dtype
from advisor.rules.memo import remember

__all__ = [
    "QUANT_FALLBACKS",
    "RUNTIME_PLATFORMS",
    "HardwareOption",
    "decode_ratio",
    "hardware_options",
    "platform_allows",
    "platform_family",
    "quant_spec",
    "reanalyse",
    "step_up",
    "tp_efficiency",
    "tp_interconnect",
]

#: ``isinstance(x, _NUMBER)``: a tuple, since ``int | float`` builds a Union on every call (hot paths).
_NUMBER = (int, float)

#: Used when the catalog cannot resolve a target format (bits from data/quantization.csv).
QUANT_FALLBACKS: dict[str, QuantSpec] = {
    "fp8": QuantSpec("fp8-e4m3", "FP8 E4M3", 8.0, "float"),
    "awq": QuantSpec("awq-int4-g128", "AWQ 4-bit (group size 128)", 4.15625, "int"),
    "q8_0": QuantSpec("gguf-q8_0", "GGUF Q8_0", 8.5, "gguf"),
    "q4_k_m": QuantSpec("gguf-q4_k_m", "GGUF Q4_K_M (mix)", 4.89, "gguf"),
    # TensorRT-LLM INT8 weight-only (W8A16): 8-bit weights, one FP16 scale per output channel.
    "int8": QuantSpec("int8-weight-only", "INT8 weight-only (W8A16)", 8.0, "int"),
    # NVFP4: FP4 (E2M1) with one FP8 scale per 16 weights (quantization.csv nvfp4).
    "nvfp4": QuantSpec("nvfp4", "NVFP4 (NVIDIA Blackwell FP4)", 4.5, "nv"),
    # mlx_lm.convert -q: group size 64 with an FP16 scale and bias per group (+0.5 bit per weight).
    "mlx8": QuantSpec("mlx-q8-g64", "MLX 8-bit (group size 64)", 8.5, "int"),
    "mlx4": QuantSpec("mlx-q4-g64", "MLX 4-bit (group size 64)", 4.5, "int"),
}


@dataclass(frozen=True, slots=True)
class HardwareOption:
    """Another device for the same model and quantization, with the predicted decode."""

    hardware: HardwareSpec
    decode_tok_s: float
    ratio: float
    roofline: Roofline

    def to_dict(self) -> dict[str, Any]:
        return {
            "hardware": self.hardware.id,
            "name": self.hardware.name,
            "mem_bandwidth_gb_s": self.hardware.mem_bandwidth_gb_s,
            "memory_gb": self.hardware.memory_gb,
            "decode_tok_s": round(self.decode_tok_s, 1),
            "ratio": round(self.ratio, 2),
        }


def tp_interconnect(ctx: RunContext) -> Interconnect:
    """The link this run's TP group talks over, from the catalog's capabilities (PCIe Gen4 for an
    uncatalogued device)."""
    cap = capability(ctx.hardware.id if ctx.hardware is not None else None)
    if cap is None:
        return interconnect_of("pcie", None)
    return interconnect_of(cap.tp_link, cap.tp_link_gb_s)


def tp_efficiency(ctx: RunContext) -> float:
    """Share of the ideal TP decode ceiling this run's group keeps (1.0 without TP), from
    :func:`advisor.physics.parallel.tp_efficiency` at the run's concurrency."""
    roof = ctx.roofline
    if roof is None or roof.tensor_parallel <= 1 or ctx.hardware is None or ctx.model is None or ctx.quant is None:
        return 1.0
    return _tp_efficiency(
        ctx.hardware,
        ctx.model,
        ctx.quant,
        tp=roof.tensor_parallel,
        concurrency=float(roof.concurrency),
        interconnect=tp_interconnect(ctx),
    )


def quant_spec(ctx: RunContext, key: str) -> QuantSpec:
    """A target weight format by fallback key (``fp8``, ``awq``, ``q8_0``, ``q4_k_m``), resolved
    through the catalog when it knows the name so custom entries win."""
    fallback = QUANT_FALLBACKS[key]
    catalog = ctx.catalog
    if catalog is not None:
        # Per catalog (frozen; one object per set of user entries) and key: asked on every run.
        found = _QUANT_SPECS.get((id(catalog), key))
        if found is not None and found[0] is catalog:
            return found[1]
        try:
            spec = catalog.resolve_quantization(fallback.id)
        except (AdvisorError, ValueError, KeyError, LookupError, TypeError):
            spec = None  # a catalog without the entry falls back to the shipped figures
        chosen = spec if isinstance(spec, QuantSpec) else fallback
        if len(_QUANT_SPECS) >= 64:
            _QUANT_SPECS.clear()
        _QUANT_SPECS[(id(catalog), key)] = (catalog, chosen)
        return chosen
    return fallback


#: :func:`quant_spec`'s answers by (catalog identity, key); each entry holds its catalog.
_QUANT_SPECS: dict[tuple[int, str], tuple[object, QuantSpec]] = {}


def reanalyse(
    ctx: RunContext,
    *,
    hardware: HardwareSpec | None = None,
    quant: QuantSpec | None = None,
    kv_cache_dtype: str | None = None,
    prompt_tokens: int | None = None,
    concurrency: int | None = None,
    gpu_memory_utilization: float | None = None,
    tensor_parallel: int | None = None,
    kv_depth_tokens: int | None = None,
    model: ModelSpec | None = None,
) -> Roofline | None:
    """The current run's roofline with some inputs changed; None without physics or when the
    changed setup is impossible."""
    base = ctx.roofline
    mdl = model or ctx.model
    if base is None or mdl is None:
        return None
    hw = hardware or ctx.hardware
    q = quant or ctx.quant
    if hw is None or q is None:
        return None
    prompt = base.prompt_tokens if prompt_tokens is None else prompt_tokens
    depth = base.kv_depth_tokens if kv_depth_tokens is None else kv_depth_tokens
    pool_runtime = kv_pool_runtime(ctx.runtime, ctx.engine)
    if gpu_memory_utilization is not None and pool_runtime == "tgi":
        # A proposed --cuda-memory-fraction is taken × TGI's wiggle room, like the run's own.
        gpu_memory_utilization = min(gpu_memory_utilization * TGI_WIGGLE_ROOM, 1.0)
    # Everything analyse() is given below follows from these: the base roofline's own inputs by
    # its identity (see _WHAT_IFS), the rest by value.
    key = (
        id(base), id(hw), id(mdl), id(q), prompt, depth, concurrency, tensor_parallel, kv_cache_dtype,
        gpu_memory_utilization, pool_runtime,
    )  # fmt: skip
    found = _WHAT_IFS.get(key)
    if found is not None:
        return found[1]
    new: Roofline | None
    try:
        new = analyse(
            hw,
            mdl,
            q,
            prompt_tokens=prompt,
            output_tokens=base.output_tokens,
            kv_depth_tokens=depth,
            concurrency=concurrency or base.concurrency,
            tensor_parallel=tensor_parallel or base.tensor_parallel,
            kv_cache_dtype=normalise_kv_dtype(kv_cache_dtype) if kv_cache_dtype else base.kv_cache_dtype,
            gpu_memory_utilization=gpu_memory_utilization or base.gpu_memory_utilization,
            runtime=pool_runtime,
        )
    except ValueError:
        new = None
    remember(_WHAT_IFS, key, ((base, hw, mdl, q), new), WHAT_IF_CACHE_SIZE)
    return new


#: What-if rooflines by the identity of the run's roofline and specs plus the changed inputs. The
#: physics memoises :func:`analyse` by value, but hashing its three specs costs more than the
#: lookup; the runs of one setup share these objects (the physics' and the catalog's caches), so
#: an identity key finds the same answer for a fraction of it. Each entry holds the objects whose
#: ids it uses, so no other object can take them while it lives. Bounded.
WHAT_IF_CACHE_SIZE = 8192
_WHAT_IFS: dict[tuple[Any, ...], tuple[tuple[object, ...], Roofline | None]] = {}


def clear_cache() -> None:
    """Forget the remembered what-if rooflines and target formats (tests compare cold and warm
    analyses)."""
    _WHAT_IFS.clear()
    _QUANT_SPECS.clear()


def _expected(
    ctx: RunContext,
    roofline: Roofline,
    hardware: HardwareSpec | None,
    metric: str,
    *,
    quant: QuantSpec | None = None,
    model: ModelSpec | None = None,
) -> float | None:
    fn = ctx.expectations_fn
    hw = hardware or ctx.hardware
    if fn is None or hw is None:
        return None
    try:
        # The specs let a fitted model see what changed (another device, format or model).
        exp = expectations_of(
            fn,
            roofline,
            runtime=ctx.runtime or "other",
            hardware=hw,
            model=model or ctx.model,
            quant=quant or ctx.quant,
        )
    except (ValueError, KeyError, LookupError, TypeError, ArithmeticError):
        return None
    return _expected_value(exp, metric)


def _expected_value(exp: object, metric: str) -> float | None:
    band = getattr(exp, metric, None)
    value = getattr(band, "expected", None) if band is not None else None
    return float(value) if isinstance(value, _NUMBER) and value > 0 else None


def _ratio(
    ctx: RunContext,
    new: Roofline,
    metric: str,
    ceiling: str,
    *,
    hardware: HardwareSpec | None,
    quant: QuantSpec | None,
    model: ModelSpec | None,
) -> float | None:
    """Expected ``metric`` of ``new`` ÷ that of the current setup; the ceilings' ratio when the
    expectation function cannot answer."""
    cur = ctx.roofline
    if cur is None or getattr(cur, ceiling) is None or getattr(new, ceiling) is None:
        return None
    # The current setup's expectation is the context's own (same function, same inputs).
    a = _expected_value(ctx.expectations, metric) if ctx.expectations is not None else _expected(ctx, cur, None, metric)
    b = _expected(ctx, new, hardware, metric, quant=quant, model=model)
    if a and b:
        return b / a
    return float(getattr(new, ceiling) / getattr(cur, ceiling))


def decode_ratio(
    ctx: RunContext,
    new: Roofline,
    *,
    hardware: HardwareSpec | None = None,
    quant: QuantSpec | None = None,
    model: ModelSpec | None = None,
) -> float | None:
    """Predicted per-stream decode of ``new`` ÷ that of the current setup (pass what changed)."""
    return _ratio(ctx, new, "decode_tok_s", "decode_ceiling_batch_tok_s", hardware=hardware, quant=quant, model=model)


def platform_family(hw: HardwareSpec) -> str:
    """``nvidia``, ``amd``, ``apple``, ``cpu``, ``intel``, ``google``, ``aws`` …: the platform a
    device belongs to (Apple silicon and CPUs by kind, the rest by vendor). A Mac's CPU cores are
    Apple's platform, not a CPU an x86 desktop could move to."""
    if hw.kind.startswith("apple") or hw.vendor.lower() == "apple":
        return "apple"
    if hw.kind == "cpu":
        return "cpu"
    return hw.vendor.lower()


#: Platforms each runtime serves on (its install docs); absent = any.
RUNTIME_PLATFORMS: dict[str, tuple[str, ...]] = {
    "trtllm": ("nvidia",),
    "mlx": ("apple",),
    "vllm": ("nvidia", "amd", "intel", "google", "aws", "cpu"),
    "sglang": ("nvidia", "amd"),
    "tgi": ("nvidia", "amd", "intel"),
}


def platform_allows(current: HardwareSpec, candidate: HardwareSpec, runtime: str | None) -> bool:
    """Whether ``candidate`` is a step the user of ``current`` with ``runtime`` could take: the
    same platform family (a CPU run may move to any GPU), on a platform the runtime supports."""
    here, there = platform_family(current), platform_family(candidate)
    allowed = RUNTIME_PLATFORMS.get(runtime or "")
    if allowed is not None and there not in allowed:
        return False
    if here == "cpu":
        return there == "cpu" or candidate.kind == "gpu"
    return there == here or step_up(current, candidate)


#: Form factors that only fit a data-centre server (hardware.csv names: "H100 SXM5", "MI300X (…; OAM)",
#: "GH200 Grace Hopper Superchip", "GB200 NVL72").
_SERVER_MODULE = re.compile(r"\bSXM\d?\b|\bOAM\b|Superchip|NVL72")


def step_up(current: HardwareSpec, candidate: HardwareSpec) -> bool:
    """A named step up off the platform: a GPU with at least the current device's memory and twice
    its bandwidth, never a 24 GB A10 for an M2 Ultra's 192 GB. A server module (SXM, OAM, a
    superchip: hardware.csv names) needs a data-centre server, so it is a step only from a
    data-centre device (a module or an HBM card), never from a Mac Studio or a desktop card."""
    if candidate.kind != "gpu" or current.memory_gb is None or candidate.memory_gb is None:
        return False
    if _SERVER_MODULE.search(candidate.name) and not (_SERVER_MODULE.search(current.name) or "HBM" in current.name):
        return False
    return candidate.memory_gb >= current.memory_gb and candidate.mem_bandwidth_gb_s >= 2 * current.mem_bandwidth_gb_s


def hardware_options(
    ctx: RunContext,
    *,
    min_ratio: float = 1.3,
    limit: int = 3,
    vendors: tuple[str, ...] | None = None,
) -> list[HardwareOption]:
    """Catalog devices on which this model and quantization fit (at the run's tensor parallelism)
    and decode at least ``min_ratio`` × faster than now, the smallest step up first.

    Ranked by the cheap ceiling ratio; only the kept options are re-scored with the expectations
    function. Only options the user could take are offered (:func:`platform_allows`): the same
    platform family (an M2 Max user is offered Apple silicon, not an NVIDIA A10 or an Intel Arc),
    the runtime's own platforms (TensorRT-LLM: NVIDIA; MLX: Apple), for a CPU run any GPU, and
    otherwise only a named step up (:func:`step_up`), listed after the same-family options.
    """
    decode = ctx.measured.decode_tok_s
    cur = ctx.roofline
    if ctx.catalog is None or ctx.hardware is None or cur is None or decode is None:
        return []
    try:
        devices = list(ctx.catalog.list_hardware())
    except (AdvisorError, ValueError, KeyError, LookupError, TypeError, AttributeError):
        return []
    candidates: list[tuple[float, HardwareSpec, Roofline]] = []
    for hw in devices:
        if not isinstance(hw, HardwareSpec) or hw.id == ctx.hardware.id:
            continue
        if not platform_allows(ctx.hardware, hw, ctx.runtime):
            continue
        if vendors is not None and hw.vendor.lower() not in vendors:
            continue
        new = reanalyse(ctx, hardware=hw)
        if new is None or new.fits_in_memory is False:
            continue
        ratio = new.decode_ceiling_batch_tok_s / cur.decode_ceiling_batch_tok_s
        if ratio >= min_ratio:
            candidates.append((hw.mem_bandwidth_gb_s, hw, new))
    home = platform_family(ctx.hardware)
    candidates.sort(key=lambda c: (platform_family(c[1]) != home, c[0], c[1].id))
    out: list[HardwareOption] = []
    for _bw, hw, new in candidates:
        ratio = decode_ratio(ctx, new, hardware=hw) or 1.0
        if ratio >= min_ratio:
            out.append(HardwareOption(hw, decode * ratio, ratio, new))
        if len(out) >= limit:
            break
    return out
