"""Context parameters on POST /runs and /advise: the workload fields, unknown names with their near
match, the structured verdict reasons, the TTFT breakdown and the resubmission note (both databases)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from tests.integration.test_runs_api import CANONICAL

LLMPERF_LIKE: dict[str, Any] = {
    "setup": {
        "runtime": "vllm",
        "hardware": "nvidia-a10g",
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "quantization": "bf16",
    },
    "workload": {"num_requests": 300, "prompt_tokens_mean": 512, "output_tokens_mean": 128},
    "metrics": {"ttft_ms": {"p50": 300, "p99": 400}, "tpot_ms": {"mean": 40, "p50": 40}, "requests_completed": 300},
}


def _post(client: Any, doc: Any, path: str = "/api/v1/runs", **kwargs: Any) -> Any:
    return client.post(path, content=json.dumps(doc).encode(), **kwargs)


def test_workload_context_fills_the_run_from_the_query(client: Any) -> None:
    response = _post(client, LLMPERF_LIKE, "/api/v1/advise?concurrency=12&request_rate=2.5")
    assert response.status_code == 200, response.text
    workload = response.json()["run"]["workload"]
    assert workload["concurrency"] == 12.0
    assert workload["request_rate"] == 2.5
    assert "workload.concurrency" not in {m["field"] for m in response.json()["analysis"]["missing"]}


def test_workload_context_comes_from_headers_too(client: Any) -> None:
    doc = copy.deepcopy(LLMPERF_LIKE)
    del doc["workload"]["prompt_tokens_mean"]
    response = _post(client, doc, "/api/v1/advise", headers={"X-Advisor-Prompt-Tokens": "2048"})
    assert response.status_code == 200, response.text
    assert response.json()["run"]["workload"]["prompt_tokens_mean"] == 2048.0


def test_a_context_value_contradicting_the_file_is_a_422(client: Any) -> None:
    response = _post(client, CANONICAL, "/api/v1/advise?prompt_tokens=4096")
    assert response.status_code == 422
    problem = response.json()
    assert problem["field"] == "workload.prompt_tokens_mean"
    assert "512" in problem["detail"] and "4096" in problem["detail"]


def test_the_files_own_value_agrees_within_rounding(client: Any) -> None:
    response = _post(client, CANONICAL, "/api/v1/advise?prompt_tokens=514")  # 512 in the file, 0.4 % off
    assert response.status_code == 200, response.text
    assert response.json()["run"]["workload"]["prompt_tokens_mean"] == 512.0


@pytest.mark.parametrize(
    ("query", "headers", "field", "hint"),
    [
        ("?hw=nvidia-a10g", {}, "query.hw", "'hardware'"),
        ("?concurency=12", {}, "query.concurency", "'concurrency'"),
        ("", {"X-Advisor-Hw": "nvidia-a10g"}, "header.x-advisor-hw", "'X-Advisor-Hardware'"),
    ],
)
def test_an_unknown_parameter_is_a_422_naming_the_near_match(
    client: Any, query: str, headers: dict[str, str], field: str, hint: str
) -> None:
    response = _post(client, CANONICAL, "/api/v1/runs" + query, headers=headers)
    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["field"] == field
    assert f"did you mean {hint}?" in problem["detail"]


def test_format_and_known_params_still_work(client: Any) -> None:
    response = _post(client, CANONICAL, "/api/v1/advise?format=canonical&label=ci=1&slo=ttft_p99_ms=150")
    assert response.status_code == 200, response.text
    assert response.json()["verdict"] == "fail"


def test_verdict_reasons_and_the_ttft_breakdown_are_in_the_answer(client: Any, clean_db: str) -> None:
    response = _post(client, CANONICAL, "/api/v1/runs?slo=ttft_p99_ms=150")
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["verdict"] == "fail"
    assert body["verdict_reasons"][0] == {
        "kind": "slo",
        "name": "ttft_p99_ms",
        "limit": 150.0,
        "found": 190.0,
        "text": "SLO ttft_p99_ms: ttft_ms.p99 190 is above the objective 150",
    }
    breakdown = body["analysis"]["ttft_breakdown"]
    assert breakdown["total_ms"] == 110.0
    # one stream at a time: nothing to queue behind, so prefill and the rest make up the 110 ms
    assert breakdown["queueing"] == {
        "ms": 0.0,
        "source": "one request at a time: nothing to queue behind",
        "confidence": 0.8,
    }
    parts = breakdown["queueing"]["ms"] + breakdown["prefill"]["ms"] + breakdown["cache"]["ms"]
    assert parts + breakdown["remainder"]["ms"] == pytest.approx(110.0, abs=0.2)
    assert body["stored_before"] is False

    again = _post(client, CANONICAL, "/api/v1/runs?slo=ttft_p99_ms=150")
    assert again.status_code == 200
    assert again.json()["stored_before"] is True
    assert again.json()["verdict_reasons"] == body["verdict_reasons"]
    assert again.json()["analysis"]["ttft_breakdown"] == breakdown


def test_a_sweep_file_reports_its_knee(client: Any) -> None:
    points = []
    for rate, served, ttft in ((2, 2.0, 90), (8, 7.9, 120), (16, 14.5, 400), (32, 15.1, 60000)):
        doc = copy.deepcopy(LLMPERF_LIKE)
        doc["workload"]["request_rate"] = rate
        doc["metrics"] = {**doc["metrics"], "request_throughput_rps": served, "ttft_ms": {"p50": ttft, "p99": ttft * 2}}
        points.append(doc)
    response = _post(client, points, "/api/v1/advise")
    assert response.status_code == 200, response.text
    runs = response.json()["runs"]
    assert [r["analysis"]["sweep"]["knee"] for r in runs] == [16.0] * 4
    overloaded = runs[3]
    top = overloaded["recommendations"][0]
    assert (top["rule_id"], top["action"]) == ("PRE007", "add-capacity")
    assert "keeps up to 16 req/s offered (serving 14.5 req/s)" in top["title"]
    assert all(r["rule_id"] != "PRE007" for r in runs[0]["recommendations"])
