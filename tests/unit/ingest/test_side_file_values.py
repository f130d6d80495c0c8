"""Side files that say where the model sits: Ollama ``/api/ps`` and llama.cpp's start-up log fill
``metrics.gpu_resident_share`` of the runs beside them (docs/formats.md §10)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from advisor.errors import IngestError, InvalidInput
from advisor.ingest.base import Input
from advisor.ingest.registry import parse
from advisor.ingest.side_files import ollama_resident_share, side_file
from advisor.ingest.submission import parse_submission

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
SIDE = FIXTURES / "side_files"
INGEST = FIXTURES / "ingest"
GEMMA4 = INGEST / "ollama" / "cokacho-gemma4-generate-nonstream-prettyprinted-2026-04.json"
PS_DOCS = SIDE / "ollama-docs-api-ps-gemma4.json"


def _wrapper(*files: tuple[str, Path | str | dict[str, Any], str | None]) -> Any:
    entries = []
    for name, content, role in files:
        text = content.read_text() if isinstance(content, Path) else content
        entry: dict[str, Any] = {"name": name, "content": text}
        if role:
            entry["role"] = role
        entries.append(entry)
    body = json.dumps({"files": entries}).encode()
    return parse_submission(body, content_type="application/json", format_id="auto")


@pytest.mark.parametrize("role", [None, "side"])
def test_ollama_ps_beside_a_generate_response_gives_the_gpu_resident_share(role: str | None) -> None:
    # The documented example: 5,333,539,264 of 6,591,830,464 bytes in VRAM. The response names
    # "gemma4:latest", /api/ps "gemma4": the same model.
    parsed = _wrapper(("generate.json", GEMMA4, None), ("ps.json", PS_DOCS, role))
    assert parsed.format_id == "ollama"
    run = parsed.runs[0]
    assert run.setup.model == "gemma4:latest"
    assert run.metrics.gpu_resident_share == pytest.approx(5333539264 / 6591830464)
    assert any("ps.json" in n and "read" in n for n in run.source.notes)
    assert any(n.startswith("gpu_resident_share from ps.json") for n in run.source.notes)


def test_ollama_ps_matches_the_run_by_model_and_omits_size_vram_for_a_cpu_model() -> None:
    ps = (SIDE / "edge-ollama-api-ps-two-models-one-on-cpu.json").read_text()
    generate = json.loads(GEMMA4.read_text())
    generate["model"] = "llama3.1:8b"
    parsed = _wrapper(("g.json", json.dumps(generate), None), ("ps.json", ps, None))
    assert parsed.runs[0].metrics.gpu_resident_share == pytest.approx(4658002944 / 6654289920)
    generate["model"] = "qwen2.5:0.5b"  # no size_vram: omitempty, the whole model on the CPU
    parsed = _wrapper(("g.json", json.dumps(generate), None), ("ps.json", ps, None))
    assert parsed.runs[0].metrics.gpu_resident_share == 0.0


def test_an_api_ps_of_another_model_sets_nothing_and_says_so() -> None:
    parsed = _wrapper(
        ("g.json", GEMMA4, None), ("ps.json", SIDE / "edge-ollama-api-ps-two-models-one-on-cpu.json", None)
    )
    run = parsed.runs[0]
    assert run.metrics.gpu_resident_share is None
    assert any("lists no entry for model 'gemma4:latest'" in n for n in run.source.notes)


def test_a_corrupt_api_ps_is_a_422_naming_the_field() -> None:
    ps = json.loads(PS_DOCS.read_text())
    ps["models"][0]["size_vram"] = ps["models"][0]["size"] * 2
    with pytest.raises(InvalidInput) as info:
        _wrapper(("g.json", GEMMA4, None), ("ps.json", json.dumps(ps), None))
    assert info.value.field == "files[1].models[0].size_vram"
    with pytest.raises(InvalidInput):
        ollama_resident_share({"size": 10, "size_vram": "all"})
    assert ollama_resident_share({"size": 0, "size_vram": 0}) is None


def test_api_ps_alone_is_a_side_file_not_a_model_list() -> None:
    with pytest.raises(IngestError) as info:
        parse(Input(PS_DOCS.read_bytes()))
    assert info.value.extra["side_file"] == "ollama_ps"
    assert "/api/generate" in info.value.detail
    # /api/tags (no size_vram, no expires_at) stays a model list.
    tags = {"models": [{"name": "gemma4:latest", "size": 6591830464, "modified_at": "2025-10-17T16:47:07Z"}]}
    assert side_file(Input(json.dumps(tags).encode())) is None
    with pytest.raises(IngestError, match="model list"):
        parse(Input(json.dumps(tags).encode()))


def test_a_llama_server_log_gives_offloaded_layers_over_all_layers() -> None:
    log = SIDE / "edge-llama-server-log-partial-offload-24-of-33.log"
    bench = INGEST / "llama_bench" / "llama_bench.json"
    parsed = _wrapper(("bench.json", bench, None), ("server.log", log, None))
    assert parsed.format_id == "llama_bench"
    assert parsed.runs
    for run in parsed.runs:
        assert run.metrics.gpu_resident_share == pytest.approx(24 / 33)
        assert (
            "gpu_resident_share = 24/33 from server.log (llama.cpp 'offloaded N/M layers to GPU')" in run.source.notes
        )


def test_moe_experts_kept_on_the_cpu_are_read_from_the_buffer_sizes() -> None:
    # 25/25 layers "offloaded", but --n-cpu-moe left 9,210 MiB of experts in host memory.
    log = SIDE / "edge-llama-server-log-n-cpu-moe-all-layers-offloaded.log"
    parsed = _wrapper(("bench.json", INGEST / "llama_bench" / "llama_bench.json", None), ("server.log", log, "side"))
    run = parsed.runs[0]
    assert run.metrics.gpu_resident_share == pytest.approx(2860.21 / (2860.21 + 9210.47))
    assert any("--n-cpu-moe" in n for n in run.source.notes)


def test_a_second_model_load_in_the_log_is_noted_and_the_first_is_used() -> None:
    text = (SIDE / "edge-llama-server-log-partial-offload-24-of-33.log").read_text()
    text += "load_tensors: offloaded 25/25 layers to GPU\nload_tensors:        CUDA0 model buffer size =   400.00 MiB\n"
    parsed = _wrapper(("bench.json", INGEST / "llama_bench" / "llama_bench.json", None), ("server.log", text, None))
    run = parsed.runs[0]
    assert run.metrics.gpu_resident_share == pytest.approx(24 / 33)
    assert any("loads 2 models" in n for n in run.source.notes)


def test_the_files_own_share_wins_over_a_side_file() -> None:
    run = {
        "setup": {"runtime": "ollama", "model": "gemma4"},
        "metrics": {"decode_tok_s": 20, "gpu_resident_share": 0.5},
    }
    parsed = _wrapper(("run.json", json.dumps(run), None), ("ps.json", PS_DOCS, None))
    assert parsed.runs[0].metrics.gpu_resident_share == 0.5


def test_a_log_without_the_offload_line_is_kept_unread() -> None:
    parsed = _wrapper(
        ("bench.json", INGEST / "llama_bench" / "llama_bench.json", None),
        ("server.log", "main: model loaded\n", "side"),
    )
    run = parsed.runs[0]
    assert run.metrics.gpu_resident_share is None
    assert "side file server.log (a side file) kept with the submission, not read" in run.source.notes


def test_a_benchmark_log_with_the_loader_lines_is_parsed_not_kept_as_a_side_file() -> None:
    # llama-batched-bench 2>&1: the loader's "offloaded 20/33" sits above the table; the parser reads
    # it, alone or in a wrapper.
    log = INGEST / "llama_batched_bench" / "edge-log-partial-offload-20-of-33.txt"
    assert side_file(Input(log.read_bytes())) is None
    fmt, runs = parse(Input(log.read_bytes()))
    assert fmt == "llama_batched_bench"
    assert all(run.metrics.gpu_resident_share == pytest.approx(20 / 33) for run in runs)
    parsed = _wrapper(("bench.log", log, None))
    assert parsed.format_id == "llama_batched_bench"
    assert parsed.runs[0].metrics.gpu_resident_share == pytest.approx(20 / 33)
