"""What-if predictions: physics ceilings plus the expectation (fitted model, or the physics prior)."""

from __future__ import annotations

from typing import Any

import msgspec
from sqlalchemy.ext.asyncio import AsyncSession

from advisor.canonical import CanonicalRun, Setup, Workload, validate_setup_fields, validate_workload
from advisor.catalog import Catalog
from advisor.domain.catalog.services import CatalogService
from advisor.domain.models.provider import expectations_fn_for
from advisor.domain.predictions.schemas import Band, HardwareRanking, PredictIn, PredictOut
from advisor.errors import InvalidInput
from advisor.ml.multi_device import expert_parallel, with_communication
from advisor.physics import HardwareSpec, ModelSpec, QuantSpec, Roofline, analyse
from advisor.rules.context import _memory_fraction, kv_pool_runtime
from advisor.rules.knobs import engine_config

__all__ = ["GPU_COUNTS", "PredictionService", "fewest_devices_that_fit", "predict", "rank_hardware"]

#: Device counts tried for "the fewest GPUs that fit" (the TP degrees engines support on a node).
GPU_COUNTS: tuple[int, ...] = (1, 2, 4, 8)
#: Kinds that scale out by tensor parallelism (Macs and CPU sockets are ranked one at a time).
_SCALE_OUT_KINDS = frozenset({"gpu", "accelerator"})


def _band(ceiling: float | None, band: Any) -> Band:
    if band is None:
        return Band(ceiling=ceiling, expected=None, low=None, high=None)
    return Band(ceiling=ceiling, expected=band.expected, low=band.low, high=band.high)


def _tail(floor: float | None, band: Any) -> Band | None:
    return _band(floor, band) if band is not None else None


def _int(value: float | None, default: int) -> int:
    return round(value) if value is not None else default


def _resolve(catalog: Catalog, setup: Setup) -> tuple[HardwareSpec, ModelSpec, QuantSpec, list[str]]:
    notes: list[str] = []
    if setup.hardware is None:
        raise InvalidInput("required: a catalog id, an alias or an inline spec", field="setup.hardware")
    if setup.model is None:
        raise InvalidInput("required: a catalog id, a Hugging Face repo id or an inline spec", field="setup.model")
    hw = catalog.resolve_hardware(setup.hardware, field_prefix="setup.hardware")
    model, implied = catalog.resolve_model(setup.model, field_prefix="setup.model")
    if setup.quantization is not None:
        quant = catalog.resolve_quantization(setup.quantization, field_prefix="setup.quantization")
    elif implied is not None:
        quant = implied
        notes.append(f"quantization {quant.id} implied by the model name")
    else:
        quant, note = default_quantization(catalog, model)
        notes.append(note)
    return hw, model, quant, notes


def default_quantization(catalog: Catalog, model: ModelSpec) -> tuple[QuantSpec, str]:
    """What a what-if that names no quantization assumes, and the note that says so: the model's
    own published checkpoint format where it is not 16-bit (gpt-oss's MXFP4 experts, DeepSeek-V3's
    FP8), else 16-bit weights."""
    checkpoint = catalog.checkpoint_quantization(model)
    if checkpoint is not None:
        return checkpoint, f"no quantization given: assumed {checkpoint.id}, the format of {model.id}'s own checkpoint"
    return catalog.resolve_quantization("bf16"), "no quantization given: assumed 16-bit weights (bf16)"


def _pool_semantics(hw: HardwareSpec, setup: Setup) -> tuple[str | None, float]:
    """Whose semantics size the KV pool and the memory fraction as that runtime means it, read
    from the setup's engine arguments the way an analysed run's are (:mod:`advisor.rules.context`):
    vLLM's ``--gpu-memory-utilization``, SGLang's ``--mem-fraction-static``, TGI's
    ``--cuda-memory-fraction`` × its wiggle room, TensorRT-LLM's share of what the weights leave."""
    engine = engine_config(CanonicalRun(setup=setup), hw)
    runtime = kv_pool_runtime(setup.runtime, engine)
    return runtime, _memory_fraction(engine, runtime)


