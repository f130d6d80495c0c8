"""The physics prior: roofline ceilings × a calibrated efficiency per runtime and hardware kind.

This is what advisor expects before it has fitted anything (model_version ``physics-prior-1``):
``expected = ceiling × median efficiency``, with ``low``/``high`` from the 10th/90th percentile of
efficiency. It imports only :mod:`advisor.physics` and :mod:`advisor.ml.dataset` (which turns the
published rows into observations) and holds its calibration as constants.

How the constants were derived
------------------------------
From ``data/public_runs.csv`` (810 published measurements, sources in
``data/public_runs_sources.md``; shipped as package data in ``advisor/ml/data``) with
``python -W ignore -m advisor.ml.prior [PATH/public_runs.csv]``, which runs :func:`calibrate` and
prints the table below. For every usable row it builds the setup from the row's own columns (bandwidth,
peak FP16 TFLOPS, params, active params, bits per weight), takes the layer/head shapes from the
catalog (so KV reads are counted), computes the ceiling with :func:`advisor.physics.analyse` and
records ``measured / ceiling``:

* decode: llama-bench tgN (batch 1, from an empty context: output N, mean context N/2) and
  tg32 at a KV depth; llama-batched-bench per-sequence rate (aggregate ÷ B) at depth PP with
  batch B; NIM ``1000 / ITL`` at concurrency ≤ 50 with TP2 (higher concurrency saturates);
  SGLang/vLLM ``1000 / median TPOT`` at 4 and 8 req/s (batch and context unknown); LM Studio
  MLX/GGUF generation rates (context unknown). Rows at an unknown batch are compared with the
  batch-1 ceiling, which is too high for them, so they only lower a cell's 10th percentile and
  never set its median.
* prefill: llama-bench ppN (depth 0 or the stated KV depth), llama-batched-bench PP rate, and
  NIM ``prompt / TTFT`` at concurrency 1. Rows the source flags as anomalous are skipped.
* Skipped: TensorRT-LLM offline throughput (aggregate over an unknown batch, no per-sequence
  rate), ik_llama.cpp rows (a fork with its own kernels), SGLang/vLLM TTFT (prompt lengths
  unknown), and multi-GPU llama.cpp rows: layer split runs one GPU at a time in decode but
  pipelines long prompts across GPUs, so neither one GPU nor all of them is the right ceiling.
* Runtime families: ``llamacpp`` (llama.cpp CUDA/Metal/CPU, LM Studio GGUF; Ollama runs the same
  engine), ``mlx`` (LM Studio MLX), ``server`` (vLLM, SGLang, NIM/TensorRT-LLM: continuous-batching
  GPU servers; TGI joins them). Hardware kinds follow the catalog; prefill on a GPU whose TFLOPS
  are only estimated is its own cell, ``gpu+estimated``, because efficiency against an estimate
  is not comparable with efficiency against a datasheet figure. Rows without a TFLOPS figure take
  the catalog's (``advisor/catalog/data/hardware_compute.csv``: Apple, DGX Spark, Strix Halo,
  CPUs...), so no published row is estimated any more and the cell is empty; an inline device
  with bandwidth only falls back to its kind's cell against the conservative stand-in.
* Prefill has two efficiencies, one for the matmuls and one for the attention
  (:func:`advisor.physics.roofline.prefill_efficiency`): with ``a`` the attention share of the
  prompt's FLOPs, ``expected = ceiling × e / (1 + a × (r - 1))``, ``e`` the cell's matmul
  efficiency and ``r`` (:data:`PREFILL_ATTENTION_SLOWDOWN`) how many times more time per FLOP the
  attention takes. ``r`` is calibrated once over every prefill row (the value whose depth
  correction leaves the least squared log spread around the cells' medians; the rows at 4k-32k KV
  depth and 4k-8k prompts decide it), and each row's efficiency is taken back to its matmul
  equivalent, ``measured / ceiling × (1 + a × (r - 1))``, before the cell's percentiles.
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

import math
import statistics
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from advisor.ml.dataset import catalog_hardware_lookup, catalog_model_shape, load_public_rows, public_observations
from advisor.ml.expectations import Band, Expectations, physical_band
from advisor.physics import HardwareSpec, ModelSpec, Roofline
from advisor.physics.roofline import prefill_efficiency

__all__ = [
    "DECODE_EFFICIENCY",
    "ESTIMATED_WIDENING",
    "PREFILL_ATTENTION_SLOWDOWN",
    "PREFILL_EFFICIENCY",
    "PRIOR_MODEL_VERSION",
    "RUNTIME_FAMILY",
    "TTFT_OVERHEAD_BY_FAMILY",
    "TTFT_OVERHEAD_MS",
    "EfficiencyPrior",
    "attention_factor",
    "attention_slowdown",
    "calibrate",
    "efficiency_prior",
    "prior_expectations",
    "runtime_family",
    "ttft_overhead",
]

PRIOR_MODEL_VERSION = "physics-prior-1"

#: A band on a device whose compute is only estimated is this much wider (log space).
ESTIMATED_WIDENING = 1.5

#: Milliseconds added to prompt / prefill for TTFT: expected, low, high.
TTFT_OVERHEAD_MS: tuple[float, float, float] = (5.0, 1.0, 25.0)
#: The same per runtime family where it differs. A serving engine's first token also waits for
#: the HTTP front end, the chat template and tokenizer, the scheduler and the first decode step,
#: and that fixed part has been measured at tens of milliseconds: vLLM's TTFT flat at about
#: 100 ms for prompts under 400 tokens on V100s at TP 1-4 (vllm-project/vllm#7635), 62 ms for an
#: 8-token prompt to an 8B model on an A5000 (vllm-project/vllm#770). The expected value keeps the
#: cited 5 ms of SGLang's A100 rows; the band's high end covers those.
TTFT_OVERHEAD_BY_FAMILY: dict[str, tuple[float, float, float]] = {"server": (5.0, 1.0, 100.0)}


def ttft_overhead(runtime: str | None) -> tuple[float, float, float]:
    """:data:`TTFT_OVERHEAD_MS`, or its runtime family's (:data:`TTFT_OVERHEAD_BY_FAMILY`)."""
    return TTFT_OVERHEAD_BY_FAMILY.get(runtime_family(runtime), TTFT_OVERHEAD_MS)


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
    ("llamacpp", "cpu"): EfficiencyPrior(0.522, 0.194, 1.008, 42),
    ("llamacpp", "gpu"): EfficiencyPrior(0.741, 0.467, 0.908, 254),
    ("mlx", "apple_soc"): EfficiencyPrior(0.804, 0.442, 0.851, 9),
    ("server", "gpu"): EfficiencyPrior(0.489, 0.318, 0.907, 4),
    ("*", "*"): EfficiencyPrior(0.722, 0.439, 0.881, 436),
    ("*", "apple_soc"): EfficiencyPrior(0.724, 0.442, 0.851, 136),
    ("*", "cpu"): EfficiencyPrior(0.522, 0.194, 1.008, 42),
    ("*", "gpu"): EfficiencyPrior(0.739, 0.460, 0.907, 258),
}
#: Attention time per FLOP ÷ matmul time per FLOP in prefill (see the module docstring).
PREFILL_ATTENTION_SLOWDOWN = 3.4495
PREFILL_EFFICIENCY: dict[tuple[str, str], EfficiencyPrior] = {
    ("llamacpp", "apple_soc"): EfficiencyPrior(0.711, 0.551, 0.804, 122),
    ("llamacpp", "cpu"): EfficiencyPrior(0.323, 0.163, 0.710, 42),
    ("llamacpp", "gpu"): EfficiencyPrior(0.367, 0.209, 0.882, 246),
    ("server", "gpu"): EfficiencyPrior(0.509, 0.209, 0.882, 1),
    ("*", "*"): EfficiencyPrior(0.431, 0.221, 0.835, 411),
    ("*", "apple_soc"): EfficiencyPrior(0.711, 0.551, 0.804, 122),
    ("*", "cpu"): EfficiencyPrior(0.323, 0.163, 0.710, 42),
    ("*", "gpu"): EfficiencyPrior(0.367, 0.209, 0.882, 247),
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


def _band(ceiling: float, prior: EfficiencyPrior, scale: float = 1.0) -> Band:
    """Ceiling × efficiency × ``scale``, never above the ceiling (a cell's 90th percentile can
    exceed 1)."""
    top = ceiling * scale
    return physical_band(top * prior.median, top * prior.p10, top * prior.p90, ceiling, rate=True)


def attention_factor(roofline: Roofline, slowdown: float | None = None) -> float:
    """``1 / (1 + a × (r - 1))``: the share of the matmul-rate prefill a prompt keeps when its
    attention (share ``a`` of the FLOPs, :attr:`Roofline.prefill_attention_share`) runs ``r``
    times slower per FLOP (:data:`PREFILL_ATTENTION_SLOWDOWN`). 1 without a prompt."""
    share = roofline.prefill_attention_share
    r = PREFILL_ATTENTION_SLOWDOWN if slowdown is None else slowdown
    if share is None or not math.isfinite(share):
        return 1.0
    return prefill_efficiency(share, 1.0, 1.0 / r)


def _prefill_kind(roofline: Roofline, hardware_kind: str) -> str:
    if roofline.prefill_tflops_estimated and hardware_kind in ("gpu", "accelerator"):
        return f"{hardware_kind}+estimated"
    return hardware_kind


def prior_expectations(roofline: Roofline, *, runtime: str | None, hardware_kind: str, **_: object) -> Expectations:
    """Physics × calibrated efficiency for ``runtime`` on ``hardware_kind``.

    Further keyword arguments (``hardware=``, ``model=``, ``quant=``, which the fitted model
    uses) are accepted and ignored, so both are called the same way.

    * decode_tok_s: per sequence at the roofline's concurrency (``decode_ceiling_batch_tok_s``).
    * prefill_tok_s: for the roofline's prompt (or the long-prompt asymptote without one).
    * ttft_ms: ``prompt / prefill × 1000 + overhead``; None without a prompt.
    * itl_ms: ``1000 / decode``.
    """
    family = runtime_family(runtime)
    decode_prior, decode_key = efficiency_prior(DECODE_EFFICIENCY, family, hardware_kind)
    decode = _band(roofline.decode_ceiling_batch_tok_s, decode_prior)
    itl = physical_band(
        1000.0 / decode.expected, 1000.0 / decode.high, 1000.0 / decode.low, roofline.itl_floor_ms, rate=False
    )

    prefill: Band | None = None
    ttft: Band | None = None
    prefill_key: tuple[str, str] | None = None
    if roofline.prefill_ceiling_tok_s is not None:
        prefill_prior, prefill_key = efficiency_prior(
            PREFILL_EFFICIENCY, family, _prefill_kind(roofline, hardware_kind)
        )
        prefill = _band(roofline.prefill_ceiling_tok_s, prefill_prior, attention_factor(roofline))
        if roofline.prefill_tflops_estimated:
            # The compute figure is the physics' stand-in: widen the band around the median by
            # ESTIMATED_WIDENING in log space (the ceiling itself is uncertain).
            prefill = physical_band(
                prefill.expected,
                prefill.expected * (prefill_prior.p10 / prefill_prior.median) ** ESTIMATED_WIDENING,
                prefill.expected * (prefill_prior.p90 / prefill_prior.median) ** ESTIMATED_WIDENING,
                roofline.prefill_ceiling_tok_s,
                rate=True,
            )
        prompt = roofline.prompt_tokens
        if prompt:
            overhead, overhead_low, overhead_high = ttft_overhead(runtime)
            ttft = physical_band(
                prompt / prefill.expected * 1000.0 + overhead,
                prompt / prefill.high * 1000.0 + overhead_low,
                prompt / prefill.low * 1000.0 + overhead_high,
                roofline.ttft_floor_ms,
                rate=False,
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
        carried_by="prior",
    )


# ------------------------------------------------------------------ calibration (offline)

#: Cells with fewer observations than this widen to their pooled kind's band.
MIN_CELL_SIZE = 10


def _quantiles(values: list[float]) -> EfficiencyPrior:
    ordered = sorted(values)
    if len(ordered) == 1:
        return EfficiencyPrior(ordered[0], ordered[0], ordered[0], 1)
    deciles = statistics.quantiles(ordered, n=10, method="inclusive")
    return EfficiencyPrior(statistics.median(ordered), deciles[0], deciles[-1], len(ordered))


def calibrate(
    rows: Iterable[Mapping[str, str]],
    model_shape: Callable[[str], ModelSpec | None],
    hardware_lookup: Callable[[str], HardwareSpec | None] | None = None,
) -> dict[str, dict[tuple[str, str], EfficiencyPrior]]:
    """Efficiency cells from ``public_runs.csv`` rows (see the module docstring).

    ``model_shape`` maps the CSV's model name to a spec with layer/head shapes (None: counts
    only); ``hardware_lookup`` (the catalog) supplies compute figures for rows without one, as
    predictions use them. Returns ``{"decode": {...}, "prefill": {...}, "attention": {("*", "*"): r}}``
    keyed like the constants (``r``, :data:`PREFILL_ATTENTION_SLOWDOWN`, as a degenerate cell). The rows
    become observations through :func:`advisor.ml.dataset.public_observations`, which the fitted
    model's training data shares.
    """
    observed: dict[str, dict[tuple[str, str], list[float]]] = {"decode": {}, "prefill": {}}
    lower_bounds: dict[str, dict[tuple[str, str], list[float]]] = {"decode": {}, "prefill": {}}
    shares: dict[tuple[str, str], list[float]] = {}
    items = list(public_observations(rows, model_shape, hardware_lookup))
    for item in items:
        kind = _prefill_kind(item.roofline, item.kind) if item.phase == "prefill" else item.kind
        # Rows measured at an unknown batch are judged against the batch-1 ceiling, which is too
        # high for them: they only say how low efficiency can go, so they widen the band's low end.
        target = lower_bounds if item.batch_unknown else observed
        target[item.phase].setdefault((item.family, kind), []).append(item.efficiency)
        if item.phase == "prefill" and not item.batch_unknown:
            shares.setdefault((item.family, kind), []).append(item.roofline.prefill_attention_share or 0.0)
    slowdown = attention_slowdown(
        {key: list(zip(observed["prefill"][key], shares[key], strict=True)) for key in shares}
    )
    # Each prefill efficiency as its matmul equivalent: what it would be without the attention.
    observed["prefill"] = {
        key: [e / prefill_efficiency(a, 1.0, 1.0 / slowdown) for e, a in zip(values, shares[key], strict=True)]
        for key, values in observed["prefill"].items()
    }

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
        for key, values in lower_bounds[phase].items():
            if key in table:
                prior = table[key]
                table[key] = EfficiencyPrior(prior.median, min(prior.p10, *values), prior.p90, prior.n)
        tables[phase] = table
    tables["attention"] = {("*", "*"): EfficiencyPrior(slowdown, slowdown, slowdown, len(items))}
    return tables


#: Attention slowdowns :func:`attention_slowdown` tries: 1 (as fast per FLOP as the matmuls) to 20.
SLOWDOWN_GRID = tuple(round(math.exp(i * math.log(20.0) / 300), 4) for i in range(301))


def attention_slowdown(cells: Mapping[tuple[str, str], list[tuple[float, float]]]) -> float:
    """The ``r`` of ``efficiency = e_cell / (1 + a × (r - 1))`` that leaves the least squared log
    residual around each cell's mean log matmul efficiency (``cells``: per calibration cell, the
    rows' ``(measured / ceiling, attention share)``). A grid search over :data:`SLOWDOWN_GRID`:
    one parameter, and the cells' means follow in closed form. 1 when no row has attention."""
    best, best_loss = 1.0, math.inf
    for r in SLOWDOWN_GRID:
        loss = 0.0
        for pairs in cells.values():
            logs = [math.log(e) + math.log1p(a * (r - 1.0)) for e, a in pairs if e > 0]
            if len(logs) > 1:
                mean = sum(logs) / len(logs)
                loss += sum((v - mean) ** 2 for v in logs)
        if loss < best_loss - 1e-12:
            best, best_loss = r, loss
    return best


def _format_table(table: Mapping[tuple[str, str], EfficiencyPrior]) -> str:
    lines = []
    for key in sorted(table, key=lambda k: (k[0] == "*", k)):
        p = table[key]
        lines.append(f"    {key!r}: EfficiencyPrior({p.median:.3f}, {p.p10:.3f}, {p.p90:.3f}, {p.n}),")
    return "\n".join(lines)


def _main(argv: list[str]) -> int:  # pragma: no cover - offline calibration entry point
    import csv
    from pathlib import Path

    # The catalog supplies layer/head shapes; imported here so that importing the prior does
    # not build the catalog.
    from advisor.catalog import Catalog

    if len(argv) > 1:
        print("usage: python -m advisor.ml.prior [PATH/public_runs.csv]", file=sys.stderr)
        return 2
    catalog = Catalog.default()
    model_shape, lookup = catalog_model_shape(catalog), catalog_hardware_lookup(catalog)
    if argv:
        with Path(argv[0]).open(encoding="utf-8", newline="") as handle:
            tables = calibrate(csv.DictReader(handle), model_shape, lookup)
    else:
        tables = calibrate(load_public_rows(), model_shape, lookup)
    for phase, table in tables.items():
        if phase == "attention":
            print(f"PREFILL_ATTENTION_SLOWDOWN = {table['*', '*'].median}")
            continue
        print(f"{phase.upper()}_EFFICIENCY = {{\n{_format_table(table)}\n}}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(_main(sys.argv[1:]))
