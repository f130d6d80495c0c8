"""llama-server responses: the timings object, cached prompts, streams and model names."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from advisor.errors import IngestError
from advisor.ingest.base import Input
from advisor.ingest.formats.llama_server import MIN_PROMPT_TOKENS, LlamaServerParser
from advisor.ingest.registry import detect

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "ingest" / "llama_server"
PARSER = LlamaServerParser()
SAMPLE: dict[str, Any] = json.loads((FIXTURES / "llama_server_completion.json").read_text())


def test_timings_map_to_prefill_decode_and_cache() -> None:
    run = PARSER.parse(Input(json.dumps(SAMPLE).encode()))[0]
    t = SAMPLE["timings"]
    m = run.metrics
    assert m.prefill_tok_s == pytest.approx(t["prompt_per_second"])
    assert m.decode_tok_s == pytest.approx(t["predicted_per_second"])
    assert m.tpot_ms.mean == pytest.approx(t["predicted_per_token_ms"])
    assert m.ttft_ms.mean == pytest.approx(t["prompt_ms"])
    assert m.e2e_ms.mean == pytest.approx(t["prompt_ms"] + t["predicted_ms"])
    assert m.cached_prompt_tokens_mean == t["cache_n"]
    assert m.prefix_cache_hit_rate == pytest.approx(t["cache_n"] / (t["cache_n"] + t["prompt_n"]))
    assert run.workload.prompt_tokens_mean == SAMPLE["tokens_evaluated"] == t["cache_n"] + t["prompt_n"]
    assert run.workload.output_tokens_mean == SAMPLE["tokens_predicted"]
    assert (run.setup.model, run.setup.quantization) == ("Meta-Llama-3.1-8B-Instruct", "Q4_K_M")


def test_a_mostly_cached_prompt_gives_no_prefill_speed() -> None:
    cached = json.loads(json.dumps(SAMPLE))
    cached["timings"].update(prompt_n=MIN_PROMPT_TOKENS - 1, prompt_ms=3.0, prompt_per_second=10333.3)
    run = PARSER.parse(Input(json.dumps(cached).encode()))[0]
    assert run.metrics.prefill_tok_s is None
    assert run.metrics.decode_tok_s is not None


def test_openai_responses_aggregate_into_one_run() -> None:
    runs = PARSER.parse(Input((FIXTURES / "edge-openai-chat-three-responses-one-cached.json").read_bytes()))
    assert len(runs) == 1
    run = runs[0]
    assert run.workload.num_requests == 3
    assert run.metrics.ttft_ms.p50 == pytest.approx(80.2)
    # prefill from the two responses with real prompts only
    assert run.metrics.prefill_tok_s == pytest.approx(1000 / ((310.5 / 2048 + 80.2 / 512) / 2))
    assert run.source.tool == "llama-server /v1 (OpenAI-compatible)"
    assert run.measured_at is not None and run.measured_at.year == 2026


def test_streamed_chunks_before_the_last_are_skipped() -> None:
    inp = Input((FIXTURES / "edge-native-completion-sse-stream.txt").read_bytes())
    assert detect(inp).format_id == "llama_server"
    run = PARSER.parse(inp)[0]
    assert run.workload.num_requests == 1
    assert run.metrics.decode_tok_s == pytest.approx(100.0)


@pytest.mark.parametrize(
    ("model", "name", "quant"),
    [
        ("/srv/private/path/Qwen2.5-7B-Instruct-Q4_K_M.gguf", "Qwen2.5-7B-Instruct", "Q4_K_M"),
        ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct", None),
        ("gpt-3.5-turbo", "gpt-3.5-turbo", None),
    ],
)
def test_model_names(model: str, name: str, quant: str | None) -> None:
    run = PARSER.parse(Input(json.dumps(dict(SAMPLE, model=model)).encode()))[0]
    assert (run.setup.model, run.setup.quantization) == (name, quant)


def test_negative_timings_are_refused() -> None:
    bad = json.loads(json.dumps(SAMPLE))
    bad["timings"]["predicted_ms"] = -1
    with pytest.raises(IngestError) as info:
        PARSER.parse(Input(json.dumps(bad).encode()))
    assert info.value.field == "[0].timings.predicted_ms"