def _roofline(hw: HardwareSpec, model: ModelSpec, quant: QuantSpec, setup: Setup, workload: Workload) -> Roofline:
    runtime, fraction = _pool_semantics(hw, setup)
    return analyse(
        hw,
        model,
        quant,
        prompt_tokens=_int(workload.prompt_tokens_mean, 512),
        output_tokens=_int(workload.output_tokens_mean, 128),
        kv_depth_tokens=_int(workload.kv_depth_tokens, 0),
        concurrency=max(1, _int(workload.concurrency, 1)),
        tensor_parallel=setup.tensor_parallel or setup.gpu_count or 1,
        kv_cache_dtype=setup.kv_cache_dtype or "auto",
        gpu_memory_utilization=fraction,
        runtime=runtime,
    )


def _interconnect(catalog: Catalog, hw: HardwareSpec) -> str | None:
    value = catalog.extra("hardware", hw.id).get("interconnect")
    return str(value) if value else None


def _expect(
    catalog: Catalog,
    expectations_fn: Any,
    roofline: Roofline,
    hw: HardwareSpec,
    model: ModelSpec,
    quant: QuantSpec,
    setup: Setup,
) -> tuple[Any, list[str]]:
    """The expectation for one device count: the function in force, plus the TP group's
    communication (:mod:`advisor.ml.multi_device`)."""
    exp = expectations_fn(roofline, runtime=setup.runtime, hardware_kind=hw.kind, hardware=hw, model=model, quant=quant)
    return with_communication(
        exp,
        roofline,
        model,
        interconnect=_interconnect(catalog, hw),
        expert_parallel=expert_parallel(setup.engine_args, model),
    )


def fewest_devices_that_fit(
    hw: HardwareSpec, model: ModelSpec, quant: QuantSpec, setup: Setup, workload: Workload
) -> int | None:
    """The smallest of :data:`GPU_COUNTS` whose TP group holds the weights and a KV pool (1 for
    kinds that do not scale out); None when none does or the memory is unknown."""
    counts = GPU_COUNTS if hw.kind in _SCALE_OUT_KINDS else (1,)
    for count in counts:
        # The same setup (KV-cache dtype, memory utilisation) on ``count`` devices.
        group = msgspec.structs.replace(setup, gpu_count=count, tensor_parallel=count)
        fits = _roofline(hw, model, quant, group, workload).fits_in_memory
        if fits is None:
            return None
        if fits:
            return count
    return None


def predict(catalog: Catalog, setup: Setup, workload: Workload, expectations_fn: Any) -> PredictOut:
    hw, model, quant, notes = _resolve(catalog, setup)
    roofline = _roofline(hw, model, quant, setup, workload)
    exp, tp_notes = _expect(catalog, expectations_fn, roofline, hw, model, quant, setup)
    notes.extend(tp_notes)
    if workload.prompt_tokens_mean is None:
        notes.append("no prompt length given: assumed 512 tokens")
    if roofline.prefill_tflops_estimated:
        notes.append(f"{hw.id} publishes no matrix TFLOPS: the prefill ceiling uses an estimate")
    decode = _band(roofline.decode_ceiling_batch_tok_s, exp.decode_tok_s)
    concurrency = roofline.concurrency
    throughput = Band(
        ceiling=roofline.decode_aggregate_ceiling_tok_s,
        expected=decode.expected * concurrency if decode.expected is not None else None,
        low=decode.low * concurrency if decode.low is not None else None,
        high=decode.high * concurrency if decode.high is not None else None,
    )
    return PredictOut(
        decode_tok_s=decode,
        prefill_tok_s=_band(roofline.prefill_ceiling_tok_s, exp.prefill_tok_s),
        ttft_ms=_band(roofline.ttft_floor_ms, exp.ttft_ms),
        itl_ms=_band(roofline.itl_floor_ms, exp.itl_ms),
        output_throughput_tok_s=throughput,
        weight_bytes=roofline.weight_bytes,
        kv_bytes_per_token=roofline.kv_bytes_per_token,
        kv_pool_tokens=roofline.kv_pool_tokens,
        max_concurrent_sequences=roofline.max_concurrent_sequences,
        fits_in_memory=roofline.fits_in_memory,
        bound={"prefill": roofline.prefill_bound, "decode": roofline.decode_bound},
        crossover_batch=roofline.crossover_batch,
        model_version=exp.model_version,
        expectation_source=exp.source,
        resolved={"hardware": hw.id, "model": model.id, "quantization": quant.id},
        notes=notes,
        ttft_p99_ms=_tail(roofline.ttft_floor_ms, getattr(exp, "ttft_p99_ms", None)),
        itl_p99_ms=_tail(roofline.itl_floor_ms, getattr(exp, "itl_p99_ms", None)),
        carried_by=getattr(exp, "carried_by", None),
        gpu_count=max(setup.gpu_count or 1, roofline.tensor_parallel),
        tensor_parallel=roofline.tensor_parallel,
        min_gpus_to_fit=fewest_devices_that_fit(hw, model, quant, setup, workload),
    )


