"""Files that belong beside a benchmark file, and files that are not benchmarks at all
(docs/formats.md §10).

Tools write several files per run; only one of them is the benchmark summary a parser reads. The
others (aiperf's DCGM telemetry, inference-perf's server-side Prometheus aggregates, genai-perf's raw
per-request export, an ``analyze`` checkpoint) are recognised here so that a file sent alone is
answered with a 422 that names the file to send instead, and a file sent in a wrapper beside its
benchmark file is accepted and noted rather than refused. A server response that is no benchmark at
all (an Ollama embedding, a model list) gets a 422 that says what it is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from advisor.ingest.base import Input

__all__ = ["NOT_BENCHMARKS", "SIDE_FILES", "Recognised", "not_a_benchmark", "side_file"]


@dataclass(frozen=True)
class Recognised:
    """A file recognised for what it is, and what to send instead."""

    name: str
    what: str
    instead: str
    sniff: Callable[[Input], bool]


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
