"""``advisor measure`` against Ollama reads ``/api/ps`` after its probes: the share of the model in
GPU memory (``size_vram / size``) goes into the run as ``metrics.gpu_resident_share``."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from advisor.client.measure import MeasureOptions, OllamaBackend, OpenAIBackend, measure
from tests.unit.client.fakes import FakeClock, FakeLLM, FakeOllama

GIB = 2**30


def _client(ollama: FakeOllama, ps: Any, calls: list[str]) -> httpx.Client:
    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        if request.url.path == "/api/ps" and ps is not None:
            return ps if isinstance(ps, httpx.Response) else httpx.Response(200, json=ps)
        return ollama.handler(request)

    return httpx.Client(transport=httpx.MockTransport(handler), base_url="http://ollama.test")


def _measure(clock: FakeClock, ps: Any) -> tuple[Any, list[str]]:
    calls: list[str] = []
    http = _client(FakeOllama(clock), ps, calls)
    result = measure(
        OllamaBackend(http, clock=clock),
        model="llama3.2:3b",
        options=MeasureOptions(repeat=2, scrape_interval_s=0.001),
        scrape_http=http,
        clock=clock,
    )
    return result, calls


def test_the_share_in_gpu_memory_comes_from_api_ps_after_the_probes(clock: FakeClock) -> None:
    ps = {"models": [{"name": "llama3.2:3b", "model": "llama3.2:3b", "size": 4 * GIB, "size_vram": 3 * GIB}]}
    result, calls = _measure(clock, ps)
    assert result.gpu_resident_share == pytest.approx(0.75)
    run = result.to_run()
    assert run["metrics"]["gpu_resident_share"] == pytest.approx(0.75)
    assert any(n.startswith("gpu_resident_share = 0.75 from /api/ps") for n in run["source"]["notes"])
    # Asked once the probes ran (the model loaded with their context), not before.
    last_generate = max(i for i, path in enumerate(calls) if path == "/api/generate")
    assert calls.index("/api/ps", last_generate) > last_generate


def test_a_model_on_the_cpu_has_no_size_vram_and_a_share_of_zero(clock: FakeClock) -> None:
    result, _ = _measure(
        clock, {"models": [{"name": "llama3.2:3b", "size": 4 * GIB, "expires_at": "2026-12-01T00:00:00Z"}]}
    )
    assert result.gpu_resident_share == 0.0


@pytest.mark.parametrize(
    ("ps", "says"),
    [
        ({"models": [{"name": "qwen2.5:7b", "size": 5 * GIB, "size_vram": 5 * GIB}]}, "does not list llama3.2:3b"),
        ({"models": [{"name": "llama3.2:3b", "size": GIB, "size_vram": 2 * GIB}]}, "no usable size / size_vram"),
        (httpx.Response(500, text="boom"), "GET /api/ps failed"),
    ],
    ids=["other-model", "corrupt", "server-error"],
)
def test_an_api_ps_that_says_nothing_about_the_model_leaves_the_share_unknown(
    clock: FakeClock, ps: Any, says: str
) -> None:
    result, _ = _measure(clock, ps)
    assert result.gpu_resident_share is None
    run = result.to_run()
    assert "gpu_resident_share" not in run["metrics"]
    assert any(says in n for n in run["source"]["notes"])


def test_an_openai_server_is_not_asked_for_api_ps(clock: FakeClock) -> None:
    llm = FakeLLM(clock)
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        return llm.handler(request)

    http = httpx.Client(transport=httpx.MockTransport(handler), base_url="http://llm.test")
    result = measure(OpenAIBackend(http, clock=clock), options=MeasureOptions(repeat=2), scrape_http=http, clock=clock)
    assert result.gpu_resident_share is None
    assert "/api/ps" not in calls
