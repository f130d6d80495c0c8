"""Client backend names → server runtime (advisor.ingest.runtimes)."""

from __future__ import annotations

import pytest

from advisor.ingest.runtimes import runtime_from_backend


@pytest.mark.parametrize(
    ("backend", "runtime"),
    [
        ("vllm", "vllm"),
        ("openai", None),
        ("openai-chat", None),
        ("sglang-oai", "sglang"),
        ("tgi", "tgi"),
        ("tensorrt-llm", "trtllm"),
        ("lmdeploy", "other"),
        (None, None),
    ],
)
def test_runtime_from_backend(backend: str | None, runtime: str | None) -> None:
    assert runtime_from_backend(backend) == runtime
