"""Without stream usage, output tokens are counted by token events, not by visible text.

llama-cpp-python sends no ``usage`` in its stream; a random-weight model there emits tokens whose
text is empty (``<s>``, ``<unk>``), one chunk each. Counting only chunks with visible text called
such a reply short and retried it as an early stop.
"""

from __future__ import annotations

import json

import httpx
import pytest

from advisor.client.measure import OpenAIBackend
from tests.unit.client.fakes import FakeClock


def _stream(chunks: list[dict[str, object]]) -> httpx.Response:
    body = b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)


def _read(chunks: list[dict[str, object]]) -> int:
    clock = FakeClock()
    backend = OpenAIBackend(httpx.Client(transport=httpx.MockTransport(lambda r: _stream([]))), clock=clock)
    sample = backend._read(_stream(chunks), clock.monotonic())
    return sample.output_tokens


@pytest.mark.parametrize("chat", [False, True])
def test_empty_text_tokens_count(chat: bool) -> None:
    texts = ["a", "", "b", "", "", "c"]
    if chat:
        chunks: list[dict[str, object]] = [{"choices": [{"delta": {"role": "assistant", "content": ""}}]}]
        chunks += [{"choices": [{"delta": {"content": t}, "finish_reason": None}]} for t in texts]
        chunks.append({"choices": [{"delta": {}, "finish_reason": "length"}]})
    else:
        chunks = [{"choices": [{"text": t, "finish_reason": None}]} for t in texts]
        chunks.append({"choices": [{"text": "", "finish_reason": "length"}]})
    assert _read(chunks) == 6


def test_stream_usage_wins_over_events() -> None:
    chunks: list[dict[str, object]] = [{"choices": [{"text": "a"}]}, {"choices": [{"text": "b"}]}]
    chunks.append({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 9}})
    assert _read(chunks) == 9


def test_a_last_token_that_carries_the_finish_reason_counts() -> None:
    chunks: list[dict[str, object]] = [
        {"choices": [{"text": "a"}]},
        {"choices": [{"text": "b", "finish_reason": "length"}]},
    ]
    assert _read(chunks) == 2
