"""Training observations: published measurements and the fleet's stored runs, each with its physics.

An :class:`Observation` is one measured value of one target (``decode_tok_s``, ``prefill_tok_s``,
``ttft_p50_ms``, ``ttft_p99_ms``, ``itl_p99_ms``) for one setup and workload, together with the
roofline of exactly that workload. The fitted model learns ``log(measured / reference)``, where the
reference is the physics bound of the target (:func:`reference`).

Two sources:

* :func:`public_observations`: rows of the shipped ``data/public_runs.csv`` (see
  ``data/README.md`` and ``data/public_runs_sources.md``). How each source's columns become a
  setup, a workload and a measured value is documented in :mod:`advisor.ml.prior`, whose
  calibration runs on the same observations.
* :func:`fleet_observations`: :class:`FleetCell` rows, the fleet's runs aggregated in SQL per
  setup and workload (the domain service runs the query; this module stays free of the database).

Only :mod:`advisor.physics` and :mod:`advisor.catalog` are imported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from advisor.catalog import Catalog

import csv
import functools
import io
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from importlib import resources
from typing import Any, Literal

from advisor.physics import HardwareSpec, ModelSpec, QuantSpec, Roofline, analyse

__all__ = [
    "LATENCY_TARGETS",
    "RATE_TARGETS",
    "TARGETS",
    "FleetCell",
    "Observation",
    "PublicObservation",
    "canonical_runtime",
    "catalog_hardware_lookup",
    "catalog_model_shape",
    "fleet_observations",
    "hardware_group",
    "iter_fleet_observations",
    "load_public_rows",
    "observations_from_public",
    "public_dataset",
    "public_observations",
    "reference",
]

#: Rates (tok/s): the reference is the physics ceiling, measured ÷ ceiling ≤ 1 in principle.
RATE_TARGETS: tuple[str, ...] = ("decode_tok_s", "prefill_tok_s")
#: Latencies (ms): the reference is the physics floor, measured ÷ floor ≥ 1 in principle.
LATENCY_TARGETS: tuple[str, ...] = ("ttft_p50_ms", "ttft_p99_ms", "itl_p99_ms")
TARGETS: tuple[str, ...] = RATE_TARGETS + LATENCY_TARGETS

Origin = Literal["public", "fleet"]


def reference(target: str, roofline: Roofline) -> float | None:
    """The physics bound a target is measured against (None when the physics has none).

    ``decode_tok_s``: per-stream decode ceiling at the roofline's concurrency;
    ``prefill_tok_s``: prefill ceiling for the prompt; TTFT: the TTFT floor (needs a prompt);
    ``itl_p99_ms``: the ITL floor.
    """
    if target == "decode_tok_s":
        return roofline.decode_ceiling_batch_tok_s
    if target == "prefill_tok_s":
        return roofline.prefill_ceiling_tok_s
    if target in ("ttft_p50_ms", "ttft_p99_ms"):
        return roofline.ttft_floor_ms
    if target == "itl_p99_ms":
        return roofline.itl_floor_ms
    raise KeyError(target)


@dataclass(frozen=True, slots=True)
class Observation:
    """One measured value of one target, with the setup and the physics of its workload.

    ``hardware_group`` is what grouped cross-validation holds out ("hardware it never saw"):
    the catalog id when the device resolves, else its normalised name. ``source`` is the
    publication (``source_id``) or the fleet deployment. ``runs`` is how many runs stand behind
    the value (fleet cells average several).
    """

    target: str
    runtime: str
    hardware: HardwareSpec
    model: ModelSpec
    quant: QuantSpec
    roofline: Roofline
    measured: float
    source: str
    hardware_group: str
    origin: Origin
    runs: int = 1

    @property
    def log_ratio(self) -> float | None:
        """``log(measured / reference)``, the learning target; None when either is unusable."""
        ref = reference(self.target, self.roofline)
        if ref is None or not (ref > 0 and math.isfinite(ref)):
            return None
        if not (self.measured > 0 and math.isfinite(self.measured)):
            return None
        return math.log(self.measured / ref)


# ------------------------------------------------------------------ published measurements

_DATA_PACKAGE = "advisor.ml"


def load_public_rows() -> list[dict[str, str]]:
    """The rows of the shipped ``data/public_runs.csv`` (read from package data)."""
    text = resources.files(_DATA_PACKAGE).joinpath("data/public_runs.csv").read_text(encoding="utf-8")
    return list(csv.DictReader(io.StringIO(text, newline="")))


def prior_family(runtime: str) -> str | None:
    """The physics prior's calibration family of a ``public_runs.csv`` runtime; None = skipped.

    ik_llama.cpp is a fork with its own kernels and TensorRT-LLM rows are offline aggregates over
    an unknown batch: neither gives a per-sequence rate of a runtime advisor names.
    """
    text = runtime.lower()
    if text.startswith("ik_llama") or "tensorrt-llm" in text:
        return None
    if "llama.cpp" in text:
        return "llamacpp"
    if "mlx" in text:
        return "mlx"
    if any(name in text for name in ("sglang", "vllm", "nim")):
        return "server"
    return None


def canonical_runtime(runtime: str) -> str | None:
    """A ``public_runs.csv`` runtime as a canonical runtime name (None = skipped).

    NIM serves Llama 3.3 70B on H100 with its TensorRT-LLM backend; LM Studio runs GGUF files on
    llama.cpp and MLX models on MLX.
    """
    family = prior_family(runtime)
    if family is None:
        return None
    text = runtime.lower()
    if family == "server":
        return "sglang" if "sglang" in text else "vllm" if "vllm" in text else "trtllm"
    return family


def hardware_kind(name: str) -> str:
    """``cpu``, ``apple_soc`` or ``gpu`` from a ``public_runs.csv`` hardware name."""
    # "AMD Ryzen 9 7950X (CPU)", "Apple M2 Max (CPU only, ...)"; not "(16-core CPU / 40-core GPU)".
    if re.search(r"\(CPU\b", name):
        return "cpu"
    if name.lower().startswith("apple"):
        return "apple_soc"
    return "gpu"


def _vendor_of(name: str) -> str:
    lowered = name.lower()
    if lowered.startswith("apple"):
        return "Apple"
    if "amd" in lowered or "ryzen" in lowered or "radeon" in lowered:
        return "AMD"
    if "intel" in lowered or "xeon" in lowered:
        return "Intel"
    return "NVIDIA"


def hardware_group(name: str, lookup: Callable[[str], HardwareSpec | None] | None = None) -> str:
    """The device a hardware name means, for grouping: a catalog id when ``lookup`` resolves it
    (``"4x A100 SXM4 80GB"`` → ``nvidia-a100-80gb-sxm``), else the lower-cased name without the
    GPU count and parentheses."""
    base = re.sub(r"^\d+x\s+", "", name.strip())
    bare = re.sub(r"\s*\(.*\)", "", base).strip()
    if lookup is not None:
        candidates = [base, bare]
        if "sxm assumed" in base.lower():
            candidates.append(f"{bare} SXM")
        for candidate in candidates:
            spec = lookup(candidate)
            if spec is not None:
                return spec.id
    return bare.lower()


def catalog_hardware_lookup(catalog: Catalog) -> Callable[[str], HardwareSpec | None]:
    """``name → HardwareSpec | None`` through ``catalog.resolve_hardware`` (never raises)."""
    from advisor.errors import AdvisorError

    @functools.cache
    def lookup(name: str) -> HardwareSpec | None:
        try:
            spec = catalog.resolve_hardware(name)
        except (AdvisorError, ValueError, KeyError, LookupError, TypeError):
            return None
        return spec if isinstance(spec, HardwareSpec) else None

    return lookup


#: ``public_runs.csv`` model names the catalog does not carry: same-architecture catalog entries.
MODEL_STAND_INS: dict[str, str] = {
    "Qwen3-Coder-30B-A3B-Instruct": "qwen3-30b-a3b",
    "Qwen2.5-Coder-7B": "qwen2.5-7b",
    "gemma-3-4b-it (QAT)": "gemma-3-4b",
    "Wayfarer Large 70B (Llama 3.3 based)": "llama-3.3-70b",
    "Mistral Small 3 24B": "mistral-small-24b",
}
#: Shapes from the models' config.json (Llama 2 7B: MHA 32 x 32 x 128; Mistral-Nemo 12B: 40
#: layers, 8 KV heads of 128).
MODEL_SHAPES: dict[str, ModelSpec] = {
    "Llama 2 7B": ModelSpec("llama-2-7b", 6.74, 6.74, 32, 4096, 32, 32, 128, attention="mha"),
    "Wayfarer 12B (Mistral-Nemo based)": ModelSpec("mistral-nemo-12b", 12.2, 12.2, 40, 5120, 32, 8, 128),
}


def catalog_model_shape(catalog: Catalog) -> Callable[[str], ModelSpec | None]:
    """``public_runs.csv`` model name → a spec with layer/head shapes (None: counts only)."""
    from advisor.errors import AdvisorError

    @functools.cache
    def model_shape(name: str) -> ModelSpec | None:
        if name in MODEL_SHAPES:
            return MODEL_SHAPES[name]
        try:
            spec, _ = catalog.resolve_model(MODEL_STAND_INS.get(name, name))
        except (AdvisorError, ValueError, KeyError, LookupError, TypeError):
            return None
        return spec if isinstance(spec, ModelSpec) else None

    return model_shape


@dataclass(frozen=True, slots=True)
class PublicObservation:
    """A decode or prefill measurement from one ``public_runs.csv`` row, with its physics.

    ``family`` and ``kind`` are the physics prior's calibration cell; ``runtime`` the canonical
    runtime the fitted model sees.
    """

    phase: Literal["decode", "prefill"]
    family: str
    runtime: str
    kind: str
    hardware: HardwareSpec
    model: ModelSpec
    quant: QuantSpec
    roofline: Roofline
    measured: float
    source: str
    hardware_name: str
    #: Measured at an unknown batch (a request-rate benchmark): the batch-1 roofline is the wrong
    #: ceiling, so the efficiency is only a lower bound of the batch-1 efficiency.
    batch_unknown: bool = False

    @property
    def efficiency(self) -> float:
        """Measured ÷ ceiling (decode at the batch, prefill for the prompt)."""
        ceiling = (
            self.roofline.decode_ceiling_batch_tok_s if self.phase == "decode" else self.roofline.prefill_ceiling_tok_s
        )
        assert ceiling is not None  # analyse always gives a prefill ceiling
        return self.measured / ceiling


def _num(value: str | None) -> float | None:
    return float(value) if value not in (None, "") else None


def _catalog_fp16(hw: HardwareSpec) -> float | None:
    """The catalog's 16-bit dense figure for a device (fp16, else bf16), None without one."""
    return hw.fp16_tflops or hw.bf16_tflops


