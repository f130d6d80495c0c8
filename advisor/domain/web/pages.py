"""Page data: each function reads through the domain services and returns a template context.

Controllers stay thin: they call one of these and render the result. Nothing here writes, but
for the analysis a bulk-loaded run gets on its first read (as ``GET /api/v1/runs/{id}`` does).
"""

from __future__ import annotations

import math
from typing import Any

import msgspec
from markupsafe import Markup
from sqlalchemy.ext.asyncio import AsyncSession

from advisor.canonical import RUNTIMES, Setup, Workload
from advisor.charts import Mark, RooflinePoint, Series, SloLine, roofline_svg, trend_svg
from advisor.client.compare import compare_runs
from advisor.db.models import Run
from advisor.domain.catalog.services import CatalogService
from advisor.domain.deployments.services import DeploymentService
from advisor.domain.models.provider import expectations_fn_for
from advisor.domain.predictions.services import predict, rank_hardware
from advisor.domain.runs.pipeline import RunPipeline
from advisor.domain.runs.services import RunService, run_to_canonical, run_to_out
from advisor.domain.web.services import WebQueries
from advisor.domain.web.submission import METRIC_FIELDS, SLO_FIELDS
from advisor.errors import AdvisorError, NotFound
from advisor.physics import decode_flops_per_token, kv_bytes, weights_read_per_step
from advisor.rules.context import RunContext, build_context
from advisor.rules.damping import SLO_METRICS

__all__ = [
    "compare_page",
    "dashboard_page",
    "deployment_page",
    "form_page",
    "rule_page",
    "rules_page",
    "run_page",
]

#: The what-if quantizations: 16, 8 and 4 bits, in the weight formats the runtime loads.
_GGUF_RUNTIMES = {"llamacpp", "ollama"}
_WHATIF_QUANTS = {
    "gguf": ("f16-bf16", "gguf-q8_0", "gguf-q4_k_m"),
    "other": ("f16-bf16", "fp8-e4m3", "awq-int4-g128"),
}
_WHATIF_HARDWARE = 5
_TRENDS = (
    ("ttft_p50_ms", "TTFT p50", "ms", "ttft_p50_ms"),
    ("ttft_p99_ms", "TTFT p99", "ms", "ttft_p99_ms"),
    ("itl_p99_ms", "ITL p99", "ms", "itl_p99_ms"),
    ("decode_tok_s", "Decode", "tok/s", "decode_tok_s_min"),
)
_EXPECTATION_ROWS = (
    ("decode_tok_s", "Decode, per sequence", "tok/s", "decode_tok_s"),
    ("prefill_tok_s", "Prefill, per sequence", "tok/s", "prefill_tok_s"),
    ("ttft_ms", "TTFT p50", "ms", "ttft_ms.p50"),
    ("itl_ms", "ITL p50", "ms", "itl_ms.p50"),
)


def _builtins(value: Any) -> Any:
    return msgspec.to_builtins(value)


