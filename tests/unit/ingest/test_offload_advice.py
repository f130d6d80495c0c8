"""Ingest → advise for partial CPU offload: the share a file or its side file reports reaches DEC006
(parse, resolve and analyse, as ``POST /advise`` does, without the database)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from advisor.catalog import Catalog
from advisor.domain.runs.analysis import analyse_run
from advisor.domain.runs.resolution import resolve_submission
from advisor.ingest.submission import parse_submission

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
SIDE = FIXTURES / "side_files"
INGEST = FIXTURES / "ingest"


def _advise(body: dict[str, Any]) -> list[tuple[Any, dict[str, Any]]]:
    """(run, {rule id: recommendation}) per run of the submission."""
    catalog = Catalog.default()
    parsed = parse_submission(json.dumps(body).encode(), content_type="application/json", format_id="auto")
    out = []
    for resolved in resolve_submission(parsed, catalog):
        analysis = analyse_run(resolved, slo=None, baseline=[], catalog=catalog)
        out.append((resolved.run, {r.rule_id: r for r in analysis.recommendations}))
    return out


def _generate(model: str, decode_tok_s: float) -> dict[str, Any]:
    """A real /api/generate response (KGthePM/GomieAi) with the model and decode time set."""
    response: dict[str, Any] = json.loads(
        (INGEST / "ollama" / "kgthepm-mistral-generate-nonstream-2025-03.json").read_text()
    )
    response["model"] = model
    response["eval_duration"] = int(response["eval_count"] / decode_tok_s * 1e9)
    return response


def test_ollama_api_ps_beside_the_response_is_the_offload_dec006_reports() -> None:
    ps = (SIDE / "edge-ollama-api-ps-two-models-one-on-cpu.json").read_text()
    files = [{"name": "generate.json", "content": _generate("llama3.1:8b", 20.0)}, {"name": "ps.json", "content": ps}]
    [(run, recs)] = _advise({"context": {"hardware": "nvidia-a10g"}, "files": files})
    assert run.metrics.gpu_resident_share == pytest.approx(0.7, abs=0.001)
    finding = recs["DEC006"]
    assert "30% of the model is held in system memory (metrics.gpu_resident_share)" in finding.title
    assert {e.metric for e in finding.evidence} >= {"gpu_resident_share", "cpu_share"}
    # Without the side file the rule infers the share from the speed instead (and says "about").
    [(_, inferred)] = _advise({"context": {"hardware": "nvidia-a10g"}, "files": files[:1]})
    assert "about" in inferred["DEC006"].title and "gpu_resident_share" not in inferred["DEC006"].title


def test_a_full_api_ps_keeps_a_slow_ollama_run_from_being_called_offloaded() -> None:
    ps = {
        "models": [
            {"name": "llama3.1:8b", "size": 6654289920, "size_vram": 6654289920, "expires_at": "2026-11-30T10:04:12Z"}
        ]
    }
    files = [{"name": "generate.json", "content": _generate("llama3.1:8b", 20.0)}, {"name": "ps.json", "content": ps}]
    [(run, recs)] = _advise({"context": {"hardware": "nvidia-a10g"}, "files": files})
    assert run.metrics.gpu_resident_share == 1.0
    assert "DEC006" not in recs


def _llama_bench_md(ngl: int) -> str:
    """The llama.cpp README's llama-bench table (Qwen2-7B Q4_K_M, CUDA) with its ngl column set."""
    text = (INGEST / "llama_bench" / "llamacpp-readme-qwen2-7b-q4km-cuda-depth-d512.md.txt").read_text()
    return text.replace("|  -1 |", f"| {ngl:3d} |")


def test_a_short_ngl_column_in_llama_bench_markdown_is_the_offload_dec006_reports() -> None:
    # The catalog's Qwen2.5-7B (the same 28 blocks as the table's Qwen2-7B) + the output layer = 29;
    # -ngl 20 leaves 9/29 = 31% on the CPU.
    body = {
        "context": {"hardware": "nvidia-rtx-4090", "model": "qwen2.5-7b"},
        "files": [{"name": "bench.md", "content": _llama_bench_md(20)}],
    }
    runs = _advise(body)
    tg = [(run, recs) for run, recs in runs if run.labels.get("test") == "tg128"]
    [(run, recs)] = tg
    assert run.setup.engine_args["n_gpu_layers"] == 20
    assert "31% of the model is held in system memory (n_gpu_layers 20 of 29 layers)" in recs["DEC006"].title


def test_a_llama_server_log_beside_its_responses_gives_the_share_dec006_reports() -> None:
    # The llama-server sample response (Llama-3.1-8B Q4_K_M) slowed to the 30 tok/s a partial offload
    # gives, beside a start-up log that offloaded 24 of 33 layers: 9/33 = 27% in system memory.
    log = (SIDE / "edge-llama-server-log-partial-offload-24-of-33.log").read_text()
    response = json.loads((INGEST / "llama_server" / "llama_server_completion.json").read_text())
    timings = response["timings"]
    timings["predicted_per_second"] = 30.0
    timings["predicted_per_token_ms"] = 1000.0 / 30.0
    timings["predicted_ms"] = timings["predicted_n"] * 1000.0 / 30.0
    files = [{"name": "completion.json", "content": response}, {"name": "server.log", "content": log}]
    [(run, recs)] = _advise({"context": {"hardware": "nvidia-rtx-4090"}, "files": files})
    assert run.metrics.gpu_resident_share == pytest.approx(24 / 33)
    assert "27% of the model is held in system memory (metrics.gpu_resident_share)" in recs["DEC006"].title


def test_a_batched_bench_log_states_its_own_offload_for_dec006() -> None:
    # The loader's "offloaded 20/33 layers" above the table: 13/33 = 39% in system memory at B = 1.
    log = (INGEST / "llama_batched_bench" / "edge-log-partial-offload-20-of-33.txt").read_text()
    runs = _advise({"context": {"hardware": "nvidia-rtx-4090"}, "files": [{"name": "bench.log", "content": log}]})
    [(run, recs)] = [(run, recs) for run, recs in runs if run.workload.concurrency == 1]
    assert run.metrics.gpu_resident_share == pytest.approx(20 / 33)
    assert "39% of the model is held in system memory (metrics.gpu_resident_share)" in recs["DEC006"].title