def _quant_family(name: str) -> str:
    if name.startswith("MLX"):
        return "custom"
    if name in ("F16", "BF16", "FP8"):
        return "float"
    if name == "FP4":
        return "nv"
    if name == "MXFP4":
        return "mx"
    return "gguf"


@dataclass(frozen=True, slots=True)
class _RowSetup:
    family: str
    runtime: str
    kind: str
    hardware: HardwareSpec
    model: ModelSpec
    quant: QuantSpec
    source: str
    hardware_name: str

    def observe(
        self,
        phase: Literal["decode", "prefill"],
        measured: float,
        args: dict[str, Any],
        *,
        batch_unknown: bool = False,
    ) -> PublicObservation:
        return PublicObservation(
            batch_unknown=batch_unknown,
            phase=phase,
            family=self.family,
            runtime=self.runtime,
            kind=self.kind,
            hardware=self.hardware,
            model=self.model,
            quant=self.quant,
            roofline=analyse(self.hardware, self.model, self.quant, **args),
            measured=measured,
            source=self.source,
            hardware_name=self.hardware_name,
        )


def public_observations(
    rows: Iterable[Mapping[str, str]],
    model_shape: Callable[[str], ModelSpec | None],
    hardware_lookup: Callable[[str], HardwareSpec | None] | None = None,
) -> Iterator[PublicObservation]:
    """Decode and prefill observations from ``public_runs.csv`` rows (see :mod:`advisor.ml.prior`
    for what each source contributes and what is skipped).

    The hardware figures come from the row itself (bandwidth, peak FP16 TFLOPS; 8-bit rate = 2 ×
    FP16 for FP8/FP4 rows); ``hardware_lookup`` only supplies the vendor. ``model_shape`` maps the
    CSV's model name to layer/head shapes so KV reads count.
    """
    for row in rows:
        family = prior_family(row["runtime"])
        runtime = canonical_runtime(row["runtime"])
        if family is None or runtime is None:
            continue
        if family == "llamacpp" and re.match(r"\d+x ", row["hardware"]):
            # llama.cpp layer split runs one GPU at a time in decode but pipelines long prompts
            # across GPUs: neither one GPU nor all of them is the right ceiling.
            continue
        kind = hardware_kind(row["hardware"])
        known = hardware_lookup(re.sub(r"^\d+x\s+", "", row["hardware"])) if hardware_lookup else None
        # A row without a figure takes the catalog's (hardware_compute.csv), so training sees
        # the same compute a prediction for that device uses.
        fp16 = _num(row["peak_fp16_tflops"]) or (_catalog_fp16(known) if known is not None else None)
        eight_bit = fp16 * 2 if fp16 and row["quant"] in ("FP8", "FP4") else None
        vendor = known.vendor if known is not None else _vendor_of(row["hardware"])
        bandwidth = float(row["mem_bandwidth_gb_s"])
        if known is not None and known.kind == kind == "cpu" and known.mem_bandwidth_gb_s < bandwidth:
            # The row states the SoC's bandwidth; the catalog's CPU row what its CPU cores can
            # draw (the M2 Max's: half the SoC's, hardware_added.csv).
            bandwidth = known.mem_bandwidth_gb_s
        hw = HardwareSpec(
            known.id if known is not None else "row",
            row["hardware"],
            kind,
            vendor,
            bandwidth,
            known.memory_gb if known is not None else None,
            fp16,
            fp16,
            eight_bit,
            sm_count=known.sm_count if known is not None else None,
            boost_clock_mhz=known.boost_clock_mhz if known is not None else None,
        )
        tp_match = re.search(r"TP(\d+)", row["hardware"])
        tp = int(tp_match.group(1)) if tp_match else 1
        params, active = float(row["params_b"]), float(row["active_params_b"])
        shape = model_shape(row["model"])
        model = (
            replace(shape, params_b=params, active_params_b=active)
            if shape
            else ModelSpec(row["model"], params, active)
        )
        q = row["quant"]
        quant = QuantSpec(q, q, float(row["bits_per_weight"]), _quant_family(q))
        if q == "MXFP4" and family == "llamacpp" and model.expert_split() is not None:
            # llama.cpp's MXFP4_MOE files: experts MXFP4, every other tensor Q8_0 (the catalog's
            # gguf-mxfp4_moe); the row's bits are the file's average, which under-counts what a
            # token reads (the attention and output tensors are all read, the experts k of E).
            quant = QuantSpec(q, q, 4.25, "mx", dense_bits_per_weight=8.5)
        setup = _RowSetup(family, runtime, kind, hw, model, quant, row["source_id"], row["hardware"])
        notes = row["notes"]
        depth_match = re.search(r"kv_depth=(\d+)", notes)
        depth = int(depth_match.group(1)) if depth_match else 0
        batch = int(float(row["batch_size"])) if row["batch_size"] else 1
        prompt = int(float(row["prompt_tokens"])) if row["prompt_tokens"] else None
        output = int(float(row["output_tokens"])) if row["output_tokens"] else None
        source = row["source_id"]
        decode = _num(row["decode_tok_s"])
        prefill = _num(row["prefill_tok_s"])

        measured_decode: float | None = None
        batch_unknown = False
        decode_args: dict[str, Any] = {}
        if source == "LCPP_BENCH_DGXSPARK" and "batched-bench" in notes and decode:
            measured_decode = decode / batch  # aggregate over B sequences → per sequence
            decode_args = {"prompt_tokens": prompt, "output_tokens": output, "concurrency": batch}
        elif source == "NIM_L33_70B" and batch <= 50 and row["itl_ms"]:
            # Beyond ~50 concurrent requests NIM's ITL includes queueing for a saturated batch.
            measured_decode = 1000.0 / float(row["itl_ms"])
            decode_args = {
                "prompt_tokens": prompt,
                "output_tokens": output,
                "concurrency": batch,
                "tensor_parallel": tp,
            }
        elif source == "SGLANG_V030":
            tpot = re.search(r"TPOT=([\d.]+)", notes)
            if tpot:
                measured_decode = 1000.0 / float(tpot.group(1))
                decode_args = {"tensor_parallel": tp}  # ShareGPT: batch and context unknown
                batch_unknown = True
        elif decode and batch == 1 and source not in ("NIM_L33_70B", "TRTLLM_PERF"):
            measured_decode = decode
            # llama-bench tgN generates from an empty prompt (prompt 0, not unknown); LM Studio
            # rows do not say (None).
            decode_args = {
                "prompt_tokens": 0 if source != "MLX_NEXVERIDIAN" else None,
                "output_tokens": output,
                "kv_depth_tokens": depth,
            }
        if measured_decode:
            yield setup.observe("decode", measured_decode, decode_args, batch_unknown=batch_unknown)

        measured_prefill: float | None = None
        prefill_args: dict[str, Any] = {}
        if prefill and prompt and "anomalous" not in notes:
            measured_prefill = prefill
            prefill_args = {"prompt_tokens": prompt, "kv_depth_tokens": depth}
        elif source == "NIM_L33_70B" and batch == 1 and prompt and row["ttft_ms"]:
            measured_prefill = prompt / (float(row["ttft_ms"]) / 1000.0)
            prefill_args = {"prompt_tokens": prompt, "tensor_parallel": tp}
        if measured_prefill:
            yield setup.observe("prefill", measured_prefill, prefill_args)


