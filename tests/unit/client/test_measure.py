"""advisor measure against fake servers whose timings follow the seed: TTFT grows with the prompt,
the decode rate does not. A fake clock, injected into the probe and into the CLI, makes every number
exact: nothing here depends on how fast the machine runs the test."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from advisor.canonical import decode_run
from advisor.client.http import Rejected, Unreachable
from advisor.client.measure import (
    MeasureOptions,
    OllamaBackend,
    OpenAIBackend,
    build_prompt,
    iter_levels,
    measure,
    percentiles,
)
from tests.unit.client.fakes import (
    FakeAdvisor,
    FakeClock,
    FakeLLM,
    FakeOllama,
    advisor_http,
    invoke,
    vllm_scrape_factory,
)


def _http(handler: object) -> httpx.Client:
    return httpx.Client(transport=httpx.MockTransport(handler), base_url="http://llm.test")  # type: ignore[arg-type]


def _opts(**kw: object) -> MeasureOptions:
    return MeasureOptions(**{"repeat": 4, "scrape_interval_s": 0.001, **kw})  # type: ignore[arg-type]


@pytest.mark.parametrize("chat", [False, True], ids=["completions", "chat"])
def test_the_seed_experiment_on_an_openai_server(clock: FakeClock, chat: bool) -> None:
    llm = FakeLLM(clock)
    http = _http(llm.handler)
    backend = OpenAIBackend(http, chat=chat, clock=clock)
    result = measure(backend, options=_opts(), scrape_http=http, clock=clock)

    assert result.model == "tiny-llama"  # the server's first model
    assert result.runtime == "vllm"  # from owned_by
    short, long = result.probe("short"), result.probe("long")
    assert short is not None and long is not None
    assert len(short.ok) == len(long.ok) == 4
    # The calibration makes the prompts the server's own ≈200 and ≈2,000 tokens.
    assert short.prompt_tokens() == pytest.approx(200, abs=3)
    assert long.prompt_tokens() == pytest.approx(2000, abs=3)
    # TTFT = 20 ms + tokens × 0.1 ms: long ≈ 220 ms, short ≈ 40 ms.
    assert short.ttft()["p50"] == pytest.approx(20 + 0.1 * short.prompt_tokens(), rel=1e-6)  # type: ignore[operator]
    assert long.ttft()["p50"] == pytest.approx(20 + 0.1 * long.prompt_tokens(), rel=1e-6)  # type: ignore[operator]
    assert long.ttft()["p50"] > 4 * short.ttft()["p50"]
    # Decode does not care about the prompt: 100 tok/s, 10 ms between tokens, in both probes.
    assert short.decode_tok_s() == pytest.approx(100.0)
    assert long.decode_tok_s() == pytest.approx(100.0)
    assert long.itl() == {"mean": pytest.approx(10.0), "min": pytest.approx(10.0), "p50": pytest.approx(10.0),
                          "p90": pytest.approx(10.0), "p99": pytest.approx(10.0), "max": pytest.approx(10.0)}  # fmt: skip
    # Prefill from the TTFT difference: 10,000 tok/s (0.1 ms a token).
    assert result.prefill_tok_s == pytest.approx(10_000, rel=1e-6)
    # Warm-up: two plain calls, discarded; then 8 streamed requests, each with its own prefix.
    assert llm.plain_calls == 2
    assert len(llm.stream_prompts) == 8
    assert len({p[:12] for p in llm.stream_prompts}) == 8


def test_the_run_is_a_valid_canonical_run(clock: FakeClock) -> None:
    llm = FakeLLM(clock)
    http = _http(llm.handler)
    result = measure(OpenAIBackend(http, clock=clock), options=_opts(), scrape_http=http, clock=clock)
    run = result.to_run(
        {
            "deployment": "chat-prod",
            "hardware": "nvidia-a10g",
            "labels": {"git_sha": "abc"},
            "slo": {"ttft_p99_ms": 800},
        }
    )
    canonical = decode_run(json.loads(json.dumps(run)))  # validates: ordering, ranges, unknown keys
    assert canonical.deployment == "chat-prod"
    assert canonical.setup.hardware == "nvidia-a10g"
    assert canonical.setup.model == "tiny-llama"
    assert canonical.setup.runtime == "vllm"
    assert canonical.workload.concurrency == 1
    assert canonical.workload.prompt_tokens_mean == pytest.approx(2000, abs=3)
    assert canonical.workload.output_tokens_mean == 64
    assert canonical.workload.streaming is True
    assert canonical.metrics.decode_tok_s == pytest.approx(100.0)
    assert canonical.metrics.prefill_tok_s == pytest.approx(10_000, rel=1e-6)
    assert canonical.metrics.tpot_ms.p50 == pytest.approx(10.0)
    assert canonical.metrics.requests_completed == 4
    assert canonical.labels == {"probe": "advisor-measure", "git_sha": "abc"}
    assert canonical.slo is not None and canonical.slo.ttft_p99_ms == 800
    assert canonical.source.tool == "advisor measure"
    assert any("no /metrics" in note for note in canonical.source.notes)


def test_metrics_scrapes_fold_queue_kv_and_prefix_hits_into_the_run(clock: FakeClock) -> None:
    llm = FakeLLM(clock, metrics=vllm_scrape_factory())
    http = _http(llm.handler)
    result = measure(OpenAIBackend(http, clock=clock), options=_opts(), scrape_http=http, clock=clock)
    metrics = result.to_run()["metrics"]
    assert metrics["queue_waiting_mean"] == pytest.approx(3.0)
    assert metrics["queue_waiting_max"] == pytest.approx(3.0)
    assert metrics["running_max"] == pytest.approx(2.0)
    assert metrics["kv_cache_usage_max"] == pytest.approx(0.42)
    assert metrics["prefix_cache_hit_rate"] == pytest.approx(0.1)
    assert metrics["preemptions"] == 0
    # The client's own latencies are kept: the scrape has no TTFT histogram, nothing replaced them.
    assert metrics["decode_tok_s"] == pytest.approx(100.0)
    assert any("vllm /metrics" in note for note in result.notes)


def test_a_scrape_without_a_known_engine_is_noted_not_folded(clock: FakeClock) -> None:
    llm = FakeLLM(clock, metrics=lambda: "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 1.0\n")
    http = _http(llm.handler)
    result = measure(OpenAIBackend(http, clock=clock), options=_opts(), scrape_http=http, clock=clock)
    assert result.telemetry is None
    assert any("nothing folded in" in note for note in result.notes)


def test_servers_without_stream_usage_are_counted_by_events(clock: FakeClock) -> None:
    llm = FakeLLM(clock, usage_in_stream=False, reject_stream_options=True)
    http = _http(llm.handler)
    result = measure(OpenAIBackend(http, clock=clock), options=_opts(), scrape_http=None, clock=clock)
    long = result.probe("long")
    assert long is not None
    assert long.output_tokens() == 64
    # Prompt tokens come from the calibration (the stream did not report them).
    assert long.prompt_tokens() == pytest.approx(2000, abs=3)
    assert result.prefill_tok_s == pytest.approx(10_000, rel=0.01)


def test_concurrency_levels_add_probes(clock: FakeClock) -> None:
    llm = FakeLLM(clock)
    http = _http(llm.handler)
    result = measure(OpenAIBackend(http, clock=clock), options=_opts(concurrency=(1, 4)), scrape_http=None, clock=clock)
    assert [p.name for p in result.probes] == ["short", "long", "c4"]
    c4 = result.probe("c4")
    assert c4 is not None and c4.concurrency == 4
    assert len(c4.ok) == 8  # max(repeat, 2 × level)
    summary = c4.summary()
    assert summary["concurrency"] == 4
    assert summary["output_throughput_tok_s"] > 0


def test_ollama_uses_its_own_counters(clock: FakeClock) -> None:
    ollama = FakeOllama(clock, load_ns=2_000_000)
    http = _http(ollama.handler)
    result = measure(OllamaBackend(http, clock=clock), options=_opts(), scrape_http=http, clock=clock)
    assert result.model == "llama3.2:3b"
    assert result.runtime == "ollama"
    assert result.setup_hints == {"quantization": "Q4_K_M"}
    assert result.prefill_tok_s == pytest.approx(5000, rel=0.01)
    long = result.probe("long")
    assert long is not None
    assert long.decode_tok_s() == pytest.approx(50, rel=0.01)
    run = result.to_run()
    assert run["setup"]["quantization"] == "Q4_K_M"
    assert run["metrics"]["load_ms"] == pytest.approx(2.0)
    assert any("Ollama's own counters" in n for n in run["source"]["notes"])
    # The client-side TTFT still grows with the prompt, as the seed says.
    short = result.probe("short")
    assert short is not None
    assert long.ttft()["p50"] > 5 * short.ttft()["p50"]


def test_an_unknown_model_is_rejected(clock: FakeClock) -> None:
    http = _http(FakeLLM(clock).handler)
    with pytest.raises(Rejected, match="404"):
        measure(OpenAIBackend(http, clock=clock), model="nope", options=_opts(), clock=clock)


def test_an_unreachable_server(clock: FakeClock) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    with pytest.raises(Unreachable):
        measure(OpenAIBackend(_http(refuse), clock=clock), options=_opts(), clock=clock)


def test_some_failed_requests_are_noted_all_failed_is_an_error(clock: FakeClock) -> None:
    llm = FakeLLM(clock, fail_after=6)
    http = _http(llm.handler)
    result = measure(OpenAIBackend(http, clock=clock), options=_opts(), clock=clock)
    long = result.probe("long")
    assert long is not None and len(long.ok) == 2
    assert result.to_run()["metrics"]["requests_failed"] == 2
    assert any("2 request(s) failed" in n for n in result.notes)

    from advisor.client.measure import MeasureError

    broken = FakeLLM(FakeClock(), fail_after=0)
    with pytest.raises(MeasureError, match="every request failed"):
        measure(OpenAIBackend(_http(broken.handler), clock=clock), options=_opts(), clock=clock)


@pytest.mark.parametrize(
    ("tokens", "cpt", "overhead"), [(200, 4.0, 1.0), (2000, 4.0, 1.0), (200, 1.0, 2.0), (2000, 3.3, 0.0)]
)
def test_build_prompt_hits_the_token_target(tokens: int, cpt: float, overhead: float) -> None:
    prompt = build_prompt(tokens, cpt, overhead, nonce="abcd1234")
    assert prompt.startswith("[abcd1234] ")
    assert len(prompt) / cpt + overhead == pytest.approx(tokens, abs=1)


def test_percentiles() -> None:
    assert percentiles([]) == {}
    p = percentiles([float(x) for x in range(1, 101)])
    assert p["p50"] == pytest.approx(50.5)
    assert p["p99"] == pytest.approx(99.01)
    assert p["min"] == 1 and p["max"] == 100


@pytest.mark.parametrize(("text", "levels"), [("1", [1]), ("1,4,16", [1, 4, 16]), (" 2 , 8 ", [2, 8])])
def test_iter_levels(text: str, levels: list[int]) -> None:
    assert list(iter_levels(text)) == levels


def test_cli_dry_run_json(clock: FakeClock) -> None:
    llm = FakeLLM(clock, metrics=vllm_scrape_factory())
    target = _http(llm.handler)
    fake = FakeAdvisor()
    result = invoke(
        ["measure", "http://llm.test", "--dry-run", "-o", "json", "-n", "3", "--hardware", "nvidia-a10g"],
        advisor=advisor_http(fake.handler),
        target=target,
        clock=clock,
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert set(doc) == {"probes", "run"}
    assert [p["name"] for p in doc["probes"]] == ["short", "long"]
    for probe in doc["probes"]:
        assert set(probe) >= {"prompt_tokens", "ttft_ms", "itl_ms", "decode_tok_s", "requests"}
        assert set(probe["ttft_ms"]) == {"p50", "p90", "p99"}
        assert probe["requests"] == 3
    assert doc["run"]["setup"]["hardware"] == "nvidia-a10g"
    assert doc["run"]["metrics"]["kv_cache_usage_max"] == pytest.approx(0.42)
    # The CLI times the probe with the injected clock: the fake server's exact physics.
    assert doc["run"]["metrics"]["prefill_tok_s"] == pytest.approx(10_000, rel=1e-6)
    assert doc["run"]["metrics"]["decode_tok_s"] == pytest.approx(100.0)
    assert doc["probes"][1]["ttft_ms"]["p50"] == pytest.approx(20 + 0.1 * doc["probes"][1]["prompt_tokens"], rel=1e-3)
    # ...and stamps the run with it: measured_at is when the fake clock says the probe ended.
    assert doc["run"]["measured_at"] == clock.now().isoformat().replace("+00:00", "Z")
    assert fake.requests == []  # a dry run submits nothing


def test_cli_submits_the_run_and_gates(clock: FakeClock) -> None:
    target = _http(FakeLLM(clock).handler)
    fake = FakeAdvisor()
    result = invoke(
        [
            "measure",
            "http://llm.test/v1",
            "-n",
            "2",
            "-d",
            "chat-prod",
            "--setup-model",
            "llama-3.1-8b",
            "--fail-on",
            "severe",
        ],
        advisor=advisor_http(fake.handler),
        target=target,
        clock=clock,
    )
    assert result.exit_code == 1  # the fake advisor answers with a severe finding
    assert len(fake.requests) == 1
    sent = json.loads(fake.requests[0].content)
    assert sent["deployment"] == "chat-prod"
    assert sent["setup"]["model"] == "llama-3.1-8b"
    assert "probe" in result.stdout and "long" in result.stdout
    assert "PRE002" in result.stdout


def test_a_server_without_a_model_list_asks_for_model(clock: FakeClock) -> None:
    http = _http(lambda request: httpx.Response(404, text="Not Found"))
    with pytest.raises(Rejected, match="pass --model"):
        measure(OpenAIBackend(http, clock=clock), options=_opts(), clock=clock)
    result = invoke(["measure", "http://llm.test", "--dry-run"], target=http, clock=clock)
    assert result.exit_code == 4
    assert "pass --model" in result.stderr


def test_the_default_clock_is_monotonic_and_utc() -> None:
    from datetime import UTC

    from advisor.client.clock import SYSTEM_CLOCK

    first = SYSTEM_CLOCK.monotonic()
    assert SYSTEM_CLOCK.monotonic() >= first
    assert SYSTEM_CLOCK.now().tzinfo is UTC


def test_the_fake_clock_stamps_the_run(clock: FakeClock) -> None:
    """started/ended come from the injected clock: exactly the fake servers' time apart."""
    llm = FakeLLM(clock)
    http = _http(llm.handler)
    start = clock.now()
    result = measure(OpenAIBackend(http, clock=clock), options=_opts(), scrape_http=None, clock=clock)
    assert result.started_at == start
    assert result.ended_at == clock.now()
    elapsed = (result.ended_at - result.started_at).total_seconds()
    # Two warm-up calls take no fake time; 4 short and 4 long streams do: prefill, then 63 gaps of 10 ms.
    short, long = result.probe("short"), result.probe("long")
    assert short is not None and long is not None
    assert elapsed == pytest.approx(short.wall_s + long.wall_s, abs=1e-6)
    assert long.wall_s == pytest.approx(4 * (0.02 + 0.0001 * long.prompt_tokens() + 63 * 0.01), rel=1e-6)  # type: ignore[operator]


