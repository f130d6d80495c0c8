"""The physics-shaped base every head's gradient boosting corrects (a hybrid model).

Trees cannot extrapolate: asked about a device or an engine build unlike anything in training,
they answer with the nearest leaf. Each head therefore predicts ``base(x) + trees(x)``, where the
base is a small parametric law with a physical shape, fitted (weighted least squares in log space)
on the same training rows, and the trees learn what is left. For rows like the training data the
trees carry the detail; for rows outside it the base's shape carries the prediction.

* **Decode** (``decode_tok_s``): a decode step takes ``bytes / (e × bandwidth)`` plus a fixed
  overhead per layer (llama.cpp's kernel launches and synchronisations, once per layer; sampling
  folded in), a small cost per extra sequence in the batch and, on a CPU,
  the unpacking of quantized weights. Per stream, against the per-stream ceiling ``C`` at batch
  ``B``, for a model of ``L`` layers with ``N`` active parameters per device on a device of
  compute ``T``::

      log(measured / C) = -log(1/e + C × (t0 × exp(u[cell]) × L / 32 + t1 × (B - 1) + k[q] × N / T))

  so efficiency falls as the ceiling rises (a 1B model on an H100 is launch-bound), as the model
  gets deeper at the same size (an 80-layer 70B model at 4 bits pays 2.5× the overhead of a
  32-layer 8B model at 16 bits, with a similar ceiling) and as the batch grows. ``e``, ``t0``
  and ``t1`` are shared; the overhead belongs to the engine on the platform, so each cell
  (hardware kind × runtime family: CUDA llama.cpp, Metal llama.cpp, a GPU server, ...) scales
  ``t0`` by ``exp(u)``, with a ridge penalty :data:`CELL_PENALTY` pulling ``u`` to 0: a cell seen
  in training gets its own overhead, an unseen one the shared value — except a cell with a cited
  overhead (:data:`OVERHEAD_ANCHORS`: the CUDA-graph servers), whose ridge prior is centred there
  instead, with a strength chosen by cross-validation (:data:`ANCHOR_PENALTY`). An engine that
  pipelines the host's work behind the device's (:data:`PER_STEP_FAMILIES`: MLX) pays its
  overhead once per step: ``L / 32`` is 1 for it. ``k[q]`` is the
  operations per weight that unpacking the weight format ``q`` costs
  (:data:`advisor.ml.features.QUANT_KERNELS`: 0 for floats; one shared value and a
  ridge-penalised offset per format), only on :data:`ALU_RATE_KINDS`. On an NVIDIA GPU of known
  SM count and boost clock, llama.cpp's kernels are capped by instruction issue
  (:data:`ISSUE_FAMILIES`): the bandwidth term is ``1/e × max(1, BW / (SMs × clock × b))``, i.e.
  the effective bandwidth is ``min(BW, SMs × clock × b)``, ``b`` (bytes per SM-cycle) fitted.
* **Prefill** (``prefill_tok_s``): the matmuls and the attention run at different shares of peak
  (:func:`advisor.physics.roofline.prefill_seconds_split`), so with ``a`` the attention share of
  the prefill FLOPs (``prefill_attention_share``, which grows with KV depth)::

      log(measured / C) = p + u[cell] - log(1 + a × (exp(q) - 1))

  ``exp(p + u)`` is the matmul efficiency of the cell and ``exp(q)`` how many times slower per
  FLOP the attention runs (``e_m / e_a``, shared). At depth 0 and a short prompt (``a ≈ 0``) this
  is one efficiency per cell; at 32k depth the attention term carries the prediction, from the
  shape rather than from a leaf. The reference is corrected first where the physics only
  *estimated* the device's compute (:func:`compute_correction`).
* **Everything else** (TTFT, ITL tails): one efficiency per cell, shrunk the same way
  (``log(measured / reference) = p + u[cell]``).

The base is plain numbers (stored in the artifact as a dict, no code), evaluated with numpy for
batches and in plain Python for a few rows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
from scipy.optimize import least_squares

from advisor.ml.features import FEATURES, QUANT_KERNELS

__all__ = [
    "ALU_RATE_KINDS",
    "ANCHOR_PENALTY",
    "CELL_PENALTY",
    "INTERFERENCE_START",
    "INTERLEAVED_FAMILIES",
    "ISSUE_FAMILIES",
    "ISSUE_FORMATS",
    "ISSUE_START",
    "MAX_ROWS",
    "OVERHEAD_ANCHORS",
    "PER_STEP_FAMILIES",
    "REFERENCE_LAYERS",
    "SEQUENCE_ANCHORS",
    "SEQUENCE_ANCHOR_PENALTY",
    "TYPICAL_OPS_PER_BYTE",
    "PhysicalBase",
    "cell_of",
    "compute_correction",
    "fit_base",
]

#: Ridge penalty on the per-cell log offsets (in units of the weighted mean squared log residual
#: of one row): weak, so a cell with a few rows moves freely, but a cell with none stays at the
#: shared value instead of being undetermined. Fixed a priori, not tuned.
CELL_PENALTY = 0.1

#: Median published dense FP16 FLOP per byte of bandwidth of the catalogued devices of a kind that
#: publish one: 30 GPUs (RTX 3090 76 … L40S 419, median 205) and 8 accelerators (median 232). The
#: physics' stand-in for a device without a figure is the kind's *10th percentile*
#: (:data:`advisor.physics.ESTIMATED_OPS_PER_BYTE`, 100), a deliberate understatement; the model's
#: prefill reference uses the typical value instead (:func:`compute_correction`). The catalogue
#: has no published figures for Apple SoCs or CPUs, so those keep the physics' estimate.
TYPICAL_OPS_PER_BYTE: dict[str, float] = {"gpu": 205.0, "accelerator": 232.0}

#: The decode overhead ``t0`` is quoted for a model of this many layers (Llama-2/3 7-8B): a step
#: launches the same kernels once per layer, so the overhead of a model of ``L`` layers is
#: ``t0 × L / 32`` (a 70B model's 80 layers cost 2.5× an 8B model's 32). A model whose depth is
#: unknown is taken to have 32.
REFERENCE_LAYERS = 32

#: Runtime families whose decode overhead is paid once per step, not once per layer. The per-layer
#: overhead is work the step cannot overlap, once per layer: llama.cpp builds and submits its graph
#: node by node every token and synchronises before the next; a serving engine replays the step
#: as captured CUDA graphs (vLLM unless ``--enforce-eager``, docs.vllm.ai design/debug_vllm_compile;
#: SGLang unless ``--disable-cuda-graph``; TensorRT-LLM runs a prebuilt engine), which removes the
#: host's launches but not the device's own cost per layer — a dozen small kernels per layer, each
#: with its launch gap and tail, and under tensor parallelism two all-reduces per layer — so the
#: servers stay per layer, with their own (anchored, :data:`OVERHEAD_ANCHORS`) overhead. With the
#: unknown-batch SGLang rows out of the decode target (:func:`advisor.ml.dataset.observations_from_public`),
#: NIM's 80-layer 70B at 0.58 of its ceiling is what the server cell is fitted on: per layer and
#: anchored it is predicted held out within 4-7 %, per step 10-14 % (docs/model.md). mlx-lm builds
#: the step's graph per layer in Python too, but dispatches step n+1 with ``mx.async_eval`` before
#: it reads step n's token (``mlx_lm/generate.py``, ``generate_step``), so that work overlaps the
#: previous step's GPU run and only the per-step synchronisation remains (held out: MLX 20 % per
#: layer, 13 % per step).
PER_STEP_FAMILIES = frozenset({"mlx"})

#: Kinds whose decode step pays for unpacking quantized weights on top of reading them. A CPU's
#: catalogued figure is the rate of the SIMD units that do the unpacking (cores × clock × FMA
#: width, ``hardware_compute.csv``), and its few cores issue the loads and unpack in turn, so the
#: two add up: llama.cpp's CPU IQ2/IQ3 types decode at 14-34 % of the bandwidth ceiling where its
#: Q8_0 reaches 57-76 % (IK_CPU_2024, both CPUs). A GPU hides the unpacking behind memory latency with thousands
#: of threads in flight, and its catalogued figure is the matrix-unit rate (A100: 312 dense FP16
#: tensor TFLOPS against 19.5 FP32 on its vector units), which would understate the cost anyway.
#: Apple GPUs were tried too (their figure is the ALU rate): leave-one-source-out decode got
#: worse, 13.3 → 14.3 % (docs/model.md), so they are left out with the other GPUs.
ALU_RATE_KINDS = frozenset({"cpu"})

#: Cited decode overhead (seconds, for a model of :data:`REFERENCE_LAYERS` layers) of the engines
#: that replay a decode step as captured CUDA graphs, per base cell: the centre of a ridge prior on
#: the cell's ``log(t0 × exp(u))`` (:data:`ANCHOR_PENALTY`), so a cell with few rows, or none in a
#: fold, is not left to the llama.cpp-dominated shared value. checked: vLLM's V0 engine left a GPU
#: bubble of about 4 ms per decode step for the scheduler, input preparation and the GPU→CPU copy
#: of the sampled token (vllm-project/vllm#6854, "[RFC]: Multi-Step Scheduling": "each highlighted
#: redbox is about 4ms of GPU bubble", 5-13 ms); asynchronous scheduling overlaps that work with the
#: GPU's, measured down to a 150-170 µs token gap (vllm-project/vllm#11133, on #10634's Llama-2-7B:
#: "about 200-300us"); the vLLM V1 blog (2025-01-24, "Optimized Execution Loop & API Server") names
#: that CPU overhead as what matters for Llama-8B on an H100, whose GPU step is ~5 ms; SGLang's
#: zero-overhead batch scheduler (lmsys.org, SGLang v0.4) and TensorRT-LLM's overlap scheduler
#: (nvidia.github.io/TensorRT-LLM features/overlap-scheduler, on by default) run step n+1 on the GPU
#: while the CPU finishes step n. All of these are 32-layer models. The centre is the geometric mean
#: of the synchronous 4 ms and the overlapped 0.25 ms: 1 ms.
OVERHEAD_ANCHORS: dict[str, float] = {"gpu/server": 1.0e-3}

#: Strength of the anchor's ridge prior, in the units of :data:`CELL_PENALTY` (the weighted mean
#: squared log residual of one row): chosen over {0, 0.03, 0.1, 0.3, 1, 3} by the grouped
#: cross-validation of the decode head (the mean of its by-device and by-source model MdAPE, the
#: groupings the bands and the shrinkage are calibrated on; docs/model.md, "This round").
ANCHOR_PENALTY = 0.1

#: Cited cost of one extra sequence in a decode step (seconds, beyond the KV bytes the ceiling
#: already counts) of the engines that batch continuously, per base cell: the centre of a ridge
#: prior on the cell's ``log(t1 × exp(v))`` (:data:`SEQUENCE_ANCHOR_PENALTY`), so a server is
#: not charged llama.cpp's batched-bench cost per sequence (fitted 0.54 ms) when no server row
#: isolates its own. checked: ai-dynamo/aiconfigurator#1164 (``vllm_backend.py``,
#: ``_decode_overhead_factor``) calibrates production vLLM's decode step against its kernels
#: alone on an H200 (vLLM 0.18.0, Qwen3-8B, b = 1…62) as ``1 + 0.084 × (b − 1)^0.662``: at
#: b = 16 the step costs 1.50× its kernels, 0.034× the kernel time per extra sequence, which
#: for an 8B BF16 model's 16 GB of weights at 4.8 TB/s (3.4 ms) is 0.11 ms; the host side of it
#: is small (vllm-project/vllm#46112: the scheduler's per-step output loop takes 0.142 ms at
#: 128 requests, "negligible" at 16 or fewer).
SEQUENCE_ANCHORS: dict[str, float] = {"gpu/server": 1.1e-4}

#: Strength of the per-sequence anchor's ridge prior (units of :data:`CELL_PENALTY`), chosen over
#: {0.1, 0.3, 1, 3, 10, 30} by the decode head's grouped cross-validation (the mean of its by-device
#: and by-source model MdAPE, as for :data:`ANCHOR_PENALTY`; docs/model.md, "This round (batched
#: servers)"). Beside it the offsets carry the cells' ridge penalty toward the shared ``t1``.
SEQUENCE_ANCHOR_PENALTY = 10.0

#: Runtime families whose decode steps share the device with other requests' prefills
#: (continuous batching: vLLM, SGLang and TensorRT-LLM schedule a new request's prefill, whole or
#: in chunks, between or inside the running requests' decode steps). At ``B`` concurrent
#: requests of prompt ``P`` and output ``O``, each stream's ``O`` tokens wait, on average, for
#: the ``B − 1`` other requests' prefills once each, so a step costs ``(B − 1) × t_p / O`` more,
#: with ``t_p = 2 × P × N / (e_i × T)`` the prefill's matmul time (``N`` active parameters per
#: device, ``T`` its 16-bit compute): what a client's ITL at a concurrency measures. NIM's ITL at
#: 5, 25 and 50 requests of 5,000 tokens in, 500 out (NIM_L33_70B) is the batch-1 step plus
#: that, within 5-19 % with ``e_i`` its TTFT's efficiency (docs/model.md). ``e_i`` is one shared
#: fitted parameter (``log 1/e_i``, :data:`INTERFERENCE_START` where no row sets it).
#: llama.cpp's batched-bench prefills every sequence before decoding, so it pays none.
INTERLEAVED_FAMILIES = frozenset({"server"})

#: ``log(1 / e_i)`` where no training row determines it: the prefill base's matmul efficiency of
#: the GPU servers on the published runs, 0.50 (docs/model.md).
INTERFERENCE_START = math.log(2.0)

#: Runtime families whose decode kernels on an NVIDIA GPU are capped by instruction issue, not
#: only by bandwidth (docs/model.md, Session 7): llama.cpp's batch-1 F16 decode of Llama-3-8B
#: moves about 5.5 bytes per SM per clock cycle on the A100 SXM and PCIe, the H100 PCIe and the
#: RTX 3090, whatever their bandwidth, so its effective bandwidth is
#: ``min(bandwidth, SMs × boost clock × b)``. ``b`` (bytes per SM-cycle) is fitted with the
#: base, one per :data:`ISSUE_FORMATS` group.
ISSUE_FAMILIES = frozenset({"llamacpp"})

#: The weight-format groups with their own issue rate ``b``: ``"*"`` for one for all formats.
ISSUE_FORMATS: tuple[str, ...] = ("*",)

#: Starting value of ``log b`` (a start for the least squares only, the order the A100 rows show).
ISSUE_START = math.log(5.5)

#: The base is fitted on at most this many rows (a random sample of larger training sets).
MAX_ROWS = 20_000

_IDX = {name: i for i, name in enumerate(FEATURES)}
_DECODE = "decode"
_EFFICIENCY = "efficiency"
_PREFILL = "prefill"
_N_SHARED = {_DECODE: 3, _EFFICIENCY: 1, _PREFILL: 2}


def cell_of(kind: object, family: object) -> str:
    """``"gpu/llamacpp"``: the base's cell for a hardware kind and runtime family (``?`` if
    missing)."""
    return f"{kind if isinstance(kind, str) else '?'}/{family if isinstance(family, str) else '?'}"


def _layer_ratio(log_layers: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Layers ÷ :data:`REFERENCE_LAYERS` (1 where the model's depth is unknown)."""
    return np.asarray(np.exp(np.nan_to_num(log_layers, nan=math.log(REFERENCE_LAYERS))) / REFERENCE_LAYERS)


