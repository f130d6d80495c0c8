"""AdvisorClient over httpx.MockTransport: retries, backoff, error types, request encoding."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest

from advisor.client.http import AdvisorClient, Rejected, ServerError, Unreachable, context_params


def _client(handler: Callable[[httpx.Request], httpx.Response], retries: int = 3) -> tuple[AdvisorClient, list[float]]:
    sleeps: list[float] = []
    http = httpx.Client(transport=httpx.MockTransport(handler), base_url="http://advisor.test")
    return AdvisorClient(http, retries=retries, backoff=0.5, sleep=sleeps.append), sleeps


def _recording(seen: list[httpx.Request], response: httpx.Response) -> Callable[[httpx.Request], httpx.Response]:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return response

    return handler


def _flaky(
    failures: list[int | type[Exception]], final: httpx.Response
) -> tuple[Callable[[httpx.Request], httpx.Response], list[int]]:
    """Fails with the given statuses / exceptions in order, then answers ``final``."""
    calls: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        if len(calls) <= len(failures):
            failure = failures[len(calls) - 1]
            if isinstance(failure, int):
                return httpx.Response(failure, text="bad gateway")
            raise failure("boom", request=request)  # type: ignore[call-arg]
        return final

    return handler, calls


@pytest.mark.parametrize(
    ("failures", "attempts"),
    [
        ([502], 2),
        ([503, 504], 3),
        ([httpx.ConnectError], 2),
        ([httpx.ReadTimeout, 503, httpx.ConnectError], 4),
    ],
    ids=["502", "503-504", "connect-error", "mixed"],
)
def test_transient_failures_are_retried_with_growing_backoff(
    failures: list[int | type[Exception]], attempts: int
) -> None:
    handler, calls = _flaky(failures, httpx.Response(200, json={"items": [], "total": 0}))
    client, sleeps = _client(handler)
    assert client.runs() == {"items": [], "total": 0}
    assert len(calls) == attempts
    assert len(sleeps) == attempts - 1
    # Exponential: each wait at least doubles the base (jitter only adds up to 25%).
    for index, delay in enumerate(sleeps):
        assert 0.5 * 2**index <= delay <= 0.5 * 2**index * 1.25


def test_retry_after_is_honoured() -> None:
    statuses = iter([httpx.Response(503, headers={"Retry-After": "7"}), httpx.Response(200, json=[])])
    client, sleeps = _client(lambda r: next(statuses))
    assert client.rules() == []
    assert sleeps == [7.0]


def test_gives_up_after_the_retries() -> None:
    handler, calls = _flaky([httpx.ConnectError] * 10, httpx.Response(200))
    client, sleeps = _client(handler, retries=2)
    with pytest.raises(Unreachable, match=r"cannot reach the advisor at http://advisor\.test"):
        client.runs()
    assert len(calls) == 3
    assert len(sleeps) == 2


def test_persistent_503_is_a_server_error() -> None:
    handler, calls = _flaky([503] * 10, httpx.Response(200))
    client, _ = _client(handler, retries=1)
    with pytest.raises(ServerError) as info:
        client.runs()
    assert info.value.status == 503
    assert len(calls) == 2


@pytest.mark.parametrize(
    ("status", "error"), [(500, ServerError), (501, ServerError), (400, Rejected), (404, Rejected), (422, Rejected)]
)
def test_other_statuses_are_not_retried(status: int, error: type[Exception]) -> None:
    problem = {
        "status": status,
        "title": "Invalid input",
        "detail": "metrics.ttft_ms.p50: must not be negative",
        "field": "metrics.ttft_ms.p50",
    }
    handler, calls = _flaky([], httpx.Response(status, json=problem))
    client, sleeps = _client(handler)
    with pytest.raises(error) as info:
        client.submit(b"{}")
    assert len(calls) == 1
    assert sleeps == []
    assert info.value.field == "metrics.ttft_ms.p50"  # type: ignore[attr-defined]
    assert "must not be negative" in str(info.value)


def test_a_bare_404_names_the_request() -> None:
    client, _ = _client(
        lambda r: httpx.Response(404, json={"status": 404, "title": "Not Found", "detail": "Not Found"})
    )
    with pytest.raises(Rejected, match=r"GET /api/v1/rules: 404 Not Found"):
        client.rules()


def test_submit_sends_the_raw_body_with_context_as_query_parameters() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(201, json={"run": {"id": 1}})

    client, _ = _client(handler)
    body = b"raw benchmark bytes"
    client.submit(
        body,
        context={
            "deployment": "chat-prod",
            "gpu_count": 2,
            "engine_args": {"enable_prefix_caching": True, "max_num_batched_tokens": 2048},
            "labels": {"git_sha": "abc"},
            "slo": {"ttft_p99_ms": 800},
        },
        format_id="vllm_bench",
        file_name="result.json",
        content_type="application/json",
    )
    request = seen[0]
    assert request.url.path == "/api/v1/runs"
    assert request.content == body
    query = request.url.params
    assert query["deployment"] == "chat-prod"
    assert query["gpu_count"] == "2"
    assert query["format"] == "vllm_bench"
    assert query.get_list("engine_arg") == ["enable_prefix_caching=true", "max_num_batched_tokens=2048"]
    assert query.get_list("label") == ["git_sha=abc"]
    assert query.get_list("slo") == ["ttft_p99_ms=800"]
    assert request.headers["x-advisor-file-name"] == "result.json"
    assert request.headers["content-type"] == "application/json"


def test_advise_goes_to_advise() -> None:
    seen: list[httpx.Request] = []
    client, _ = _client(_recording(seen, httpx.Response(200, json={})))
    client.submit(b"x", store=False)
    client.submit_run({"metrics": {}}, store=False)
    assert [r.url.path for r in seen] == ["/api/v1/advise", "/api/v1/advise"]


def test_iter_runs_follows_the_cursor() -> None:
    pages = {
        None: {"items": [{"id": 3}, {"id": 2}], "next_cursor": "c2", "total": 3},
        "c2": {"items": [{"id": 1}], "next_cursor": None, "total": 3},
    }
    client, _ = _client(lambda r: httpx.Response(200, json=pages[r.url.params.get("cursor")]))
    assert [r["id"] for r in client.iter_runs(page_size=2, deployment="x")] == [3, 2, 1]


def test_catalog_entry_with_a_slash_is_found_in_the_listing() -> None:
    listing = [
        {"id": "llama-3.1-8b", "aliases": ["llama3-8b"], "hf_repo": "meta-llama/Llama-3.1-8B-Instruct"},
        {"id": "qwen2.5-7b", "aliases": ["Qwen/Qwen2.5-7B-Instruct"]},
    ]
    paths: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        paths.append(request.url.path)
        return httpx.Response(200, json=listing)

    client, _ = _client(handler)
    assert client.catalog_entry("models", "meta-llama/Llama-3.1-8B-Instruct")["id"] == "llama-3.1-8b"
    assert client.catalog_entry("models", "qwen/qwen2.5-7b-instruct")["id"] == "qwen2.5-7b"
    with pytest.raises(Rejected):
        client.catalog_entry("models", "nobody/nothing")
    assert set(paths) == {"/api/v1/catalog/models"}


def test_connect_reads_url_and_token_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[httpx.Request] = []
    monkeypatch.setenv("ADVISOR_URL", "http://env-advisor:9000/")
    monkeypatch.setenv("ADVISOR_TOKEN", "s3cret")
    transport = httpx.MockTransport(_recording(seen, httpx.Response(200, json=[])))
    with AdvisorClient.connect(transport=transport) as client:
        client.rules()
    assert str(seen[0].url) == "http://env-advisor:9000/api/v1/rules"
    assert seen[0].headers["authorization"] == "Bearer s3cret"
    assert seen[0].headers["user-agent"].startswith("advisor-cli/")


def test_explicit_url_and_token_win_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[httpx.Request] = []
    monkeypatch.setenv("ADVISOR_URL", "http://env-advisor:9000")
    monkeypatch.delenv("ADVISOR_TOKEN", raising=False)
    transport = httpx.MockTransport(_recording(seen, httpx.Response(200, json=[])))
    with AdvisorClient.connect("http://flag:1", None, transport=transport) as client:
        client.rules()
    assert seen[0].url.host == "flag"
    assert "authorization" not in seen[0].headers


def test_context_params_types() -> None:
    assert context_params({"deployment": None, "runtime": "vllm", "engine_args": {"x": False}}) == {
        "runtime": "vllm",
        "engine_arg": ["x=false"],
    }


def test_rules_accepts_an_envelope() -> None:
    client, _ = _client(lambda r: httpx.Response(200, json={"rules": [{"rule_id": "PRE001"}]}))
    assert client.rules() == [{"rule_id": "PRE001"}]


def test_patch_recommendation_status() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"id": 4, "status": "applied"})

    client, _ = _client(handler)
    client.set_recommendation_status(4, "applied", note="PR 12")
    assert seen[0].method == "PATCH"
    assert json.loads(seen[0].content) == {"status": "applied", "note": "PR 12"}