# --- a measure that always measures (issue 14) ----------------------------------------------------


@dataclass
class EosAtOnceLLM(FakeLLM):
    """A model that ends its answer after ``eos_after`` tokens unless the request sets
    ``ignore_eos``; optionally a server that refuses the field (as a strict OpenAI proxy would)."""

    eos_after: int = 1
    refuse_fixed_length: bool = False
    bodies: list[dict[str, Any]] = field(default_factory=list)

    def _completion(self, request: httpx.Request, *, chat: bool) -> httpx.Response:
        body = json.loads(request.content)
        if body.get("stream"):
            self.bodies.append(body)
            if self.refuse_fixed_length and ("ignore_eos" in body or "min_tokens" in body):
                return httpx.Response(400, json={"error": "unknown field ignore_eos"})
            if not body.get("ignore_eos"):
                body["max_tokens"] = min(int(body["max_tokens"]), self.eos_after)
                request = httpx.Request(request.method, request.url, json=body)
        return super()._completion(request, chat=chat)


def test_a_model_that_ends_at_once_still_streams_the_requested_tokens(clock: FakeClock) -> None:
    llm = EosAtOnceLLM(clock, eos_after=1)
    result = measure(OpenAIBackend(_http(llm.handler), clock=clock), options=_opts(max_tokens=32), clock=clock)
    long = result.probe("long")
    assert long is not None
    assert long.output_tokens() == 32
    assert all(not s.early_stop and s.attempts == 1 for p in result.probes for s in p.samples)
    # Every streamed request asked for the fixed length, in the fields vLLM/SGLang/llama.cpp read.
    assert all(b["ignore_eos"] is True and b["min_tokens"] == 32 for b in llm.bodies)
    assert not any("stopped before" in n for n in result.notes)


