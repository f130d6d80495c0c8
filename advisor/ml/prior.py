"""The physics prior: roofline ceilings × a calibrated efficiency per runtime and hardware kind.

This is what advisor expects before it has fitted anything (model_version ``physics-prior-1``):
``expected = ceiling × median efficiency``, with ``low``/``high`` from the 10th/90th percentile of
efficiency. It imports only :mod:`advisor.physics` and holds its calibration as constants.

How the constants were derived
------------------------------
From ``data/public_runs.csv`` (811 published measurements, sources in
``data/public_runs_sources.md``; /work/shared/data at the time of writing) with
``python -W ignore -m advisor.ml.prior PATH/public_runs.csv``, which runs :func:`calibrate` and prints the
table below. For every usable row it builds the setup from the row's own columns (bandwidth,
peak FP16 TFLOPS, params, active params, bits per weight), takes the layer/head shapes from the
catalog (so KV reads are counted), computes the ceiling with :func:`advisor.physics.analyse` and
records ``measured / ceiling``:

* decode: llama-bench tgN (batch 1, from an empty context: output N, mean context N/2) and
  tg32 at a KV depth; llama-batched-bench per-sequence rate (aggregate ÷ B) at depth PP with
  batch B; NIM ``1000 / ITL`` at concurrency ≤ 50 with TP2 (higher concurrency saturates);
  SGLang/vLLM ``1000 / median TPOT`` at 4 and 8 req/s (batch and context unknown: batch 1, no
  context); LM Studio MLX/GGUF generation rates (context unknown).
* prefill: llama-bench ppN (depth 0 or the stated KV depth), llama-batched-bench PP rate, and
  NIM ``prompt / TTFT`` at concurrency 1. Rows the source flags as anomalous are skipped.
* Skipped: TensorRT-LLM offline throughput (aggregate over an unknown batch, no per-sequence
  rate), ik_llama.cpp rows (a fork with its own kernels), SGLang/vLLM TTFT (prompt lengths
  unknown), and multi-GPU llama.cpp rows: layer split runs one GPU at a time in decode but
  pipelines long prompts across GPUs, so neither one GPU nor all of them is the right ceiling.
* Runtime families: ``llamacpp`` (llama.cpp CUDA/Metal/CPU, LM Studio GGUF; Ollama runs the same
  engine), ``mlx`` (LM Studio MLX), ``server`` (vLLM, SGLang, NIM/TensorRT-LLM: continuous-batching
  GPU servers; TGI joins them). Hardware kinds follow the catalog; prefill on a GPU whose TFLOPS
  are only estimated (DGX Spark here) is its own cell, ``gpu+estimated``, because efficiency
  against an estimate is not comparable with efficiency against a datasheet figure.
* Each cell keeps the median and the 10th/90th percentiles (``statistics.quantiles``, inclusive).
  Cells with fewer than 10 observations take the wider of their own and the pooled band of their
  hardware kind, so a thin cell never claims more certainty than the pool. Missing cells fall back
  to the pooled kind, then to everything.

What the data says beyond these numbers: llama.cpp decode efficiency falls as the ceiling rises
(a fixed per-token overhead of a few ms dominates small models on fast GPUs: 4x A100 with an 8B
Q4 model reaches 0.23 of its ceiling, an RTX 3070 0.75); the fitted model, which sees bandwidth
and model size, captures that; the prior only widens its band.

TTFT = prompt / prefill + :data:`TTFT_OVERHEAD_MS` (tokenisation, scheduling and delivery of the
first chunk; SGLang's 32 ms median TTFT for ~250-token ShareGPT prompts on an A100 leaves ~5 ms
after the prefill at the server-prefill efficiency). ITL = 1000 / decode.
"""

from __future__ import annotations

import re
import statistics
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace

from advisor.ml.expectations import Band, Expectations
from advisor.physics import HardwareSpec, ModelSpec, QuantSpec, Roofline, analyse

__all__ = [
    "DECODE_EFFICIENCY",
    "PREFILL_EFFICIENCY",
    "PRIOR_MODEL_VERSION",
    "RUNTIME_FAMILY",
    "TTFT_OVERHEAD_MS",
    "EfficiencyPrior",
    "calibrate",
    "efficiency_prior",
    "prior_expectations",
    "runtime_family",
]

PRIOR_MODEL_VERSION = "physics-prior-1"

#: Milliseconds added to prompt / prefill for TTFT: expected, low, high.
TTFT_OVERHEAD_MS: tuple[float, float, float] = (5.0, 1.0, 25.0)

#: Canonical runtime → calibration family ("*" = no family: use the pooled hardware kind).
RUNTIME_FAMILY: dict[str, str] = {
    "llamacpp": "llamacpp",
    "ollama": "llamacpp",
    "mlx": "mlx",
    "vllm": "server",
    "sglang": "server",
    "tgi": "server",
    "trtllm": "server",
    "other": "*",
}