def rank_hardware(
    catalog: Catalog,
    *,
    model: str,
    quantization: str | None,
    prompt_tokens: int,
    output_tokens: int,
    concurrency: int,
    runtime: str | None,
    expectations_fn: Any,
    gpu_count: int | None = None,
    tensor_parallel: int | None = None,
    fits_first: bool = True,
) -> list[HardwareRanking]:
    """Every catalog device ranked by expected decode (then prefill) for this model, each as a
    group of ``gpu_count`` devices at ``tensor_parallel`` (default: the GPU count; Macs and CPUs
    stay single). Each row says whether the model fits and the fewest devices that would; with
    ``fits_first`` (the default) devices where it fits come first."""
    model_spec, implied = catalog.resolve_model(model, field_prefix="query.model")
    if quantization:
        quant = catalog.resolve_quantization(quantization, field_prefix="query.quantization")
    else:
        quant = implied or default_quantization(catalog, model_spec)[0]
    workload = Workload(prompt_tokens_mean=prompt_tokens, output_tokens_mean=output_tokens, concurrency=concurrency)
    rows = []
    for hw in catalog.list_hardware():
        scales = hw.kind in _SCALE_OUT_KINDS
        count = (gpu_count or tensor_parallel or 1) if scales else 1
        tp = (tensor_parallel or count) if scales else 1
        setup = Setup(runtime=runtime, gpu_count=count, tensor_parallel=tp)
        roofline = _roofline(hw, model_spec, quant, setup, workload)
        exp, _ = _expect(catalog, expectations_fn, roofline, hw, model_spec, quant, setup)
        fewest = fewest_devices_that_fit(hw, model_spec, quant, setup, workload)
        rows.append((hw, roofline, exp, count, fewest))

    def key(item: tuple[HardwareSpec, Roofline, Any, int, int | None]) -> tuple[int, float, float, str]:
        hw, roofline, exp, _, _ = item
        decode = exp.decode_tok_s.expected if exp.decode_tok_s else roofline.decode_ceiling_batch_tok_s
        prefill = exp.prefill_tok_s.expected if exp.prefill_tok_s else (roofline.prefill_ceiling_tok_s or 0.0)
        misfit = 1 if fits_first and roofline.fits_in_memory is False else 0
        return (misfit, -decode, -prefill, hw.id)

    rows.sort(key=key)
    return [
        HardwareRanking(
            rank=i,
            hardware=hw.id,
            name=hw.name,
            kind=hw.kind,
            vendor=hw.vendor,
            memory_gb=hw.memory_gb,
            mem_bandwidth_gb_s=hw.mem_bandwidth_gb_s,
            fits_in_memory=roofline.fits_in_memory,
            decode_tok_s=_band(roofline.decode_ceiling_batch_tok_s, exp.decode_tok_s),
            prefill_tok_s=_band(roofline.prefill_ceiling_tok_s, exp.prefill_tok_s),
            ttft_ms=_band(roofline.ttft_floor_ms, exp.ttft_ms),
            gpu_count=count,
            tensor_parallel=roofline.tensor_parallel,
            min_gpus_to_fit=fewest,
            model_version=exp.model_version,
            carried_by=getattr(exp, "carried_by", None),
            quantization=quant.id,
        )
        for i, (hw, roofline, exp, count, fewest) in enumerate(rows, start=1)
    ]


class PredictionService:
    """What-if predictions against the catalog and the expectation function in force."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def predict(self, data: PredictIn) -> PredictOut:
        # The canonical run's bounds: a negative prompt or a concurrency of 1e308 is a 422 naming it.
        validate_setup_fields(data.setup)
        validate_workload(data.workload)
        catalog = await CatalogService(session=self.session).current()
        return predict(catalog, data.setup, data.workload, await expectations_fn_for(self.session))

    async def rank_hardware(self, **query: Any) -> list[HardwareRanking]:
        catalog = await CatalogService(session=self.session).current()
        return rank_hardware(catalog, **query, expectations_fn=await expectations_fn_for(self.session))