def test_early_stops_are_retried_and_reported_when_the_server_refuses_a_fixed_length(clock: FakeClock) -> None:
    llm = EosAtOnceLLM(clock, eos_after=3, refuse_fixed_length=True)
    result = measure(OpenAIBackend(_http(llm.handler), clock=clock), options=_opts(max_tokens=16), clock=clock)
    short = result.probe("short")
    assert short is not None
    assert [s.attempts for s in short.samples] == [3, 3, 3, 3]  # each retried up to MAX_ATTEMPTS
    assert all(s.early_stop and s.output_tokens == 3 for s in short.samples)
    assert short.summary()["early_stops"] == 4
    assert short.summary()["retries"] == 8
    assert "the server refused ignore_eos/min_tokens: the output length was not fixed" in result.notes
    assert (
        "8 request(s) stopped before 16 tokens even after 3 attempts (the shortest after 3): the model ended its "
        "answer and the server did not hold it to the requested length, so decode figures cover shorter answers"
    ) in result.notes
    assert "16 retries for failed or early-stopped requests" in result.notes


def test_a_failed_request_is_retried_and_the_probe_still_measures(clock: FakeClock) -> None:
    calls = {"n": 0}
    llm = FakeLLM(clock)

    def flaky(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else {}
        if body.get("stream"):
            calls["n"] += 1
            if calls["n"] == 2:  # the second streamed request hits a transient server error
                return httpx.Response(503, text="busy")
        return llm.handler(request)

    result = measure(OpenAIBackend(_http(flaky), clock=clock), options=_opts(), clock=clock)
    short = result.probe("short")
    assert short is not None
    assert len(short.ok) == 4
    assert [s.attempts for s in short.samples] == [1, 2, 1, 1]
    assert "1 retry for failed or early-stopped requests" in result.notes


def test_at_least_eight_requests_per_probe_by_default() -> None:
    assert MeasureOptions().repeat == 8
