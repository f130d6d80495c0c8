"""Which server runtime a benchmark client's ``backend`` name implies."""

from __future__ import annotations

from typing import Final

__all__ = ["RUNTIME_BY_BACKEND", "runtime_from_backend"]

#: Benchmark-client ``backend`` names that identify the *server* runtime. Generic client names such
#: as ``openai`` or ``openai-chat`` say nothing about the server and are deliberately absent.
RUNTIME_BY_BACKEND: Final[dict[str, str]] = {
    "vllm": "vllm",
    "vllm-chat": "vllm",
    "tgi": "tgi",
    "sglang": "sglang",
    "sglang-native": "sglang",
    "sglang-oai": "sglang",
    "sglang-oai-chat": "sglang",
    "tensorrt-llm": "trtllm",
    "trt": "trtllm",
    "tensorrtllm": "trtllm",
    "llama.cpp": "llamacpp",
    "llamacpp": "llamacpp",
    "lmdeploy": "other",
    "deepspeed-mii": "other",
    "scalellm": "other",
}


def runtime_from_backend(name: object) -> str | None:
    """The server runtime a client ``backend`` name implies, or None when it implies none."""
    if not isinstance(name, str):
        return None
    return RUNTIME_BY_BACKEND.get(name.strip().lower())
