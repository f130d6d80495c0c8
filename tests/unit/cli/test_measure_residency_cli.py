"""``advisor measure --api ollama``: the share of the model in GPU memory, read from ``/api/ps``
after the probes, is printed and goes into the submitted run."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.unit.client.fakes import FakeAdvisor, FakeClock, FakeOllama, advisor_http, invoke

GIB = 2**30


def _target(clock: FakeClock, vram: int) -> httpx.Client:
    ollama = FakeOllama(clock)

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/ps":
            entry = {"name": "llama3.2:3b", "model": "llama3.2:3b", "size": 4 * GIB, "size_vram": vram}
            return httpx.Response(200, json={"models": [entry]})
        return ollama.handler(request)

    return httpx.Client(transport=httpx.MockTransport(handler), base_url="http://ollama.test")


def test_the_text_summary_says_how_much_of_the_model_is_in_gpu_memory() -> None:
    clock = FakeClock()
    args = ["measure", "http://ollama.test", "--api", "ollama", "--model", "llama3.2:3b", "-n", "2", "--dry-run"]
    result = invoke(args, target=_target(clock, 3 * GIB), clock=clock)
    assert result.exit_code == 0, result.output
    assert "model in GPU memory: 75% (the rest is read from system RAM)" in result.stdout
    full = invoke(args, target=_target(clock, 4 * GIB), clock=clock)
    assert "model in GPU memory: 100%\n" in full.stdout


def test_the_submitted_run_carries_the_share() -> None:
    clock = FakeClock()
    fake = FakeAdvisor()
    result = invoke(
        ["measure", "http://ollama.test", "--api", "ollama", "--model", "llama3.2:3b", "-n", "2"],
        advisor=advisor_http(fake.handler),
        target=_target(clock, GIB),
        clock=clock,
    )
    assert result.exit_code == 0, result.output
    [request] = fake.requests
    assert json.loads(request.content)["metrics"]["gpu_resident_share"] == pytest.approx(0.25)
