"""Fakes for the client tests: a deterministic clock, an OpenAI-compatible and an Ollama server
behind ``httpx.MockTransport`` whose timings follow the seed's physics (TTFT grows with the
prompt, the decode rate does not), and a small advisor API."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from click.testing import CliRunner, Result

from advisor.cli import cli
from advisor.client.injected import Injected


class FakeClock:
    """The probe's clock (advisor.client.clock.Clock), advanced only by the fake servers: every
    duration the probe measures is the one the fake server declared."""

    def __init__(self, start: datetime = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)) -> None:
        self.seconds = 1000.0
        self._start = start
        self._lock = threading.Lock()

    def monotonic(self) -> float:
        return self.seconds

    def now(self) -> datetime:
        return self._start + timedelta(seconds=self.seconds - 1000.0)

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.seconds += seconds


def tokens_of(text: str) -> int:
    """The fake tokenizer: 4 characters a token, plus a BOS token."""
    return len(text) // 4 + 1


@dataclass
class FakeLLM:
    """An LLM server: TTFT = fixed + prompt_tokens × per_token seconds; one token every ``itl``."""

    clock: FakeClock
    fixed_s: float = 0.02
    per_token_s: float = 0.0001  # prefill at 10,000 tok/s
    itl_s: float = 0.01  # decode at 100 tok/s
    usage_in_stream: bool = True
    reject_stream_options: bool = False
    metrics: Callable[[], str] | None = None
    model: str = "tiny-llama"
    owned_by: str = "vllm"
    stream_prompts: list[str] = field(default_factory=list)
    plain_calls: int = 0
    fail_after: int | None = None

    def handler(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/metrics":
            if self.metrics is None:
                return httpx.Response(404, text="not found")
            return httpx.Response(200, text=self.metrics())
        if path == "/v1/models":
            return httpx.Response(200, json={"object": "list", "data": [{"id": self.model, "owned_by": self.owned_by}]})
        if path in ("/v1/completions", "/v1/chat/completions"):
            return self._completion(request, chat=path.endswith("chat/completions"))
        return httpx.Response(404, json={"error": f"no route {path}"})

    def _completion(self, request: httpx.Request, *, chat: bool) -> httpx.Response:
        body = json.loads(request.content)
        if body.get("model") != self.model:
            return httpx.Response(404, json={"error": {"message": f"model {body.get('model')!r} not found"}})
        prompt = body["messages"][0]["content"] if chat else body["prompt"]
        n_prompt = tokens_of(prompt) + (8 if chat else 0)  # a chat template adds fixed tokens
        if not body.get("stream"):
            self.plain_calls += 1
            return httpx.Response(
                200, json={"choices": [{"text": "x"}], "usage": {"prompt_tokens": n_prompt, "completion_tokens": 1}}
            )
        if self.reject_stream_options and "stream_options" in body:
            return httpx.Response(400, json={"error": "unknown field stream_options"})
        self.stream_prompts.append(prompt)
        if self.fail_after is not None and len(self.stream_prompts) > self.fail_after:
            return httpx.Response(500, text="CUDA error")
        self.clock.advance(self.fixed_s + n_prompt * self.per_token_s)
        max_tokens = int(body["max_tokens"])
        include_usage = self.usage_in_stream and (body.get("stream_options") or {}).get("include_usage")

        def events() -> Iterator[bytes]:
            for i in range(max_tokens):
                if i:
                    self.clock.advance(self.itl_s)
                choice = {"delta": {"content": "a"}} if chat else {"text": "a"}
                yield f"data: {json.dumps({'choices': [choice]})}\n\n".encode()
            if include_usage:
                usage = {"prompt_tokens": n_prompt, "completion_tokens": max_tokens}
                yield f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode()
            yield b"data: [DONE]\n\n"

        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=events())


@dataclass
class FakeOllama:
    """Ollama: its own counters in ns (prefill 5,000 tok/s, decode 50 tok/s) and a model list."""

    clock: FakeClock
    prefill_tok_s: float = 5000.0
    decode_tok_s: float = 50.0
    load_ns: int = 0
    prompts: list[str] = field(default_factory=list)

    def handler(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/api/ps":
            return httpx.Response(200, json={"models": []})
        if path == "/api/tags":
            return httpx.Response(200, json={"models": [{"name": "llama3.2:3b"}, {"name": "qwen2.5:7b"}]})
        if path == "/api/show":
            return httpx.Response(200, json={"details": {"quantization_level": "Q4_K_M", "parameter_size": "3.2B"}})
        if path == "/metrics":
            return httpx.Response(404)
        if path != "/api/generate":
            return httpx.Response(404)
        body = json.loads(request.content)
        n = tokens_of(body["prompt"])
        num_predict = int(body["options"]["num_predict"])
        counters = {
            "done": True,
            "prompt_eval_count": n,
            "prompt_eval_duration": int(n / self.prefill_tok_s * 1e9),
            "eval_count": num_predict,
            "eval_duration": int(num_predict / self.decode_tok_s * 1e9),
            "load_duration": self.load_ns,
        }
        if not body.get("stream"):
            return httpx.Response(200, json={"response": "x", **counters})
        self.prompts.append(body["prompt"])
        self.clock.advance(n / self.prefill_tok_s)

        def lines() -> Iterator[bytes]:
            for i in range(num_predict):
                if i:
                    self.clock.advance(1 / self.decode_tok_s)
                yield (json.dumps({"response": "a", "done": False}) + "\n").encode()
            yield (json.dumps({"response": "", **counters}) + "\n").encode()

        return httpx.Response(200, content=lines())


def vllm_scrape_factory(model: str = "tiny-llama") -> Callable[[], str]:
    """vLLM /metrics whose counters grow on every scrape (10 hits per 100 prefix queries) and whose
    gauges are constant (3 waiting, 2 running, KV 42% used)."""
    calls = {"n": 0}

    def scrape() -> str:
        calls["n"] += 1
        n = calls["n"]
        label = f'{{engine="0",model_name="{model}"}}'
        return "\n".join(
            [
                "# TYPE vllm:num_requests_waiting gauge",
                f"vllm:num_requests_waiting{label} 3.0",
                "# TYPE vllm:num_requests_running gauge",
                f"vllm:num_requests_running{label} 2.0",
                "# TYPE vllm:kv_cache_usage_perc gauge",
                f"vllm:kv_cache_usage_perc{label} 0.42",
                "# TYPE vllm:prefix_cache_queries counter",
                f"vllm:prefix_cache_queries_total{label} {100.0 * n}",
                "# TYPE vllm:prefix_cache_hits counter",
                f"vllm:prefix_cache_hits_total{label} {10.0 * n}",
                "# TYPE vllm:num_preemptions counter",
                f"vllm:num_preemptions_total{label} 0.0",
                "",
            ]
        )

    return scrape


# ------------------------------------------------------------------------------------------------
# A small advisor API for CLI tests


RESULT: dict[str, Any] = {
    "run": {
        "id": 7,
        "deployment": "chat-prod",
        "setup": {"runtime": "vllm", "hardware": "nvidia-a10g", "model": "llama-3.1-8b", "quantization": "f16-bf16"},
        "workload": {"prompt_tokens_mean": 3000.0},
        "metrics": {"ttft_ms": {"p50": 880.0, "p99": 1900.0}, "decode_tok_s": 20.8},
        "links": {"self": "/api/v1/runs/7"},
    },
    "verdict": "warn",
    "recommendations": [
        {
            "rule_id": "PRE002",
            "name": "prefill.repeated_prefix_not_cached",
            "severity": "severe",
            "title": "A 2,500-token shared prefix is prefilled on every request",
            "evidence": [{"metric": "ttft_ms.p50", "found": 880.0, "expected": "≈ 152 with the prefix cached"}],
            "fix": {"vllm": "--enable-prefix-caching", "other": "Enable prefix caching."},
            "fix_for_runtime": "--enable-prefix-caching",
            "runtime": "vllm",
            "expected_gain": {"metric": "ttft_ms.p50", "from": 880.0, "to": 152.0, "relative": -0.827},
        },
        {
            "rule_id": "DEC001",
            "name": "decode.near_ceiling_with_wide_weights",
            "severity": "low",
            "title": "Decode reaches 57% of the ceiling with 16-bit weights",
            "evidence": [],
            "fix": {"vllm": "--quantization fp8"},
            "expected_gain": None,
        },
    ],
    "expectations": {
        "decode_tok_s": {"ceiling": 36.4, "expected": 16.2, "low": 13.3, "high": 21.1},
        "ttft_ms": {"ceiling": 722.0, "expected": 1578.0, "low": 827.0, "high": 3865.0},
    },
}


@dataclass
class FakeAdvisor:
    """Records requests; answers POST /runs with ``result`` (or ``status``/``problem``)."""

    result: dict[str, Any] = field(default_factory=lambda: json.loads(json.dumps(RESULT)))
    status: int = 201
    problem: dict[str, Any] | None = None
    requests: list[httpx.Request] = field(default_factory=list)

    def handler(self, request: httpx.Request) -> httpx.Response:
        request.read()
        self.requests.append(request)
        if self.problem is not None:
            return httpx.Response(self.status, json=self.problem, headers={"content-type": "application/problem+json"})
        if request.url.path in ("/api/v1/runs", "/api/v1/advise"):
            return httpx.Response(self.status, json=self.result)
        if request.url.path.startswith("/api/v1/runs/"):
            return httpx.Response(200, json=self.result["run"])
        return httpx.Response(404, json={"status": 404, "title": "Not Found", "detail": "Not Found"})


def advisor_http(handler: Callable[[httpx.Request], httpx.Response]) -> httpx.Client:
    return httpx.Client(transport=httpx.MockTransport(handler), base_url="http://advisor.test")


def invoke(
    args: list[str],
    *,
    advisor: httpx.Client | None = None,
    target: httpx.Client | None = None,
    clock: FakeClock | None = None,
) -> Result:
    injected = Injected(advisor=advisor, target=target, sleep=lambda _s: None, clock=clock)
    return CliRunner().invoke(cli, args, obj=injected, catch_exceptions=False)
