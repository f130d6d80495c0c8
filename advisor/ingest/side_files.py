"""Files that belong beside a benchmark file, and files that are not benchmarks at all
(docs/formats.md §10).

Tools write several files per run; only one of them is the benchmark summary a parser reads. The
others (aiperf's DCGM telemetry, inference-perf's server-side Prometheus aggregates, genai-perf's raw
per-request export, an ``analyze`` checkpoint) are recognised here so that a file sent alone is
answered with a 422 that names the file to send instead, and a file sent in a wrapper beside its
benchmark file is accepted and noted rather than refused. A server response that is no benchmark at
all (an Ollama embedding, a model list) gets a 422 that says what it is.

Some side files say something the benchmark file cannot: where the model sits. Ollama's ``/api/ps``
(``size_vram`` of ``size``) and llama.cpp's start-up log ("offloaded N/M layers to GPU") give the
run's ``metrics.gpu_resident_share``; :func:`apply_side_files` reads them into the runs beside them
(docs/formats.md §10).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from advisor.canonical import CanonicalRun
from advisor.errors import InvalidInput
from advisor.ingest.base import Input, Parser

__all__ = [
    "NOT_BENCHMARKS",
    "SIDE_FILES",
    "Recognised",
    "SideReading",
    "apply_side_files",
    "llamacpp_offload",
    "not_a_benchmark",
    "ollama_resident_share",
    "side_file",
]


@dataclass(frozen=True)
class SideReading:
    """What a side file says about the benchmark runs beside it: the GPU-resident share of the
    model, per model name (``None``: whichever model the runs measured), with the notes to keep."""

    shares: dict[str | None, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    #: The model a llama.cpp log loaded (its ``general.name``), to say so when a run names another.
    loaded_model: str | None = None


@dataclass(frozen=True)
class Recognised:
    """A file recognised for what it is, and what to send instead. ``read`` is set for a side file
    whose values the runs beside it take."""

    name: str
    what: str
    instead: str
    sniff: Callable[[Input], bool]
    read: Callable[[Input, str], SideReading] | None = None


def _aiperf_telemetry(inp: Input) -> bool:
    records = inp.json_lines
    first = records[0] if records else None
    return isinstance(first, dict) and "dcgm_url" in first and "telemetry_data" in first


def _inference_perf_prometheus(inp: Input) -> bool:
    doc = inp.json
    if not isinstance(doc, dict) or set(doc) != {"load_summary", "successes", "failures"}:
        return False
    successes = doc["successes"]
    # The lifecycle report has `latency`; its Prometheus companion has the latencies at the top of
    # `successes`, beside server gauges such as kv_cache_usage_percentage.
    return isinstance(successes, dict) and "latency" not in successes and "kv_cache_usage_percentage" in successes


def _genai_perf_raw(inp: Input) -> bool:
    doc = inp.json
    if not isinstance(doc, dict) or not isinstance(doc.get("experiments"), list) or not doc["experiments"]:
        return False
    first = doc["experiments"][0]
    return isinstance(first, dict) and "requests" in first and "experiment" in first


def _genai_perf_checkpoint(inp: Input) -> bool:
    doc = inp.json
    return isinstance(doc, dict) and isinstance(doc.get("Results"), dict) and "run_configs" in doc["Results"]


def _ps_entries(doc: object) -> list[Mapping[str, object]] | None:
    """The ``models`` of an Ollama ``/api/ps`` answer, or None: each has ``size`` and ``size_vram``,
    or ``expires_at`` alone, since ``size_vram`` is omitted when it is 0 (a model on the CPU).
    ``/api/tags`` lists pulled models with ``modified_at`` and neither."""
    if not isinstance(doc, dict) or "eval_count" in doc:
        return None
    models = doc.get("models")
    if not isinstance(models, list) or not models:
        return None
    if not all(isinstance(m, dict) and "size" in m and ("size_vram" in m or "expires_at" in m) for m in models):
        return None
    return models


def _ollama_ps(inp: Input) -> bool:
    return _ps_entries(inp.json) is not None


def _byte_count(value: object, field_name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise InvalidInput(f"must be a byte count (a number, 0 or more), got {value!r}", field=field_name)
    return float(value)


def ollama_resident_share(entry: Mapping[str, object], field_prefix: str = "models[0]") -> float | None:
    """``size_vram / size`` of one ``/api/ps`` entry (None when ``size`` is 0). ``size`` is the
    memory of the loaded model (weights, KV cache and compute graph); ``size_vram`` the part of it in
    GPU memory, so a share above 1 is a corrupt answer, refused naming the field."""
    size = _byte_count(entry.get("size"), f"{field_prefix}.size")
    vram = _byte_count(entry.get("size_vram", 0), f"{field_prefix}.size_vram")  # omitempty: 0 on the CPU
    if size <= 0:
        return None
    if vram > size:
        raise InvalidInput(
            f"size_vram ({vram:.0f}) exceeds size ({size:.0f}): the GPU cannot hold more than the model",
            field=f"{field_prefix}.size_vram",
        )
    return vram / size


def _read_ollama_ps(inp: Input, name: str) -> SideReading:
    models = _ps_entries(inp.json) or []
    shares: dict[str | None, float] = {}
    for index, entry in enumerate(models):
        share = ollama_resident_share(entry, f"models[{index}]")
        if share is None:
            continue
        for key in ("name", "model"):
            model = entry.get(key)
            if isinstance(model, str) and model.strip():
                shares[model.strip()] = share
        if len(models) == 1:
            shares[None] = share
    note = (
        f"gpu_resident_share from {name} (Ollama /api/ps): size_vram / size of the loaded model "
        "(weights, KV cache and graph)"
    )
    return SideReading(shares, (note,))


# llama.cpp's loader: "load_tensors: offloaded 33/33 layers to GPU" (older builds: "llm_load_tensors:").
_OFFLOADED = re.compile(r"offloaded (\d+)/(\d+) layers to GPU")
# The same line as a log prints it, not quoted in a comment of a config file or script ("#   load_tensors: …").
_OFFLOADED_LOG_LINE = re.compile(r"^(?![ \t]*#).*offloaded \d+/\d+ layers to GPU", re.MULTILINE)
# "load_tensors:        CUDA0 model buffer size =  5049.71 MiB", "CPU_Mapped model buffer size = 245.62 MiB".
# Older builds: "llm_load_tensors:      CUDA0 buffer size =  5049.71 MiB".
_MODEL_BUFFER = re.compile(r"load_tensors:\s+(\S+) (?:model )?buffer size\s*=\s*([0-9.]+) MiB")
_HOST_BUFFERS = ("CPU", "CUDA_Host", "ROCm_Host", "Vulkan_Host", "SYCL_Host")


def _llamacpp_log(inp: Input) -> bool:
    text = inp.text
    if text is None or inp.json is not None or inp.json_lines is not None or _OFFLOADED_LOG_LINE.search(text) is None:
        return False
    # A benchmark log with the loader's lines above its results (llama-batched-bench 2>&1) is the
    # benchmark, not a side file: its parser reads the offload itself.
    from advisor.ingest.registry import parsers

    return not any(_claims(p, inp) for p in parsers())


def _claims(parser: Parser, inp: Input) -> bool:
    try:
        return bool(parser.sniff(inp))
    except Exception:
        return False


def llamacpp_offload(text: str, name: str = "the log") -> tuple[float, list[str]] | None:
    """The GPU-resident share llama.cpp's loader log states, with its notes, or None without an
    "offloaded N/M layers to GPU" line: N / M of the first model loaded, or the device share of its
    model buffers when every layer is "offloaded" but the host keeps far more of the weights than
    the token embeddings (``--n-cpu-moe``, ``-ot exps=CPU``)."""
    matches = list(_OFFLOADED.finditer(text))
    if not matches:
        return None
    on_gpu, total = int(matches[0].group(1)), int(matches[0].group(2))
    if total <= 0 or on_gpu > total:
        raise InvalidInput(f"'offloaded {on_gpu}/{total} layers to GPU' is no share of layers", field="body")
    share = on_gpu / total
    notes = [f"gpu_resident_share = {on_gpu}/{total} from {name} (llama.cpp 'offloaded N/M layers to GPU')"]
    if len(matches) > 1:
        notes.append(
            f"{name} loads {len(matches)} models (a draft model, or a restart): the first, {on_gpu}/{total}, is used"
        )
    # The first model's weight buffers, up to the next load (a draft model loads after the target).
    end = matches[1].start() if len(matches) > 1 else len(text)
    buffers = [(m.group(1), float(m.group(2))) for m in _MODEL_BUFFER.finditer(text, 0, end)]
    host = sum(mib for buf, mib in buffers if buf.startswith(_HOST_BUFFERS))
    device = sum(mib for buf, mib in buffers if not buf.startswith(_HOST_BUFFERS))
    if host + device > 0:
        by_bytes = device / (host + device)
        if by_bytes < share - 0.1:
            notes[0] = (
                f"gpu_resident_share = {by_bytes:.2f} from {name}: the device share of llama.cpp's model buffers "
                f"({device:.0f} MiB on the GPU, {host:.0f} MiB in host memory) although {on_gpu}/{total} layers "
                "are 'offloaded' (--n-cpu-moe or tensor overrides keep weights in system memory)"
            )
            share = by_bytes
    return share, notes


def _read_llamacpp_log(inp: Input, name: str) -> SideReading:
    found = llamacpp_offload(inp.text or "", name)
    if found is None:  # pragma: no cover - the sniff saw the line
        return SideReading()
    share, notes = found
    name_line = _GENERAL_NAME.search(inp.text or "")
    return SideReading({None: share}, tuple(notes), name_line.group(1) if name_line else None)


# The loader's metadata dump: "llama_model_loader: - kv   2:   general.name str   = DeepSeek V3 0324".
_GENERAL_NAME = re.compile(r"general\.name\s+str\s+=\s+(.+?)\s*$", re.MULTILINE)


def _same_model(loaded: str, run_model: str) -> bool:
    """Whether a log's ``general.name`` and a run's model name may be one model: equal, or one
    inside the other, once case and punctuation are dropped ("Llama 2 7B" and "llama-2-7b")."""
    a, b = (re.sub(r"[^a-z0-9]", "", name.lower()) for name in (loaded, run_model))
    return bool(a and b) and (a in b or b in a)


#: Known side files, in the order they are tried.
SIDE_FILES: tuple[Recognised, ...] = (
    Recognised(
        "aiperf_gpu_telemetry",
        "aiperf's gpu_telemetry_export.jsonl (raw DCGM samples)",
        "profile_export_aiperf.json from the same artifacts directory (it holds the telemetry summary)",
        _aiperf_telemetry,
    ),
    Recognised(
        "inference_perf_prometheus",
        "inference-perf's *_prometheus_metrics.json (server-side aggregates)",
        "the *_lifecycle_metrics.json beside it (summary_lifecycle_metrics.json or stage_<n>_lifecycle_metrics.json)",
        _inference_perf_prometheus,
    ),
    Recognised(
        "genai_perf_raw",
        "genai-perf's profile_export.json (raw per-request timestamps)",
        "profile_export_genai_perf.json from the same artifacts directory",
        _genai_perf_raw,
    ),
    Recognised(
        "genai_perf_checkpoint",
        "genai-perf analyze's checkpoint.json",
        "analyze_export_genai_perf.csv, or a run's profile_export_genai_perf.json",
        _genai_perf_checkpoint,
    ),
    Recognised(
        "ollama_ps",
        "Ollama's /api/ps answer (where each loaded model sits: size_vram of size)",
        "the /api/generate or /api/chat response it belongs beside",
        _ollama_ps,
        _read_ollama_ps,
    ),
    Recognised(
        "llamacpp_log",
        "a llama.cpp start-up log (offloaded layers, buffer sizes; no timings)",
        "the benchmark file it belongs beside (llama-bench output, llama-server responses)",
        _llamacpp_log,
        _read_llamacpp_log,
    ),
)


def _ollama_embedding(inp: Input) -> bool:
    doc = inp.json
    if not isinstance(doc, dict) or "eval_count" in doc:
        return False
    vectors = doc.get("embeddings")
    if isinstance(vectors, list) and vectors and isinstance(vectors[0], list):
        return True
    vector = doc.get("embedding")
    return isinstance(vector, list) and bool(vector) and isinstance(vector[0], int | float)


def _openai_embedding(inp: Input) -> bool:
    doc = inp.json
    data = doc.get("data") if isinstance(doc, dict) else None
    return isinstance(data, list) and bool(data) and isinstance(data[0], dict) and data[0].get("object") == "embedding"


def _model_list(inp: Input) -> bool:
    doc = inp.json
    if not isinstance(doc, dict):
        return False
    if _ps_entries(doc) is not None:
        return False  # /api/ps: a side file that says where the model sits
    return (isinstance(doc.get("models"), list) and "eval_count" not in doc) or doc.get("object") == "list"


#: Server responses that hold no measurement at all.
NOT_BENCHMARKS: tuple[Recognised, ...] = (
    Recognised(
        "ollama_embedding",
        "an Ollama /api/embed response (embedding vectors, no generation timings)",
        "an /api/generate or /api/chat response, or run `advisor measure`",
        _ollama_embedding,
    ),
    Recognised(
        "openai_embedding",
        "an OpenAI-style /v1/embeddings response (embedding vectors, no timings)",
        "a benchmark tool's output, or run `advisor measure`",
        _openai_embedding,
    ),
    Recognised(
        "model_list",
        "a model list (/api/tags or /v1/models), not a measurement",
        "a benchmark tool's output, or run `advisor measure`",
        _model_list,
    ),
)


def _first(candidates: tuple[Recognised, ...], inp: Input) -> Recognised | None:
    for candidate in candidates:
        try:
            if candidate.sniff(inp):
                return candidate
        except Exception:  # a sniff must never raise; a recogniser's bug is no reason to fail
            continue
    return None


def side_file(inp: Input) -> Recognised | None:
    """The side file this input is, or None."""
    return _first(SIDE_FILES, inp)


def not_a_benchmark(inp: Input) -> Recognised | None:
    """The kind of non-benchmark response this input is, or None."""
    return _first(NOT_BENCHMARKS, inp)


def _model_share(shares: Mapping[str | None, float], model: object) -> float | None:
    if set(shares) == {None}:
        return shares[None]  # a llama.cpp log: the one model that server loaded
    if isinstance(model, str) and model.strip():
        name = model.strip()
        for key in (name, f"{name}:latest", name.removesuffix(":latest")):
            if key in shares:
                return shares[key]
        return None
    return shares.get(None)


def apply_side_files(runs: Sequence[CanonicalRun], readings: Sequence[tuple[str, SideReading]]) -> None:
    """Fill each run's ``metrics.gpu_resident_share`` from the side files read beside it (the file's
    own figure, when it has one, is kept). An ``/api/ps`` that lists other models than the run's says
    nothing about it, and the run says so."""
    for run in runs:
        for name, reading in readings:
            if not reading.shares:
                continue
            share = _model_share(reading.shares, run.setup.model if isinstance(run.setup.model, str) else None)
            if share is None:
                listed = sorted(k for k in reading.shares if k is not None)
                run.source.notes.append(
                    f"{name} lists no entry for model {run.setup.model!r} ({', '.join(listed)}): "
                    "gpu_resident_share not set"
                )
                continue
            if run.metrics.gpu_resident_share is None:
                run.metrics.gpu_resident_share = share
                run.source.notes.extend(reading.notes)
                model = run.setup.model
                if reading.loaded_model and isinstance(model, str) and not _same_model(reading.loaded_model, model):
                    run.source.notes.append(
                        f"{name} loaded {reading.loaded_model!r} and the run names {model!r}: the share is "
                        "that log's, check they are the same model"
                    )