@dataclass(frozen=True, slots=True)
class EfficiencyPrior:
    """Measured ÷ ceiling in one calibration cell: median, 10th and 90th percentile, count."""

    median: float
    p10: float
    p90: float
    n: int


# --- calibrated constants (python -m advisor.ml.prior public_runs.csv) -----------------------
# key: (runtime family, hardware kind); "*" pools every family / kind.
DECODE_EFFICIENCY: dict[tuple[str, str], EfficiencyPrior] = {
    ("llamacpp", "apple_soc"): EfficiencyPrior(0.719, 0.443, 0.851, 127),
    ("llamacpp", "cpu"): EfficiencyPrior(0.305, 0.100, 0.772, 42),
    ("llamacpp", "gpu"): EfficiencyPrior(0.717, 0.467, 0.908, 254),
    ("mlx", "apple_soc"): EfficiencyPrior(0.804, 0.442, 0.851, 9),
    ("server", "gpu"): EfficiencyPrior(0.444, 0.364, 0.578, 12),
    ("*", "*"): EfficiencyPrior(0.702, 0.410, 0.878, 444),
    ("*", "apple_soc"): EfficiencyPrior(0.724, 0.442, 0.851, 136),
    ("*", "cpu"): EfficiencyPrior(0.305, 0.100, 0.772, 42),
    ("*", "gpu"): EfficiencyPrior(0.707, 0.447, 0.905, 266),
}
PREFILL_EFFICIENCY: dict[tuple[str, str], EfficiencyPrior] = {
    ("llamacpp", "apple_soc"): EfficiencyPrior(0.734, 0.515, 0.872, 122),
    ("llamacpp", "cpu"): EfficiencyPrior(0.213, 0.036, 0.952, 42),
    ("llamacpp", "gpu"): EfficiencyPrior(0.338, 0.187, 0.876, 131),
    ("llamacpp", "gpu+estimated"): EfficiencyPrior(1.039, 0.737, 1.730, 115),
    ("server", "gpu"): EfficiencyPrior(0.459, 0.188, 0.874, 1),
    ("*", "*"): EfficiencyPrior(0.719, 0.211, 1.326, 411),
    ("*", "apple_soc"): EfficiencyPrior(0.734, 0.515, 0.872, 122),
    ("*", "cpu"): EfficiencyPrior(0.213, 0.036, 0.952, 42),
    ("*", "gpu"): EfficiencyPrior(0.342, 0.188, 0.874, 132),
    ("*", "gpu+estimated"): EfficiencyPrior(1.039, 0.737, 1.730, 115),
}
# ---------------------------------------------------------------------------------------------


def runtime_family(runtime: str | None) -> str:
    """Calibration family of a canonical runtime name (unknown or None → ``*``)."""
    if runtime is None:
        return "*"
    return RUNTIME_FAMILY.get(runtime.strip().lower(), "*")


def efficiency_prior(
    table: Mapping[tuple[str, str], EfficiencyPrior], family: str, kind: str
) -> tuple[EfficiencyPrior, tuple[str, str]]:
    """The most specific cell for ``(family, kind)`` and the key it came from.

    Order: the cell itself, the pooled kind, the family on the base kind (``gpu`` for
    ``gpu+estimated``), the pooled base kind, GPU cells for accelerators, everything.
    """
    base = kind.split("+", 1)[0]
    keys = [(family, kind), ("*", kind), (family, base), ("*", base)]
    if base == "accelerator":
        # No public accelerator runs yet: datasheet-rated accelerators are closest to GPUs.
        keys += [(family, "gpu"), ("*", "gpu")]
    for key in (*keys, ("*", "*")):
        if key in table:
            return table[key], key
    raise LookupError("efficiency table has no ('*', '*') cell")


def _band(ceiling: float, prior: EfficiencyPrior) -> Band:
    return Band(
        expected=ceiling * prior.median, low=ceiling * prior.p10, high=ceiling * prior.p90, ceiling=ceiling
    )


def _prefill_kind(roofline: Roofline, hardware_kind: str) -> str:
    if roofline.prefill_tflops_estimated and hardware_kind in ("gpu", "accelerator"):
        return f"{hardware_kind}+estimated"
    return hardware_kind