def _unpack_seconds(frame: pd.DataFrame) -> npt.NDArray[np.float64]:
    """Active parameters per device (×1e9) ÷ compute per device (×1e12): seconds per decode step
    for each operation spent unpacking one weight."""
    log_params = frame["log_active_params_b"].to_numpy(dtype=np.float64)
    tp = np.maximum(frame["tensor_parallel"].to_numpy(dtype=np.float64), 1.0)
    log_tflops = frame["log_tflops"].to_numpy(dtype=np.float64)
    seconds = np.exp(log_params - log_tflops) / np.nan_to_num(tp, nan=1.0) * 1e-3
    alu = np.isin(frame["hardware_kind"].to_numpy(dtype=object), list(ALU_RATE_KINDS))
    return np.asarray(np.where(alu, np.nan_to_num(seconds, nan=0.0, posinf=0.0), 0.0), dtype=np.float64)


def _interference_seconds(frame: pd.DataFrame) -> npt.NDArray[np.float64]:
    """``2 × P × N / T / O``: seconds per decode step another request's prefill costs at full
    efficiency, spread over this request's output (0 where the family does not interleave, or
    the prompt or the output is unknown). ``O`` is recovered from the mean decode context,
    ``depth + P + O / 2``."""
    prompt = np.expm1(frame["log_prompt_tokens"].to_numpy(dtype=np.float64))
    depth = np.nan_to_num(np.expm1(frame["log_kv_depth_tokens"].to_numpy(dtype=np.float64)), nan=0.0)
    context = np.expm1(frame["log_context_tokens"].to_numpy(dtype=np.float64))
    output = 2.0 * (context - depth - prompt)
    log_params = frame["log_active_params_b"].to_numpy(dtype=np.float64)
    tp = np.maximum(np.nan_to_num(frame["tensor_parallel"].to_numpy(dtype=np.float64), nan=1.0), 1.0)
    log_tflops = frame["log_tflops"].to_numpy(dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        seconds = 2.0 * prompt * np.exp(log_params - log_tflops) / tp * 1e-3 / output
    interleaved = np.isin(frame["runtime_family"].to_numpy(dtype=object), list(INTERLEAVED_FAMILIES))
    valid = interleaved & (output >= 1.0) & (prompt > 0) & np.isfinite(seconds)
    return np.asarray(np.where(valid, seconds, 0.0), dtype=np.float64)


def _kind_level(cell: str) -> str:
    return cell.split("/", 1)[0] + "/*"


def compute_correction(
    kind: object, estimated: float, log_tflops: float, log_bandwidth_gb_s: float, vendor: object = None
) -> float:
    """Log factor by which an NVIDIA GPU's or accelerator's *estimated* compute understates a
    typical one.

    ``max(0, log(TYPICAL_OPS_PER_BYTE[kind]) − log(estimated TFLOPS × 1000 / bandwidth))`` when the
    compute figure is the physics' stand-in and the vendor is NVIDIA, else 0. An inline NVIDIA
    device of 273 GB/s (stand-in 27 TFLOPS) gets log(205/100). The typical ratio is the catalogue's
    median, which datacenter and NVIDIA parts dominate: an AMD or Intel iGPU or APU given by its
    bandwidth alone keeps the conservative stand-in (issue #17 reports such an APU, raised to the
    median, predicted about 10× too fast), as does a device of unknown vendor.
    """
    if not estimated or not isinstance(kind, str) or kind not in TYPICAL_OPS_PER_BYTE:
        return 0.0
    if not isinstance(vendor, str) or vendor.strip().lower() != "nvidia":
        return 0.0
    if not (math.isfinite(log_tflops) and math.isfinite(log_bandwidth_gb_s)):
        return 0.0
    ops_per_byte = math.exp(log_tflops - log_bandwidth_gb_s) * 1000.0
    return max(0.0, math.log(TYPICAL_OPS_PER_BYTE[kind] / ops_per_byte))


@dataclass(frozen=True)
class _Inputs:
    """The columns the base reads, as arrays."""

    cell: npt.NDArray[np.object_]
    log_ceiling: npt.NDArray[np.float64]
    batch: npt.NDArray[np.float64]
    correction: npt.NDArray[np.float64]
    attention: npt.NDArray[np.float64]
    layers: npt.NDArray[np.float64]
    #: The row's runtime family (None when unknown).
    family: npt.NDArray[np.object_]
    #: Seconds per unpacking operation per weight for one decode step: active parameters per
    #: device ÷ the device's 16-bit compute (0 where either is unknown).
    unpack: npt.NDArray[np.float64]
    #: The row's :data:`QUANT_KERNELS` code, -1 when unknown.
    kernel: npt.NDArray[np.intp]
    #: Seconds per decode step one other request's prefill costs at full efficiency
    #: (:data:`INTERLEAVED_FAMILIES`; 0 elsewhere).
    interference: npt.NDArray[np.float64]
    #: ``log(bandwidth per device / (SMs × GHz))`` of the rows an issue cap applies to
    #: (:data:`ISSUE_FAMILIES` on a GPU with both figures), NaN elsewhere.
    issue: npt.NDArray[np.float64]

    @classmethod
    def of_frame(cls, frame: pd.DataFrame, *, corrected: bool) -> _Inputs:
        kinds, families = frame["hardware_kind"].tolist(), frame["runtime_family"].tolist()
        # One label per distinct (kind, family) pair, shared by reference across rows.
        labels: dict[tuple[object, object], str] = {}
        cell = np.array(
            [
                labels.get((k, f)) or labels.setdefault((k, f), cell_of(k, f))
                for k, f in zip(kinds, families, strict=True)
            ],
            dtype=object,
        )
        concurrency = frame["log_concurrency"].to_numpy(dtype=np.float64)
        correction = np.zeros(len(frame))
        if corrected:
            columns = zip(
                kinds,
                frame["tflops_estimated"].tolist(),
                frame["log_tflops"].tolist(),
                frame["log_bandwidth_gb_s"].tolist(),
                frame["vendor"].tolist(),
                strict=True,
            )
            correction = np.array([compute_correction(*c) for c in columns], dtype=np.float64)
        attention = np.clip(np.nan_to_num(frame["prefill_attention_share"].to_numpy(dtype=np.float64), nan=0.0), 0, 1)
        return cls(
            cell,
            frame["log_decode_ceiling"].to_numpy(dtype=np.float64),
            np.exp(np.nan_to_num(concurrency, nan=0.0)),
            correction,
            attention,
            _layer_ratio(frame["log_layers"].to_numpy(dtype=np.float64)),
            np.array(families, dtype=object),
            _unpack_seconds(frame),
            np.nan_to_num(frame["quant_kernel"].to_numpy(dtype=np.float64), nan=-1.0).astype(np.intp),
            _interference_seconds(frame),
            _issue_gap(frame),
        )


def _issue_gap(frame: pd.DataFrame) -> npt.NDArray[np.float64]:
    """``log(bandwidth / (SMs × GHz))`` where the issue cap applies (:data:`ISSUE_FAMILIES`), NaN
    elsewhere (and for frames from before the ``log_issue_rate`` column)."""
    if "log_issue_rate" not in frame:
        return np.full(len(frame), np.nan)
    gap = frame["log_bandwidth_gb_s"].to_numpy(dtype=np.float64) - frame["log_issue_rate"].to_numpy(dtype=np.float64)
    capped = np.isin(frame["runtime_family"].to_numpy(dtype=object), list(ISSUE_FAMILIES))
    return np.asarray(np.where(capped, gap, np.nan), dtype=np.float64)


def _issue_group(code: float) -> str:
    """The :data:`ISSUE_FORMATS` group of a :data:`QUANT_KERNELS` code."""
    if ISSUE_FORMATS == ("*",):
        return "*"
    return "float" if code == 0 else "quant"


def _issue_excess(gap: npt.NDArray[np.float64], log_b: npt.NDArray[np.float64] | float) -> Any:
    """``log max(1, bandwidth / (SMs × clock × b))`` (0 where no cap applies)."""
    return np.where(np.isfinite(gap), np.maximum(np.nan_to_num(gap, nan=0.0) - log_b, 0.0), 0.0)


@dataclass(frozen=True)
class PhysicalBase:
    """A fitted base (see the module docstring). ``params`` are ``(log 1/e, log t0, log t1)`` for
    the decode shape, ``(p, q)`` for the prefill shape (log matmul efficiency, log attention
    slowdown) and ``(p,)`` for the efficiency shape; ``cells`` the per-cell offsets."""

    shape: str
    params: tuple[float, ...]
    cells: Mapping[str, float] = field(default_factory=dict)
    corrected: bool = False
    #: Decode: the per-step overhead scales with the model's layers (:data:`REFERENCE_LAYERS`).
    #: False for bases stored before it (one overhead per step whatever the depth).
    per_layer: bool = False
    #: Decode: log operations per weight that unpacking each :data:`QUANT_KERNELS` format costs
    #: (``"*"``: the shared value, for a format without rows of its own). Empty for bases stored
    #: before it (no unpacking term).
    kernels: Mapping[str, float] = field(default_factory=dict)
    #: Decode: runtime families whose overhead is per step, not per layer
    #: (:data:`PER_STEP_FAMILIES`). Empty for bases stored before it.
    per_step: frozenset[str] = frozenset()
    #: Decode: log offsets of the per-sequence cost ``t1`` of the cells with a cited one
    #: (:data:`SEQUENCE_ANCHORS`). Empty for bases stored before it (one ``t1`` for all).
    sequence_cells: Mapping[str, float] = field(default_factory=dict)
    #: Decode: ``log(1 / e_i)`` of the prefill interference (:data:`INTERLEAVED_FAMILIES`); None
    #: for bases stored before it (no interference term).
    interference: float | None = None
    #: Decode: ``log b`` (bytes per SM-cycle) of the issue cap per :data:`ISSUE_FORMATS` group.
    #: Empty for bases stored before it (no cap).
    issue: Mapping[str, float] = field(default_factory=dict)

    def _issue_log_b(self, kernel: npt.NDArray[np.intp]) -> npt.NDArray[np.float64]:
        if not self.issue:
            return np.full(len(kernel), np.inf)
        if "*" in self.issue:
            return np.full(len(kernel), self.issue["*"])
        return np.where(kernel == 0, self.issue.get("float", np.inf), self.issue.get("quant", np.inf))

    def _layers(self, x: _Inputs) -> npt.NDArray[np.float64] | float:
        """Each row's overhead multiplier: layers ÷ 32, or 1 for a per-step family."""
        if not self.per_layer:
            return 1.0
        if not self.per_step:
            return x.layers
        return np.asarray(np.where(np.isin(x.family, list(self.per_step)), 1.0, x.layers), dtype=np.float64)

    # ------------------------------------------------------------------ evaluation

    def _evaluate(
        self,
        params: npt.NDArray[np.float64],
        u: npt.NDArray[np.float64],
        x: _Inputs,
        unpack_ops: npt.NDArray[np.float64] | None = None,
        layers: npt.NDArray[np.float64] | float = 1.0,
        sequence: npt.NDArray[np.float64] | float = 0.0,
        interference: float | None = None,
        issue: npt.NDArray[np.float64] | float = 0.0,
    ) -> Any:
        if self.shape == _DECODE:
            ceiling = np.exp(x.log_ceiling)
            overhead = np.exp(params[1] + u) * layers + np.exp(params[2] + sequence) * (x.batch - 1.0)
            if interference is not None:
                overhead = overhead + np.exp(interference) * x.interference * (x.batch - 1.0)
            if unpack_ops is not None:
                overhead = overhead + unpack_ops * x.unpack
            return x.correction - np.log(np.exp(params[0] + issue) + ceiling * overhead)
        if self.shape == _PREFILL:
            return x.correction + params[0] + u - np.log1p(x.attention * np.expm1(params[1]))
        return x.correction + params[0] + u

    def predict_frame(self, frame: pd.DataFrame) -> npt.NDArray[np.float64]:
        """``log(measured / reference)`` according to the base, for a feature frame."""
        x = _Inputs.of_frame(frame, corrected=self.corrected)
        known: dict[str, float] = {}  # a handful of distinct cells over thousands of rows
        u = np.array([known[c] if c in known else known.setdefault(c, self._offset(c)) for c in x.cell.tolist()])
        ops = None
        if self.kernels:
            per_code = np.array([self._unpack_ops(code) for code in range(len(QUANT_KERNELS))] + [0.0])
            ops = per_code[np.where(x.kernel >= 0, x.kernel, len(QUANT_KERNELS))]
        sequence = self._sequence_offsets(x.cell)
        issue = _issue_excess(x.issue, self._issue_log_b(x.kernel)) if self.issue else 0.0
        return np.asarray(
            self._evaluate(np.asarray(self.params), u, x, ops, self._layers(x), sequence, self.interference, issue),
            dtype=np.float64,
        )

    def _sequence_offsets(self, cells: npt.NDArray[np.object_]) -> npt.NDArray[np.float64] | float:
        """Each row's log offset of the per-sequence cost (0 outside :attr:`sequence_cells`)."""
        if not self.sequence_cells:
            return 0.0
        return np.array([self.sequence_cells.get(c, 0.0) for c in cells.tolist()], dtype=np.float64)

    def _unpack_ops(self, code: int) -> float:
        """Operations per weight unpacking a format costs (0 for floats and unknown formats)."""
        if not self.kernels or not 0 < code < len(QUANT_KERNELS):
            return 0.0
        log_ops = self.kernels.get(QUANT_KERNELS[code], self.kernels.get("*"))
        return 0.0 if log_ops is None else math.exp(log_ops)

    def _offset(self, cell: str) -> float:
        return self.cells.get(_kind_level(cell), 0.0) + self.cells.get(cell, 0.0)

    def predict_rows(self, rows: Sequence[Sequence[Any]]) -> npt.NDArray[np.float64]:
        """The same for feature rows (tuples in :data:`FEATURES` order), in plain Python."""
        return np.array([self.predict_row(row) for row in rows], dtype=np.float64)

    def predict_row(self, row: Sequence[Any]) -> float:
        kind, family = row[_IDX["hardware_kind"]], row[_IDX["runtime_family"]]
        u = self._offset(cell_of(kind, family))
        correction = 0.0
        if self.corrected:
            correction = compute_correction(
                kind,
                float(row[_IDX["tflops_estimated"]]),  # type: ignore[arg-type]
                float(row[_IDX["log_tflops"]]),  # type: ignore[arg-type]
                float(row[_IDX["log_bandwidth_gb_s"]]),  # type: ignore[arg-type]
                row[_IDX["vendor"]],
            )
        p = self.params
        if self.shape == _DECODE:
            log_concurrency = float(row[_IDX["log_concurrency"]])  # type: ignore[arg-type]
            batch = 1.0 if math.isnan(log_concurrency) else math.exp(log_concurrency)
            ceiling = math.exp(float(row[_IDX["log_decode_ceiling"]]))  # type: ignore[arg-type]
            layers = 1.0
            if self.per_layer and family not in self.per_step:
                log_layers = float(row[_IDX["log_layers"]])  # type: ignore[arg-type]
                layers = 1.0 if math.isnan(log_layers) else math.exp(log_layers) / REFERENCE_LAYERS
            cell = cell_of(kind, family)
            overhead = math.exp(p[1] + u) * layers + math.exp(p[2] + self.sequence_cells.get(cell, 0.0)) * (batch - 1.0)
            if self.interference is not None and batch > 1.0 and family in INTERLEAVED_FAMILIES:
                overhead += math.exp(self.interference) * (batch - 1.0) * _row_interference(row)
            if self.kernels:
                code = float(row[_IDX["quant_kernel"]])  # type: ignore[arg-type]
                ops = 0.0 if math.isnan(code) or kind not in ALU_RATE_KINDS else self._unpack_ops(int(code))
                if ops > 0:
                    seconds = math.exp(
                        float(row[_IDX["log_active_params_b"]])  # type: ignore[arg-type]
                        - float(row[_IDX["log_tflops"]])  # type: ignore[arg-type]
                    )
                    tp = max(float(row[_IDX["tensor_parallel"]]), 1.0)  # type: ignore[arg-type]
                    seconds = seconds / tp * 1e-3
                    if math.isfinite(seconds):
                        overhead += ops * seconds
            excess = 0.0
            if self.issue and family in ISSUE_FAMILIES and len(row) > _IDX["log_issue_rate"]:
                rate = float(row[_IDX["log_issue_rate"]])  # type: ignore[arg-type]
                code = float(row[_IDX["quant_kernel"]])  # type: ignore[arg-type]
                log_b = self.issue.get(_issue_group(code)) if not math.isnan(code) or "*" in self.issue else None
                if log_b is not None and not math.isnan(rate):
                    excess = max(float(row[_IDX["log_bandwidth_gb_s"]]) - rate - log_b, 0.0)  # type: ignore[arg-type]
            return correction - math.log(math.exp(p[0] + excess) + ceiling * overhead)
        if self.shape == _PREFILL:
            share = float(row[_IDX["prefill_attention_share"]])  # type: ignore[arg-type]
            share = 0.0 if math.isnan(share) else min(max(share, 0.0), 1.0)
            return correction + p[0] + u - math.log1p(share * math.expm1(p[1]))
        return correction + p[0] + u

    # ------------------------------------------------------------------ storage

    def to_dict(self) -> dict[str, Any]:
        """Plain types only (the artifact is a skops file of plain containers)."""
        return {
            "shape": self.shape,
            "params": [float(v) for v in self.params],
            "cells": {str(k): float(v) for k, v in self.cells.items()},
            "corrected": bool(self.corrected),
            "per_layer": bool(self.per_layer),
            "kernels": {str(k): float(v) for k, v in self.kernels.items()},
            "per_step": sorted(self.per_step),
            "sequence_cells": {str(k): float(v) for k, v in self.sequence_cells.items()},
            "interference": None if self.interference is None else float(self.interference),
            "issue": {str(k): float(v) for k, v in self.issue.items()},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PhysicalBase:
        shape = str(data["shape"])
        if shape not in _N_SHARED:
            raise ValueError(f"unknown base shape {shape!r}")
        params = tuple(float(v) for v in data["params"])
        if len(params) != _N_SHARED[shape]:
            raise ValueError(f"a {shape} base has {len(params)} parameters")
        cells = {str(k): float(v) for k, v in dict(data["cells"]).items()}
        kernels = {str(k): float(v) for k, v in dict(data.get("kernels") or {}).items()}
        per_step = frozenset(str(f) for f in data.get("per_step") or ())
        sequence_cells = {str(k): float(v) for k, v in dict(data.get("sequence_cells") or {}).items()}
        interference = data.get("interference")
        issue = {str(k): float(v) for k, v in dict(data.get("issue") or {}).items()}
        return cls(
            shape,
            params,
            cells,
            bool(data.get("corrected", False)),
            bool(data.get("per_layer", False)),
            kernels,
            per_step,
            sequence_cells,
            None if interference is None else float(interference),
            issue,
        )


def _row_interference(row: Sequence[Any]) -> float:
    """:func:`_interference_seconds` for one feature row (the family checked by the caller)."""
    values = [
        float(row[_IDX[name]])  # type: ignore[arg-type]
        for name in (
            "log_prompt_tokens",
            "log_kv_depth_tokens",
            "log_context_tokens",
            "log_active_params_b",
            "log_tflops",
            "tensor_parallel",
        )
    ]
    log_prompt, log_depth, log_context, log_params, log_tflops, tp = values
    if math.isnan(log_prompt) or math.isnan(log_context) or math.isnan(log_params) or math.isnan(log_tflops):
        return 0.0
    prompt = math.expm1(log_prompt)
    depth = 0.0 if math.isnan(log_depth) else math.expm1(log_depth)
    output = 2.0 * (math.expm1(log_context) - depth - prompt)
    if output < 1.0 or prompt <= 0:
        return 0.0
    tp = 1.0 if math.isnan(tp) else max(tp, 1.0)
    seconds = 2.0 * prompt * math.exp(log_params - log_tflops) / tp * 1e-3 / output
    return seconds if math.isfinite(seconds) else 0.0


def fit_base(
    target: str, frame: pd.DataFrame, y: npt.NDArray[np.float64], weight: npt.NDArray[np.float64]
) -> PhysicalBase:
    """Fit the base of ``target`` on feature rows, log ratios and weights (see the module
    docstring): Levenberg-Marquardt on the weighted log residuals plus the cell penalty."""
    shape = {"decode_tok_s": _DECODE, "prefill_tok_s": _PREFILL}.get(target, _EFFICIENCY)
    corrected = target == "prefill_tok_s"
    per_layer = shape == _DECODE
    per_step = PER_STEP_FAMILIES if per_layer else frozenset()
    if len(frame) > MAX_ROWS:
        # A dozen parameters: a fixed random sample determines them as well as every row does,
        # at a fraction of the cost (each iteration evaluates the law once per parameter).
        keep = np.sort(np.random.default_rng(0).choice(len(frame), size=MAX_ROWS, replace=False))
        frame, y, weight = frame.iloc[keep], y[keep], weight[keep]
    x = _Inputs.of_frame(frame, corrected=corrected)
    names, codes = np.unique(x.cell, return_inverse=True)
    # Decode: an anchored cell gets its offset even without rows of its own (the anchor sets it).
    anchors = dict(OVERHEAD_ANCHORS) if shape == _DECODE and ANCHOR_PENALTY > 0 else {}
    missing = sorted(set(anchors) - set(names.tolist()))
    if missing:
        names = np.concatenate([names, np.array(missing, dtype=object)])
    kind_names, kind_codes = np.unique([_kind_level(c) for c in names.tolist()], return_inverse=True)
    n_cells = len(names)
    n_shared = _N_SHARED[shape]
    template = PhysicalBase(shape, (0.0,) * n_shared, {}, corrected, per_layer, per_step=per_step)
    layers = template._layers(x)
    sw = np.sqrt(weight / weight.mean())
    scale = math.sqrt(CELL_PENALTY)
    # Decode: one shared unpacking cost (log ops per weight) and one offset per quantized format,
    # ridge-penalised like the cells (a format without rows takes the shared cost).
    n_kernels = len(QUANT_KERNELS) if shape == _DECODE else 0
    unpacked = (x.kernel > 0) & (x.unpack > 0)
    kernel_index = np.clip(x.kernel, 0, None)
    name_list = names.tolist()
    anchor_cells = np.array([name_list.index(c) for c in anchors], dtype=np.intp)
    anchor_logs = np.log(np.array(list(anchors.values()), dtype=np.float64))
    anchor_scale = math.sqrt(ANCHOR_PENALTY)
    # Decode: the prefill interference (log 1/e_i) and the per-sequence cost's offsets of the cells
    # with a cited one, after the cells' offsets.
    n_u = n_cells + len(kind_names)
    interleaved = shape == _DECODE and bool(np.any(x.interference > 0))
    sequence = dict(SEQUENCE_ANCHORS) if shape == _DECODE and SEQUENCE_ANCHOR_PENALTY > 0 else {}
    sequence_names = sorted(sequence)
    n_extra = (1 + len(sequence_names)) if shape == _DECODE else 0
    # Decode: log b of the issue cap per format group, after the extras (only with capped rows).
    capped = shape == _DECODE and bool(np.any(np.isfinite(x.issue)))
    issue_groups = list(ISSUE_FORMATS) if capped else []
    issue_index = np.array(
        [issue_groups.index(_issue_group(k)) if issue_groups else 0 for k in x.kernel.tolist()], dtype=np.intp
    )
    sequence_index = np.array(
        [sequence_names.index(c) if c in sequence else len(sequence_names) for c in x.cell.tolist()], dtype=np.intp
    )
    sequence_logs = np.log(np.array([sequence[c] for c in sequence_names], dtype=np.float64))
    sequence_scale = math.sqrt(SEQUENCE_ANCHOR_PENALTY)
    u_end = n_shared + n_kernels + n_u
    seq_end = u_end + n_extra

    def residuals(theta: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        shared, u = theta[:n_shared], theta[n_shared + n_kernels : u_end]
        per_cell = u[:n_cells] + u[n_cells:][kind_codes]
        ops = None
        if n_kernels:
            log_ops = theta[n_shared] + theta[n_shared + 1 : n_shared + n_kernels]
            ops = np.where(unpacked, np.exp(np.concatenate([[0.0], log_ops])[kernel_index]), 0.0)
        extra: tuple[npt.NDArray[np.float64] | float, float | None] = (0.0, None)
        seq_anchored = np.zeros(0)
        if n_extra:
            v = theta[u_end + 1 : seq_end]
            extra = (np.concatenate([v, [0.0]])[sequence_index], float(theta[u_end]) if interleaved else None)
            # The cited cells' cost per sequence (log t1 + its offset) pulled toward the cited value.
            seq_anchored = sequence_scale * (theta[2] + v - sequence_logs)
        issue: npt.NDArray[np.float64] | float = 0.0
        if issue_groups:
            issue = _issue_excess(x.issue, theta[seq_end:][issue_index])
        fitted = template._evaluate(shared, per_cell[codes], x, ops, layers, *extra, issue)
        # The per-sequence offsets are ridge-penalised like the cells' (so ``t1`` stays tied to the
        # servers' rows in a fold without other batched rows) besides their anchor.
        penalised = np.concatenate([theta[n_shared + 1 : n_shared + n_kernels], u, theta[u_end + 1 : seq_end]])
        # The anchored cells' overhead (log t0 + its offsets) pulled toward the cited value.
        anchored = anchor_scale * (theta[1] + per_cell[anchor_cells] - anchor_logs)
        return np.concatenate([sw * (y - fitted), scale * penalised, anchored, seq_anchored])

    if shape == _DECODE:
        # 1/e = 1.2, t0 = 5 ms, t1 = 0.3 ms: the order of magnitude llama.cpp shows on a GPU.
        start = np.array([math.log(1.2), math.log(0.005), math.log(0.0003)])
    elif shape == _PREFILL:
        # Attention at half the matmul efficiency: the order llama.cpp shows at long depth.
        start = np.array([float(np.average(y - x.correction, weights=weight)), math.log(2.0)])
    else:
        start = np.array([float(np.average(y - x.correction, weights=weight))])
    # Two operations per weight to start with: a scale and an add, the cheapest unpacking.
    kernel_start = np.concatenate([[math.log(2.0)], np.zeros(n_kernels - 1)]) if n_kernels else np.zeros(0)
    extra_start = np.concatenate([[INTERFERENCE_START], np.zeros(n_extra - 1)]) if n_extra else np.zeros(0)
    x0 = np.concatenate([start, kernel_start, np.zeros(n_u), extra_start, np.full(len(issue_groups), ISSUE_START)])
    # Levenberg-Marquardt (MINPACK through scipy): a dozen parameters, forward-difference Jacobian.
    theta = least_squares(residuals, x0, method="lm", x_scale=1.0).x
    labels = names.tolist() + kind_names.tolist()
    offsets = theta[n_shared + n_kernels : u_end].tolist()
    cells = {str(name): float(value) for name, value in zip(labels, offsets, strict=True)}
    kernels: dict[str, float] = {}
    if n_kernels:
        shared_ops = float(theta[n_shared])
        kernels = {"*": shared_ops} | {
            name: shared_ops + float(theta[n_shared + i]) for i, name in enumerate(QUANT_KERNELS) if i > 0
        }
    sequence_cells: dict[str, float] = {}
    interference: float | None = None
    if n_extra:
        sequence_cells = {name: float(theta[u_end + 1 + i]) for i, name in enumerate(sequence_names)}
        # Without interleaved rows nothing sets e_i: the start value (a physical prior) stands.
        interference = float(theta[u_end]) if interleaved else INTERFERENCE_START
    issue_fit = {name: float(theta[seq_end + i]) for i, name in enumerate(issue_groups)}
    if issue_groups and not np.any(_issue_excess(x.issue, theta[seq_end:][issue_index]) > 0):
        # No training row is at its cap: b is undetermined (it stayed at its start), so no cap.
        issue_fit = {}
    return PhysicalBase(
        shape,
        tuple(float(v) for v in theta[:n_shared]),
        cells,
        corrected,
        per_layer,
        kernels,
        per_step,
        sequence_cells,
        interference,
        issue_fit,
    )
