"""Ollama responses: nanoseconds, the TTFT choice, cached prompt tokens, odd encodings and shapes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from advisor.errors import IngestError
from advisor.ingest.base import Input
from advisor.ingest.formats.ollama import OllamaParser
from advisor.ingest.registry import detect

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "ingest" / "ollama"
PARSER = OllamaParser()
SAMPLE: dict[str, Any] = json.loads((FIXTURES / "ollama_chat.json").read_text())


def test_nanoseconds_become_milliseconds_and_rates() -> None:
    run = PARSER.parse(Input(json.dumps(SAMPLE).encode()))[0]
    m = run.metrics
    ns = SAMPLE
    assert m.tpot_ms.mean == pytest.approx(ns["eval_duration"] / ns["eval_count"] / 1e6)
    assert m.decode_tok_s == pytest.approx(ns["eval_count"] / ns["eval_duration"] * 1e9)
    assert m.prefill_tok_s == pytest.approx(ns["prompt_eval_count"] / ns["prompt_eval_duration"] * 1e9)
    # TTFT includes the cold load (2.1 s here); the load is also kept apart.
    assert m.ttft_ms.mean == pytest.approx((ns["load_duration"] + ns["prompt_eval_duration"]) / 1e6)
    assert m.load_ms == pytest.approx(ns["load_duration"] / 1e6)
    assert m.e2e_ms.mean == pytest.approx(ns["total_duration"] / 1e6)
    assert run.setup.model == "qwen2.5:14b-instruct-q4_K_M"  # the tag exactly as given
    assert run.setup.runtime == "ollama"
    assert run.source.tool == "ollama /api/chat"
    # One response: a mean, never a percentile or a spread of one sample.
    assert m.ttft_ms.p50 is None and m.ttft_ms.std is None


def test_without_load_duration_ttft_is_prompt_evaluation_only() -> None:
    response = {k: v for k, v in SAMPLE.items() if k != "load_duration"}
    run = PARSER.parse(Input(json.dumps(response).encode()))[0]
    assert run.metrics.load_ms is None  # unknown, not zero
    assert run.metrics.ttft_ms.mean == pytest.approx(SAMPLE["prompt_eval_duration"] / 1e6)
    assert any("without load_duration" in n for n in run.source.notes)


def test_cached_prompt_tokens_are_taken_out_of_prefill() -> None:
    runs = PARSER.parse(Input((FIXTURES / "edge-three-chat-responses-cold-first-cached-prompt.jsonl").read_bytes()))
    m = runs[0].metrics
    per_token_ms = [400 / 1200, 22 / (1210 - 1152), 16 / (1190 - 1152)]
    assert m.prefill_tok_s == pytest.approx(1000 / (sum(per_token_ms) / 3))
    assert m.prefix_cache_hit_rate == pytest.approx((1152 + 1152) / (1200 + 1210 + 1190))
    assert m.load_ms == pytest.approx(2400.0)  # the cold first call
    assert m.ttft_ms.p50 == pytest.approx(37.0)  # the warm median is not hidden by the cold mean
    assert runs[0].workload.num_requests == 3


def test_a_tiny_prompt_still_stores_the_seed_formula_with_a_quality_mark() -> None:
    # The seed teaches prefill = prompt_eval_count / prompt_eval_duration; with only short prompts
    # the figure is stored, and marked so that the fit and the rules ignore it.
    response = dict(SAMPLE, prompt_eval_count=12)
    run = PARSER.parse(Input(json.dumps(response).encode()))[0]
    assert run.metrics.prefill_tok_s == pytest.approx(12 / (SAMPLE["prompt_eval_duration"] / 1e9))
    assert run.source.quality == {"prefill_tok_s": "overhead-dominated: 12 prompt tokens"}
    assert run.metrics.decode_tok_s is not None


def test_a_tiny_prompt_beside_a_long_one_is_left_out_unmarked() -> None:
    long = dict(SAMPLE, prompt_eval_count=640, prompt_eval_duration=320_000_000)
    short = dict(SAMPLE, prompt_eval_count=12, prompt_eval_duration=60_000_000)
    run = PARSER.parse(Input(json.dumps([long, short]).encode()))[0]
    assert run.metrics.prefill_tok_s == pytest.approx(640 / 0.32)
    assert run.source.quality == {}
    assert any("1 response(s) evaluated fewer than 32 prompt tokens" in n for n in run.source.notes)


def test_the_real_28_token_prompt_is_marked_overhead_dominated() -> None:
    raw = (FIXTURES / "hank2333-qwen3.5-4b-generate-nonstream-2026-04.json").read_bytes()
    doc = json.loads(raw.decode("utf-8-sig"))
    run = PARSER.parse(Input(raw))[0]
    assert run.metrics.prefill_tok_s == pytest.approx(doc["prompt_eval_count"] / (doc["prompt_eval_duration"] / 1e9))
    assert run.source.quality == {"prefill_tok_s": "overhead-dominated: 28 prompt tokens"}


@pytest.mark.parametrize(
    "name",
    [
        "edge-utf16-bom-out-file.json",
        "satyamsh04-qwen2.5-coder-7b-generate-powershell-bom-2026-06.json",
        "edge-curl-appended-no-newline.json",
        "edge-streamed-generate-ndjson.jsonl",
    ],
)
def test_odd_encodings_and_shapes_are_recognised(name: str) -> None:
    inp = Input((FIXTURES / name).read_bytes())
    assert detect(inp).format_id == "ollama"
    assert PARSER.parse(inp)[0].metrics.decode_tok_s is not None


def test_powershell_array_wrapper() -> None:
    body = json.dumps({"value": [SAMPLE, SAMPLE], "Count": 2}).encode()
    run = PARSER.parse(Input(body))[0]
    assert run.workload.num_requests == 2


def test_several_models_are_kept_apart() -> None:
    other = dict(SAMPLE, model="llama3.1:8b", eval_duration=SAMPLE["eval_duration"] // 2)
    runs = PARSER.parse(Input(json.dumps([SAMPLE, other, SAMPLE]).encode()))
    assert [(r.setup.model, r.workload.num_requests) for r in runs] == [
        ("qwen2.5:14b-instruct-q4_K_M", 2),
        ("llama3.1:8b", 1),
    ]
    decode = [r.metrics.decode_tok_s for r in runs]
    assert decode[0] is not None and decode[1] is not None
    assert decode[1] == pytest.approx(2 * decode[0], rel=1e-6)


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (
            {"model": "x", "created_at": "2026-01-01T00:00:00Z", "done": True, "done_reason": "load"},
            "no generation",
        ),
        ([{"model": "x", "created_at": "2026-01-01T00:00:00Z", "response": "a", "done": False}], "no final"),
        (dict(SAMPLE, prompt_eval_duration=-5), "cannot be negative"),
    ],
)
def test_refusals(body: object, match: str) -> None:
    with pytest.raises(IngestError, match=match):
        PARSER.parse(Input(json.dumps(body).encode()))