def prior_expectations(roofline: Roofline, *, runtime: str | None, hardware_kind: str) -> Expectations:
    """Physics × calibrated efficiency for ``runtime`` on ``hardware_kind``.

    * decode_tok_s: per sequence at the roofline's concurrency (``decode_ceiling_batch_tok_s``).
    * prefill_tok_s: for the roofline's prompt (or the long-prompt asymptote without one).
    * ttft_ms: ``prompt / prefill × 1000 + overhead``; None without a prompt.
    * itl_ms: ``1000 / decode``.
    """
    family = runtime_family(runtime)
    decode_prior, decode_key = efficiency_prior(DECODE_EFFICIENCY, family, hardware_kind)
    decode = _band(roofline.decode_ceiling_batch_tok_s, decode_prior)
    itl = Band(
        expected=1000.0 / decode.expected,
        low=1000.0 / decode.high,
        high=1000.0 / decode.low,
        ceiling=roofline.itl_floor_ms,
    )

    prefill: Band | None = None
    ttft: Band | None = None
    prefill_key: tuple[str, str] | None = None
    if roofline.prefill_ceiling_tok_s is not None:
        prefill_prior, prefill_key = efficiency_prior(
            PREFILL_EFFICIENCY, family, _prefill_kind(roofline, hardware_kind)
        )
        prefill = _band(roofline.prefill_ceiling_tok_s, prefill_prior)
        prompt = roofline.prompt_tokens
        if prompt:
            overhead, overhead_low, overhead_high = TTFT_OVERHEAD_MS
            ttft = Band(
                expected=prompt / prefill.expected * 1000.0 + overhead,
                low=prompt / prefill.high * 1000.0 + overhead_low,
                high=prompt / prefill.low * 1000.0 + overhead_high,
                ceiling=roofline.ttft_floor_ms,
            )
    cells = f"decode {'/'.join(decode_key)} n={decode_prior.n}"
    if prefill_key is not None:
        cells += f", prefill {'/'.join(prefill_key)}"
    return Expectations(
        decode_tok_s=decode,
        prefill_tok_s=prefill,
        ttft_ms=ttft,
        itl_ms=itl,
        model_version=PRIOR_MODEL_VERSION,
        source=f"physics prior ({cells})",
    )


# ------------------------------------------------------------------ calibration (offline)

#: Cells with fewer observations than this widen to their pooled kind's band.
MIN_CELL_SIZE = 10


def _family_of(runtime: str) -> str | None:
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


def _kind_of(hardware: str) -> str:
    # "AMD Ryzen 9 7950X (CPU)", "Apple M2 Max (CPU only, ...)"; not "(16-core CPU / 40-core GPU)".
    if re.search(r"\(CPU\b", hardware):
        return "cpu"
    if hardware.lower().startswith("apple"):
        return "apple_soc"
    return "gpu"


def _num(value: str | None) -> float | None:
    return float(value) if value not in (None, "") else None


def _quantiles(values: list[float]) -> EfficiencyPrior:
    ordered = sorted(values)
    if len(ordered) == 1:
        return EfficiencyPrior(ordered[0], ordered[0], ordered[0], 1)
    deciles = statistics.quantiles(ordered, n=10, method="inclusive")
    return EfficiencyPrior(statistics.median(ordered), deciles[0], deciles[-1], len(ordered))