def _dig(doc: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(doc, dict):
            return None
        doc = doc.get(part)
    return doc


def _slo_status(slo: dict[str, Any], run: Run) -> str:
    """``met``, ``missed`` or ``none`` (nothing set, or nothing measured): the deployment's SLOs as
    they are now, against the run's metrics (the run's own analysis may predate an SLO edit)."""
    verdicts = []
    for objective, (path, is_max) in SLO_METRICS.items():
        target = slo.get(objective)
        found = _dig(run.metrics or {}, path)
        if target is None or not isinstance(found, int | float):
            continue
        verdicts.append(found <= target if is_max else found >= target)
    if not verdicts:
        return "none"
    return "met" if all(verdicts) else "missed"


async def dashboard_page(session: AsyncSession) -> dict[str, Any]:
    queries = WebQueries(session)
    rows = []
    for deployment, run in await queries.deployments_with_latest():
        analysis = (run.analysis or {}) if run is not None else {}
        rows.append(
            {
                "name": deployment.name,
                "run": run,
                "verdict": run.verdict if run is not None else None,
                "reasons": analysis.get("verdict_reasons") or [],
                "decode_efficiency": run.decode_efficiency if run is not None else None,
                "prefill_efficiency": run.prefill_efficiency if run is not None else None,
                "slo": deployment.slo or {},
                "slo_status": _slo_status(deployment.slo or {}, run) if run is not None else "none",
            }
        )
    return {"deployments": rows, "recent": await queries.recent_runs(20)}


def form_page(
    catalog: Any, values: dict[str, str] | None = None, errors: dict[str, str] | None = None
) -> dict[str, Any]:
    return {
        "values": values or {},
        "errors": errors or {},
        "runtimes": RUNTIMES,
        "hardware": [(h.id, h.name) for h in catalog.list_hardware()],
        "models": [(m.id, getattr(m, "name", None) or m.id) for m in catalog.list_models()],
        "quantizations": [(q.id, f"{q.bits_per_weight:g} bits") for q in catalog.list_quantizations()],
        "metric_fields": METRIC_FIELDS,
        "slo_fields": SLO_FIELDS,
    }


def _context(catalog: Any, row: Run, expectations_fn: Any) -> RunContext | None:
    """The run resolved as the analysis resolves it (inline specs, implied quantization, engine
    names of KV dtypes), for the roofline and the what-ifs; None when a spec is missing."""
    try:
        ctx = build_context(run_to_canonical(row), catalog=catalog, expectations_fn=expectations_fn)
    except (AdvisorError, ValueError, LookupError, TypeError):
        return None  # e.g. a catalog entry removed since the run was stored: the page shows the rest
    if ctx.roofline is None or ctx.hardware is None or ctx.model is None or ctx.quant is None:
        return None
    return ctx


def _roofline_chart(ctx: RunContext, expectations: dict[str, Any]) -> Markup:
    """Both phases on the device's roofline, from the same physics the analysis used."""
    roof = ctx.roofline
    model, quant = ctx.model, ctx.quant
    assert roof is not None and model is not None and quant is not None and ctx.hardware is not None
    batch = roof.concurrency
    flops_token = decode_flops_per_token(model, roof.decode_context_tokens)
    moved = weights_read_per_step(model, quant, batch) + batch * (
        kv_bytes(model, roof.decode_context_tokens, roof.kv_cache_dtype) or 0.0
    )
    decode_band = expectations.get("decode_tok_s") or {}
    points = [
        RooflinePoint(
            phase="decode",
            intensity=flops_token * batch / moved,
            flops_per_token=flops_token * batch,  # per-stream tok/s × batch streams = FLOP/s
            ceiling_tok_s=roof.decode_ceiling_batch_tok_s,
            measured_tok_s=ctx.measured.decode_tok_s,
            expected_low_tok_s=decode_band.get("low"),
            expected_high_tok_s=decode_band.get("high"),
        )
    ]
    if roof.prefill_flops and roof.prefill_ceiling_tok_s and roof.prompt_tokens:
        prefill_band = expectations.get("prefill_tok_s") or {}
        read = min(weights_read_per_step(model, quant, roof.prompt_tokens), roof.weight_bytes)
        points.append(
            RooflinePoint(
                phase="prefill",
                intensity=roof.prefill_flops / read,
                flops_per_token=roof.prefill_flops / roof.prompt_tokens,
                ceiling_tok_s=roof.prefill_ceiling_tok_s,
                measured_tok_s=ctx.measured.prefill_tok_s,
                expected_low_tok_s=prefill_band.get("low"),
                expected_high_tok_s=prefill_band.get("high"),
            )
        )
    tp = roof.tensor_parallel
    return roofline_svg(
        points,
        bandwidth_gb_s=roof.mem_bandwidth_gb_s,
        peak_tflops=roof.prefill_tflops,
        device=f"{ctx.hardware.name} ×{tp}" if tp > 1 else ctx.hardware.name,
    )


def _expectation_rows(row: Run, expectations: dict[str, Any], ctx: RunContext | None) -> list[dict[str, Any]]:
    out = []
    metrics = dict(row.metrics or {})
    if ctx is not None:  # per-sequence speeds as the rules read them (decode from TPOT or ITL, …)
        metrics["decode_tok_s"] = ctx.measured.decode_tok_s
        metrics["prefill_tok_s"] = ctx.measured.prefill_tok_s
    for key, label, unit, measured_path in _EXPECTATION_ROWS:
        band = expectations.get(key) or {}
        measured = _dig(metrics, measured_path)
        if not band and measured is None:
            continue
        low, high = band.get("low"), band.get("high")
        where = None
        if isinstance(measured, int | float) and low is not None and high is not None:
            where = "below" if measured < low else ("above" if measured > high else "within")
        out.append({"label": label, "unit": unit, "measured": measured, **band, "where": where})
    return out


def _whatif(catalog: Any, ctx: RunContext, expectations_fn: Any) -> list[dict[str, Any]]:
    """Predicted decode, prefill and TTFT for other quantizations and other hardware.

    Besides the prediction, each row scales the *measured* value by the predicted ratio to the
    current setup (DESIGN §6), so the model's systematic error cancels.
    """
    run, roof = ctx.run, ctx.roofline
    assert roof is not None and ctx.hardware is not None and ctx.quant is not None
    base_setup = msgspec.structs.replace(run.setup, kv_cache_dtype=roof.kv_cache_dtype)
    workload: Workload = run.workload

    def one(kind: str, setup: Setup) -> dict[str, Any] | None:
        try:
            out = predict(catalog, setup, workload, expectations_fn)
        except (AdvisorError, ValueError, LookupError):
            return None
        return {
            "kind": kind,
            "hardware": out.resolved["hardware"],
            "quantization": out.resolved["quantization"],
            "decode": out.decode_tok_s.expected,
            "prefill": out.prefill_tok_s.expected,
            "ttft": out.ttft_ms.expected,
            "fits": out.fits_in_memory,
        }

    if run.setup.quantization is None:  # implied by the model name: say it explicitly
        base_setup = msgspec.structs.replace(base_setup, quantization=ctx.quant.id)
    current = one("current", base_setup)
    if current is None:
        return []
    rows = [current]
    family = "gguf" if (ctx.runtime in _GGUF_RUNTIMES or ctx.quant.id.startswith("gguf")) else "other"
    for quant in _WHATIF_QUANTS[family]:
        if quant != ctx.quant.id:
            item = one("quantization", msgspec.structs.replace(base_setup, quantization=quant))
            if item:
                rows.append(item)
    try:
        ranked = rank_hardware(
            catalog,
            model=ctx.model.id if ctx.model is not None else "",
            quantization=ctx.quant.id,
            prompt_tokens=roof.prompt_tokens or 512,
            output_tokens=roof.output_tokens or 128,
            concurrency=roof.concurrency,
            runtime=ctx.runtime,
            expectations_fn=expectations_fn,
        )
    except (AdvisorError, ValueError, LookupError):
        ranked = []  # an inline model the catalog cannot rank by id
    for hardware in [r.hardware for r in ranked if r.hardware != ctx.hardware.id][:_WHATIF_HARDWARE]:
        item = one("hardware", msgspec.structs.replace(base_setup, hardware=hardware))
        if item:
            rows.append(item)
    measured = {
        "decode": ctx.measured.decode_tok_s,
        "prefill": ctx.measured.prefill_tok_s,
        "ttft": run.metrics.ttft_ms.p50,
    }
    for item in rows:
        for key, value in measured.items():
            base, alt = current.get(key), item.get(key)
            scaled = value * alt / base if value and base and alt and math.isfinite(alt / base) else None
            item[f"{key}_scaled"] = scaled
    return rows


async def run_page(session: AsyncSession, run_id: int) -> dict[str, Any]:
    # The pipeline analyses a bulk-loaded run on first read, as GET /api/v1/runs/{id} does.
    recommendations: list[dict[str, Any]] = _builtins(await RunPipeline(session).recommendations(run_id))
    row = await RunService(session=session).get_run(run_id)
    analysis = row.analysis or {}
    expectations = analysis.get("expectations") or {}
    catalog = await CatalogService(session).current()
    expectations_fn = await expectations_fn_for(session)
    ctx = _context(catalog, row, expectations_fn)
    chart = _roofline_chart(ctx, expectations) if ctx is not None else None
    whatif = _whatif(catalog, ctx, expectations_fn) if ctx is not None else []
    runtime = row.runtime or "other"
    for rec in recommendations:
        fix = rec.get("fix") or {}
        rec["fix_here"] = rec.get("fix_for_runtime") or fix.get(runtime) or fix.get("other")
    return {
        "run": _builtins(run_to_out(row)),
        "row": row,
        "analysis": analysis,
        "reasons": analysis.get("verdict_reasons") or [],
        "slo_checks": analysis.get("slo") or [],
        "missing": analysis.get("missing") or [],
        "expectation_rows": _expectation_rows(row, expectations, ctx),
        "expectations": expectations,
        "breakdown": analysis.get("ttft_breakdown"),
        "recommendations": recommendations,
        "roofline": chart,
        "whatif": whatif,
    }


async def deployment_page(session: AsyncSession, name: str) -> dict[str, Any]:
    service = DeploymentService(session=session)
    deployment = await service.get_by_name(name)
    if deployment is None:
        raise NotFound(f"no deployment named {name!r}", field="name")
    queries = WebQueries(session)
    points = await queries.trend(deployment.id)
    regressions = await queries.regressions([p.id for p in points])
    marks = [Mark(at=p.measured_at, label=f"run {p.id}: {regressions[p.id]}") for p in points if p.id in regressions]
    slo = deployment.slo or {}
    charts = []
    for column, title, unit, slo_key in _TRENDS:
        series = Series(title, [(p.measured_at, getattr(p, column)) for p in points if getattr(p, column) is not None])
        lines = [SloLine(slo_key, float(slo[slo_key]))] if slo.get(slo_key) is not None else []
        charts.append(trend_svg([series], slo_lines=lines, marks=marks, title=title, unit=unit))
    return {
        "deployment": _builtins(await service.to_out(deployment)),
        "charts": charts,
        "recent": await queries.recent_runs(20, deployment_id=deployment.id),
        "regressions": regressions,
        "slo_fields": SLO_FIELDS,
    }


async def compare_page(session: AsyncSession, a: int | None, b: int | None) -> dict[str, Any]:
    if a is None or b is None:
        newest = await WebQueries(session).run_ids(2)
        return {"comparison": None, "a": a, "b": b, "suggested": newest}
    runs = RunService(session=session)
    doc_a = _builtins(run_to_out(await runs.get_run(a)))
    doc_b = _builtins(run_to_out(await runs.get_run(b)))
    comparison = compare_runs(doc_a, doc_b)
    return {"comparison": comparison, "a": a, "b": b, "run_a": doc_a, "run_b": doc_b, "suggested": []}


def rules_page() -> dict[str, Any]:
    from advisor.rules.registry import catalogue

    return {"rules": catalogue()}


def rule_page(rule_id: str) -> dict[str, Any]:
    from advisor.rules.registry import catalogue

    key = rule_id.upper()
    for entry in catalogue():
        if entry.get("rule_id") == key or key in {a.upper() for a in entry.get("aliases", [])}:
            return {"rule": entry}
    raise NotFound(f"no rule {rule_id!r}", field="rule_id")