def observations_from_public(
    items: Iterable[PublicObservation], lookup: Callable[[str], HardwareSpec | None] | None = None
) -> list[Observation]:
    """:class:`PublicObservation` → :class:`Observation` (decode → ``decode_tok_s``, prefill →
    ``prefill_tok_s``), grouped by device.

    A decode rate measured at an unknown batch (``batch_unknown``: SGLang's request-rate runs) is
    not a training observation: a per-stream rate has no ceiling without its batch, and taken at
    batch 1 it charges the engine's per-step overhead with what the unknown batch cost (the rule
    :func:`iter_fleet_observations` applies to fleet runs, whose decode counts only where the
    concurrency is known). The physics prior still uses such rows as lower bounds
    (:func:`advisor.ml.prior.calibrate`, from :func:`public_observations`)."""
    out: list[Observation] = []
    for item in items:
        if item.batch_unknown and item.phase == "decode":
            continue
        out.append(
            Observation(
                target="decode_tok_s" if item.phase == "decode" else "prefill_tok_s",
                runtime=item.runtime,
                hardware=item.hardware,
                model=item.model,
                quant=item.quant,
                roofline=item.roofline,
                measured=item.measured,
                source=item.source,
                hardware_group=hardware_group(item.hardware_name, lookup),
                origin="public",
            )
        )
    return out