def calibrate(
    rows: Iterable[Mapping[str, str]], model_shape: Callable[[str], ModelSpec | None]
) -> dict[str, dict[tuple[str, str], EfficiencyPrior]]:
    """Efficiency cells from ``public_runs.csv`` rows (see the module docstring).

    ``model_shape`` maps the CSV's model name to a spec with layer/head shapes (None: counts
    only). Returns ``{"decode": {...}, "prefill": {...}}`` keyed like the constants.
    """
    observed: dict[str, dict[tuple[str, str], list[float]]] = {"decode": {}, "prefill": {}}
    for row in rows:
        family = _family_of(row["runtime"])
        if family is None or (family == "llamacpp" and re.match(r"\d+x ", row["hardware"])):
            continue
        kind = _kind_of(row["hardware"])
        fp16 = _num(row["peak_fp16_tflops"])
        eight_bit = fp16 * 2 if fp16 and row["quant"] in ("FP8", "FP4") else None
        hw = HardwareSpec(
            "row", row["hardware"], kind, "row", float(row["mem_bandwidth_gb_s"]), None, fp16, fp16, eight_bit
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
        family_q = (
            "float"
            if q in ("F16", "BF16", "FP8")
            else "nv"
            if q == "FP4"
            else "mx"
            if q == "MXFP4"
            else "gguf"
        )
        if q.startswith("MLX"):
            family_q = "custom"
        quant = QuantSpec(q, q, float(row["bits_per_weight"]), family_q)
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
        decode_args: dict[str, int | None] = {}
        if source == "LCPP_BENCH_DGXSPARK" and "batched-bench" in notes and decode:
            measured_decode = decode / batch
            decode_args = {"prompt_tokens": prompt, "output_tokens": output, "concurrency": batch}
        elif source == "NIM_L33_70B" and batch <= 50 and row["itl_ms"]:
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
                decode_args = {"tensor_parallel": tp}
        elif decode and batch == 1 and source not in ("NIM_L33_70B", "TRTLLM_PERF"):
            measured_decode = decode
            decode_args = {"output_tokens": output, "kv_depth_tokens": depth}
        if measured_decode:
            roof = analyse(hw, model, quant, **decode_args)  # type: ignore[arg-type]
            observed["decode"].setdefault((family, kind), []).append(
                measured_decode / roof.decode_ceiling_batch_tok_s
            )

        measured_prefill: float | None = None
        prefill_args: dict[str, int | None] = {}
        if prefill and prompt and "anomalous" not in notes:
            measured_prefill = prefill
            prefill_args = {"prompt_tokens": prompt, "kv_depth_tokens": depth}
        elif source == "NIM_L33_70B" and batch == 1 and prompt and row["ttft_ms"]:
            measured_prefill = prompt / (float(row["ttft_ms"]) / 1000.0)
            prefill_args = {"prompt_tokens": prompt, "tensor_parallel": tp}
        if measured_prefill:
            roof = analyse(hw, model, quant, **prefill_args)  # type: ignore[arg-type]
            assert roof.prefill_ceiling_tok_s is not None
            cell_kind = _prefill_kind(roof, kind)
            observed["prefill"].setdefault((family, cell_kind), []).append(
                measured_prefill / roof.prefill_ceiling_tok_s
            )

    tables: dict[str, dict[tuple[str, str], EfficiencyPrior]] = {}
    for phase, cells in observed.items():
        pooled: dict[tuple[str, str], list[float]] = {("*", "*"): []}
        for (_, kind), values in cells.items():
            pooled.setdefault(("*", kind), []).extend(values)
            pooled["*", "*"].extend(values)
        table = {key: _quantiles(values) for key, values in {**cells, **pooled}.items() if values}
        for key, prior in list(table.items()):
            if prior.n < MIN_CELL_SIZE and key != ("*", "*"):
                wider, _ = efficiency_prior(table, "*", key[1]) if key[0] != "*" else (table["*", "*"], None)
                table[key] = EfficiencyPrior(
                    prior.median, min(prior.p10, wider.p10), max(prior.p90, wider.p90), prior.n
                )
        tables[phase] = table
    return tables


def _format_table(table: Mapping[tuple[str, str], EfficiencyPrior]) -> str:
    lines = []
    for key in sorted(table, key=lambda k: (k[0] == "*", k)):
        p = table[key]
        lines.append(f"    {key!r}: EfficiencyPrior({p.median:.3f}, {p.p10:.3f}, {p.p90:.3f}, {p.n}),")
    return "\n".join(lines)


def _main(argv: list[str]) -> int:  # pragma: no cover - offline calibration entry point
    import csv
    from pathlib import Path

    # The catalog supplies layer/head shapes; imported here so the module itself depends on
    # physics only.
    from advisor.catalog import Catalog
    from advisor.errors import UnknownName

    if len(argv) != 1:
        print("usage: python -m advisor.ml.prior PATH/public_runs.csv", file=sys.stderr)
        return 2
    catalog = Catalog.default()
    # Public-runs model names the catalog does not carry: same-architecture stand-ins, or shapes
    # from the model's config.json (Llama 2 7B: MHA 32 x 32 x 128; Mistral-Nemo 12B: 40 layers,
    # 8 KV heads of 128).
    stand_ins = {
        "Qwen3-Coder-30B-A3B-Instruct": "qwen3-30b-a3b",
        "Qwen2.5-Coder-7B": "qwen2.5-7b",
        "gemma-3-4b-it (QAT)": "gemma-3-4b",
        "Wayfarer Large 70B (Llama 3.3 based)": "llama-3.3-70b",
        "Mistral Small 3 24B": "mistral-small-24b",
    }
    shapes = {
        "Llama 2 7B": ModelSpec("llama-2-7b", 6.74, 6.74, 32, 4096, 32, 32, 128, attention="mha"),
        "Wayfarer 12B (Mistral-Nemo based)": ModelSpec("mistral-nemo-12b", 12.2, 12.2, 40, 5120, 32, 8, 128),
    }

    def model_shape(name: str) -> ModelSpec | None:
        if name in shapes:
            return shapes[name]
        try:
            return catalog.resolve_model(stand_ins.get(name, name))[0]
        except UnknownName:
            return None

    with Path(argv[0]).open(encoding="utf-8", newline="") as handle:
        tables = calibrate(csv.DictReader(handle), model_shape)
    for phase, table in tables.items():
        print(f"{phase.upper()}_EFFICIENCY = {{\n{_format_table(table)}\n}}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(_main(sys.argv[1:]))
