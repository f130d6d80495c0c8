"""llama-bench: name parsing tables, pp/tg/pg semantics, and the same data read from JSON and CSV."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from advisor.canonical import CanonicalRun
from advisor.errors import IngestError
from advisor.ingest.base import Input
from advisor.ingest.formats.llama_bench import (
    LlamaBenchParser,
    quantization_from_model_type,
    split_model_filename,
)
from advisor.ingest.registry import detect, parse

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "ingest" / "llama_bench"
PARSER = LlamaBenchParser()


def runs_of(name: str) -> list[CanonicalRun]:
    return parse(Input((FIXTURES / name).read_bytes()), "llama_bench")[1]


@pytest.mark.parametrize(
    ("model_type", "quant"),
    [
        ("llama 8B Q4_K - Medium", "Q4_K_M"),
        ("llama ?B Q3_K - Large", "Q3_K_L"),
        ("llama 7B Q4_K - Small", "Q4_K_S"),
        ("llama 7B Q2_K - Medium", "Q2_K"),  # llama.cpp's name for plain Q2_K
        ("llama 7B Q2_K - Small", "Q2_K_S"),
        ("qwen35 27B Q8_0", "Q8_0"),
        ("llama 8B Q6_K", "Q6_K"),
        ("gpt-oss 20B MXFP4 MoE", "MXFP4"),
        ("gpt-oss 20B F16", "F16"),
        ("llama 8B BF16", "BF16"),
        ("llama 8B all F32", "F32"),
        ("llama 8B IQ4_XS - 4.25 bpw", "IQ4_XS"),
        ("llama 70B IQ2_XXS - 2.0625 bpw", "IQ2_XXS"),
        ("llama 8B IQ3_S mix - 3.66 bpw", "IQ3_M"),
        ("Step 3.5 Flash REAP 128B.A11B Q4_K_M", "Q4_K_M"),
        ("llama 8B unknown, may not work", None),
    ],
)
def test_quantization_from_model_type(model_type: str, quant: str | None) -> None:
    assert quantization_from_model_type(model_type) == quant


@pytest.mark.parametrize(
    ("path", "name", "quant"),
    [
        ("models/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf", "Meta-Llama-3.1-8B-Instruct", "Q4_K_M"),
        ("/mnt/x/Snowpiercer-15B-v1.Q3_K_L.gguf", "Snowpiercer-15B-v1", "Q3_K_L"),
        ("/home/o/gpt-oss-20b-mxfp4.gguf", "gpt-oss-20b", "MXFP4"),
        ("C:\\Users\\me\\models\\Mistral-7B-Instruct-v0.3.Q8_0.gguf", "Mistral-7B-Instruct-v0.3", "Q8_0"),
        (
            "models/step/Step-3.5-Flash-REAP-128B-A11B-Q4_K_M.gguf-00001-of-00004.gguf",
            "Step-3.5-Flash-REAP-128B-A11B",
            "Q4_K_M",
        ),
        ("Qwen2.5-7B-Instruct-00001-of-00002.gguf", "Qwen2.5-7B-Instruct", None),
        ("llama-2-7b.gguf", "llama-2-7b", None),
    ],
)
def test_split_model_filename_keeps_no_directory(path: str, name: str, quant: str | None) -> None:
    assert split_model_filename(path) == (name, quant)


def test_pp_and_tg_tests_map_to_prefill_and_decode() -> None:
    rows = json.loads((FIXTURES / "llama_bench.json").read_text())
    runs = runs_of("llama_bench.json")
    assert len(runs) == len(rows) == 4
    for row, run in zip(rows, runs, strict=True):
        m = run.metrics
        assert run.workload.kv_depth_tokens == row["n_depth"]
        assert run.workload.concurrency == 1
        if row["n_gen"] == 0:  # pp
            assert m.prefill_tok_s == row["avg_ts"]
            assert m.decode_tok_s is None
            assert m.ttft_ms.mean == pytest.approx(row["avg_ns"] / 1e6)
        else:  # tg
            assert m.decode_tok_s == row["avg_ts"]
            assert m.prefill_tok_s is None
            assert m.tpot_ms.mean == pytest.approx(row["avg_ns"] / 1e6 / row["n_gen"])
            assert m.tpot_ms.min == pytest.approx(min(row["samples_ns"]) / 1e6 / row["n_gen"])
        assert run.measured_at is not None
        assert run.measured_at.isoformat().startswith(row["test_time"][:19])


def test_json_and_csv_of_the_same_tests_agree() -> None:
    from_json = runs_of("llama_bench.json")
    from_csv = runs_of("llama_bench.csv")
    for a, b in zip(from_json, from_csv, strict=True):
        assert a.setup == b.setup
        assert a.workload == b.workload
        assert (a.metrics.prefill_tok_s, a.metrics.decode_tok_s) == (
            b.metrics.prefill_tok_s,
            b.metrics.decode_tok_s,
        )
        assert a.metrics.ttft_ms.mean == b.metrics.ttft_ms.mean
        assert a.metrics.tpot_ms.mean == b.metrics.tpot_ms.mean
        assert a.labels == b.labels


def test_setup_hints() -> None:
    run = runs_of("llama_bench.json")[0]
    assert run.setup.runtime == "llamacpp"
    assert run.setup.runtime_version == "b6573"
    assert run.setup.hardware == "NVIDIA GeForce RTX 4090"
    assert run.setup.model == "Meta-Llama-3.1-8B-Instruct"
    assert run.setup.quantization == "Q4_K_M"
    assert run.setup.kv_cache_dtype == "f16"
    assert run.setup.engine_args == {
        "n_gpu_layers": 99,
        "batch_size": 2048,
        "ubatch_size": 512,
        "threads": 16,
        "flash_attn": "auto",
        "cache_type_k": "f16",
        "cache_type_v": "f16",
        "split_mode": "layer",
    }
    assert run.labels["model_n_params"] == "8030261248"
    assert "models/" not in json.dumps(run.labels) + str(run.setup.model)


def test_pg_combined_rate_is_never_prefill_or_decode() -> None:
    runs = runs_of("edge-csv-quoted-commas-two-gpus-pg.csv")
    pp, tg, pg, cpu = runs
    assert pg.labels["test"] == "pp512+tg128"
    assert pg.metrics.total_throughput_tok_s == pytest.approx(380.952381)
    # Split with the matching pp test: prefill from it, decode from the remaining time.
    assert pg.metrics.prefill_tok_s == pp.metrics.prefill_tok_s
    assert pg.metrics.decode_tok_s == pytest.approx(128 / (1.68 - 0.08))
    assert pg.metrics.decode_tok_s != pg.metrics.total_throughput_tok_s
    assert tg.metrics.decode_tok_s == pytest.approx(80.0)
    # Two identical GPUs, quoted commas inside fields.
    assert (pp.setup.hardware, pp.setup.gpu_count) == ("NVIDIA GeForce RTX 3090", 2)
    assert pp.labels["cpu_info"] == "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz, 32 cores"
    # -ngl 0: the CPU does the work; differing K/V cache types leave kv_cache_dtype unset.
    assert cpu.setup.hardware == pp.labels["cpu_info"]
    assert cpu.setup.kv_cache_dtype is None
    assert cpu.setup.engine_args["flash_attn"] == "off"
    lone = runs_of("edge-pg-without-matching-pp.jsonl")[0]
    assert lone.metrics.prefill_tok_s is None and lone.metrics.decode_tok_s is None
    assert lone.metrics.e2e_ms.mean == pytest.approx(1015.0)


@pytest.mark.parametrize(
    ("value", "expected"),
    [(-1, "auto"), (0, "off"), (1, "on"), (True, "on"), (False, "off"), ("1", "on"), ("true", "on")],
)
def test_flash_attn_as_server_flag(value: object, expected: str) -> None:
    row = json.loads((FIXTURES / "llama_bench.json").read_text())[0]
    row["flash_attn"] = value
    run = PARSER.parse(Input(json.dumps([row]).encode()))[0]
    assert run.setup.engine_args["flash_attn"] == expected


def test_stderr_lines_are_skipped_and_counted() -> None:
    inp = Input((FIXTURES / "lhl-b6865-rocm-gfx1151-quick-test-mixed-stderr.jsonl").read_bytes())
    assert inp.json_lines is None  # not clean JSON-Lines ...
    assert detect(inp).format_id == "llama_bench"  # ... yet recognised
    runs = PARSER.parse(inp)
    assert len(runs) == 6
    assert "skipped 4 non-JSON line(s)" in runs[0].source.notes[0]


@pytest.mark.parametrize(
    ("mutation", "field"),
    [
        ({"avg_ts": -1.0}, "[0].avg_ts"),
        ({"avg_ts": "fast"}, "[0].avg_ts"),
        ({"n_prompt": 0, "n_gen": 0}, "[0]"),
        ({"samples_ns": [-5, 10]}, "[0].samples_ns"),
    ],
)
def test_bad_rows_are_refused_with_the_field(mutation: dict[str, object], field: str) -> None:
    row = json.loads((FIXTURES / "llama_bench.json").read_text())[0]
    row.update(mutation)
    with pytest.raises(IngestError) as info:
        PARSER.parse(Input(json.dumps([row]).encode()))
    assert info.value.field == field