# ------------------------------------------------------------------ the fleet's runs


@dataclass(frozen=True, slots=True)
class FleetCell:
    """The fleet's runs of one setup and workload, averaged in SQL (one row of the fit query).

    Metric fields are means over the runs that report them (None when none does); ``concurrency``
    is the effective number of sequences in flight (the server's running mean when scraped, else
    the offered concurrency).
    """

    runtime: str | None
    hardware_id: str
    model_id: str
    quantization_id: str
    tensor_parallel: int | None
    kv_cache_dtype: str | None
    prompt_tokens: float | None
    output_tokens: float | None
    kv_depth_tokens: float | None
    concurrency: float | None
    source: str
    runs: int
    decode_tok_s: float | None = None
    prefill_tok_s: float | None = None
    ttft_p50_ms: float | None = None
    ttft_p99_ms: float | None = None
    itl_p99_ms: float | None = None


def _kv_dtype(catalog: Catalog, value: str | None) -> str:
    try:
        resolved = catalog.resolve_kv_cache_dtype(value)
    except Exception:  # an unknown spelling counts as the model's 16-bit dtype, as in the rules
        return "auto"
    return resolved if isinstance(resolved, str) else "auto"


def iter_fleet_observations(
    cells: Iterable[FleetCell], catalog: Catalog, *, on_skip: Callable[[FleetCell], None] | None = None
) -> Iterator[Observation]:
    """Observations from fleet cells, one cell at a time (see :func:`fleet_observations`).

    Specs resolve once per distinct id; rooflines are cached for the most recent distinct inputs
    only, so memory stays flat however many distinct workloads a fleet has.
    """

    @functools.cache
    def specs(hw_id: str, model_id: str, quant_id: str) -> tuple[HardwareSpec, ModelSpec, QuantSpec] | None:
        try:
            hw = catalog.resolve_hardware(hw_id)
            model, _ = catalog.resolve_model(model_id)
            quant = catalog.resolve_quantization(quant_id)
        except Exception:  # a catalog entry removed since: the cell cannot be used
            return None
        return hw, model, quant

    @functools.lru_cache(maxsize=4096)
    def roofline(key: tuple[Any, ...]) -> Roofline | None:
        hw_id, model_id, quant_id, prompt, output, depth, concurrency, tp, kv = key
        found = specs(hw_id, model_id, quant_id)
        if found is None:
            return None
        try:
            return analyse(
                *found,
                prompt_tokens=prompt,
                output_tokens=output,
                kv_depth_tokens=depth,
                concurrency=concurrency,
                tensor_parallel=tp,
                kv_cache_dtype=kv,
            )
        except ValueError:
            return None

    for cell in cells:
        kv = _kv_dtype(catalog, cell.kv_cache_dtype)
        key = (
            cell.hardware_id,
            cell.model_id,
            cell.quantization_id,
            round(cell.prompt_tokens) if cell.prompt_tokens is not None else None,
            round(cell.output_tokens) if cell.output_tokens is not None else None,
            round(cell.kv_depth_tokens or 0),
            max(1, round(cell.concurrency or 1)),
            max(1, cell.tensor_parallel or 1),
            kv,
        )
        roof = roofline(key)
        found = specs(cell.hardware_id, cell.model_id, cell.quantization_id)
        if roof is None or found is None:
            if on_skip is not None:
                on_skip(cell)
            continue
        hw, model, quant = found
        for target in TARGETS:
            value = getattr(cell, target)
            if value is None or not value > 0:
                continue
            yield Observation(
                target=target,
                runtime=cell.runtime or "other",
                hardware=hw,
                model=model,
                quant=quant,
                roofline=roof,
                measured=float(value),
                source=cell.source,
                hardware_group=hw.id,
                origin="fleet",
                runs=cell.runs,
            )


def fleet_observations(cells: Iterable[FleetCell], catalog: Catalog) -> tuple[list[Observation], int]:
    """Observations from fleet cells and how many cells were skipped.

    A cell is skipped when its hardware, model or quantization id no longer resolves, or the
    physics rejects the setup. Every target the cell reports becomes one observation sharing the
    cell's roofline.
    """
    skipped: list[FleetCell] = []
    observations = list(iter_fleet_observations(cells, catalog, on_skip=skipped.append))
    return observations, len(skipped)


def public_dataset(catalog: Catalog) -> list[Observation]:
    """Every observation of the shipped published runs, shaped and grouped through ``catalog``."""
    lookup = catalog_hardware_lookup(catalog)
    return observations_from_public(
        public_observations(load_public_rows(), catalog_model_shape(catalog), lookup), lookup
    )
