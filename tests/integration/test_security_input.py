"""Issue #18 item 1: every input that made a 500 (or was stored by SQLite and refused by Postgres) is
a 4xx problem document naming the field, alike on both databases, and nothing is stored."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from tests.integration.test_runs_api import CANONICAL, _counts

DEEP = "[" * 100_000 + "]" * 100_000
PREDICT = {"setup": {"hardware": "nvidia-a10g", "model": "meta-llama/Llama-3.1-8B-Instruct"}}


def _with(path: str, value: Any) -> dict[str, Any]:
    body = copy.deepcopy(CANONICAL)
    node = body
    *head, last = path.split(".")
    for key in head:
        node = node.setdefault(key, {})
    node[last] = value
    return body


def _post_json(client: Any, path: str, body: str, **headers: str) -> Any:
    return client.post(
        path, content=body.encode("utf-8", "surrogatepass"), headers={"content-type": "application/json", **headers}
    )


def _assert_problem(response: Any, status: int, field: str, message: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = response.json()
    assert problem["field"] == field
    assert message in problem["detail"]


def _assert_nothing_stored(url: str) -> None:
    assert _counts(url) == {"run": 0, "raw_payload": 0, "recommendation": 0, "deployment": 0}


@pytest.mark.parametrize("path", ["/api/v1/runs", "/api/v1/runs/bulk", "/api/v1/advise", "/api/v1/predict"])
def test_json_nested_100000_deep_is_a_400(client: Any, clean_db: str, path: str) -> None:
    _assert_problem(_post_json(client, path, DEEP), 400, "body", "nested too deeply")
    _assert_nothing_stored(clean_db)


# (canonical field, value, field named, message): each was a 500 or stored by SQLite only.
RUN_CASES = [
    ("labels.git_sha", "\ud800", "labels.git_sha", "lone surrogate"),
    ("workload.num_requests", 2**70, "workload.num_requests", "expected at most 1e+09"),
    ("setup.gpu_count", 2**31, "setup.gpu_count", "expected at most 1e+06"),
    ("labels.team", "a\x00b", "labels.team", "NUL"),
    ("setup.runtime_version", "v" * 65, "setup.runtime_version", "at most 64 characters, got 65"),
    ("setup.kv_cache_dtype", "fp8" * 20, "setup.kv_cache_dtype", "at most 32 characters, got 60"),
    ("setup.model", "meta-llama/\x00", "setup.model", "NUL"),
    ("source.file_name", "f" * 501, "source.file_name", "at most 500 characters"),
    ("metrics.decode_tok_s", 1e308, "metrics.decode_tok_s", "expected at most 100000"),
    ("metrics.ttft_ms.p50", 1e300, "metrics.ttft_ms.p50", "expected at most 3.1536e+10"),
    ("metrics.duration_s", 400 * 24 * 3600, "metrics.duration_s", "expected at most 3.1536e+07"),
    (
        "setup.engine_args.x",
        {"a": {"b": {"c": {"d": {"e": {"f": {"g": {"h": 1}}}}}}}},
        "setup.engine_args.x.a.b.c.d.e.f.g",
        "nested more than 8 levels",
    ),
    ("slo", {"ttft_p50_ms": 1e308}, "slo.ttft_p50_ms", "expected at most"),
    ("slo", {"ttft_p50_ms": 500, "ttft_p99_ms": 200}, "slo.ttft_p50_ms", "above the p99 objective"),
]


@pytest.mark.parametrize(("path", "value", "field", "message"), RUN_CASES, ids=[c[0] + ":" + c[3] for c in RUN_CASES])
def test_implausible_or_unstorable_run_is_a_422(
    client: Any, clean_db: str, path: str, value: Any, field: str, message: str
) -> None:
    body = json.dumps(_with(path, value), ensure_ascii=True)
    _assert_problem(_post_json(client, "/api/v1/runs", body), 422, field, message)
    # the same run inside a bulk is refused alike, and the bulk stores nothing
    bulk = client.post("/api/v1/runs/bulk", content=body + "\n", headers={"content-type": "application/x-ndjson"})
    _assert_problem(bulk, 422, f"items[0].{field}", message)
    _assert_nothing_stored(clean_db)


def test_deployment_with_nul_is_a_422(client: Any, clean_db: str) -> None:
    response = _post_json(client, "/api/v1/runs", json.dumps(_with("deployment", "chat\x00prod")))
    assert response.status_code == 422, response.text
    assert response.json()["field"] == "deployment"
    _assert_nothing_stored(clean_db)


@pytest.mark.parametrize(
    ("workload", "field", "message"),
    [
        ({"prompt_tokens_mean": -5}, "workload.prompt_tokens_mean", "must not be negative"),
        ({"concurrency": 1e308}, "workload.concurrency", "expected at most 1e+09"),
    ],
)
def test_predict_refuses_impossible_workloads(client: Any, workload: dict[str, Any], field: str, message: str) -> None:
    _assert_problem(
        _post_json(client, "/api/v1/predict", json.dumps({**PREDICT, "workload": workload})), 422, field, message
    )


def test_predict_refuses_a_gpu_count_beyond_any_cluster(client: Any) -> None:
    body = {"setup": {**PREDICT["setup"], "gpu_count": 2**40}}
    _assert_problem(_post_json(client, "/api/v1/predict", json.dumps(body)), 422, "setup.gpu_count", "expected at most")


@pytest.mark.parametrize("path", ["/api/v1/runs/{}", "/api/v1/runs/{}/raw", "/api/v1/runs/{}/recommendations"])
def test_path_ids_beyond_64_bits_are_404(client: Any, path: str) -> None:
    for ident in (2**63, 2**70):
        response = client.get(path.format(ident))
        assert response.status_code == 404, response.text
        assert response.json()["field"] == "path.run_id"
    assert client.get(path.format(2**63 - 1)).status_code == 404  # the largest id is a plain miss


def test_nul_in_a_query_is_a_422_naming_it(client: Any) -> None:
    _assert_problem(client.get("/api/v1/runs", params={"deployment": "a\x00b"}), 422, "query.deployment", "NUL")


def test_stored_headers_beyond_their_column_are_a_422(client: Any, clean_db: str) -> None:
    body = json.dumps(CANONICAL)
    response = _post_json(client, "/api/v1/runs", body, **{"Idempotency-Key": "k" * 181})
    _assert_problem(response, 422, "header.idempotency-key", "at most 180 characters, got 181")
    response = _post_json(client, "/api/v1/runs", body, **{"X-Advisor-File-Name": "f" * 501})
    _assert_problem(response, 422, "header.x-advisor-file-name", "at most 500 characters")
    response = client.post(
        "/api/v1/runs", params={"submitted_by": "s" * 201}, content=body, headers={"content-type": "application/json"}
    )
    _assert_problem(response, 422, "query.submitted_by", "at most 200 characters")
    _assert_nothing_stored(clean_db)


def test_the_largest_plausible_values_are_stored(client: Any, clean_db: str) -> None:
    """The bounds refuse nonsense, not real runs: values at the bound are accepted."""
    body = _with("metrics.decode_tok_s", 1e5)
    body["setup"]["runtime_version"] = "v" * 64
    body["workload"]["num_requests"] = 10**9
    response = _post_json(client, "/api/v1/runs", json.dumps(body))
    assert response.status_code == 201, response.text
    assert _counts(clean_db)["run"] == 1


@pytest.mark.parametrize(
    "content_type",
    ["application/xml", "text/xml", "multipart/form-data; boundary=x", "application/x-www-form-urlencoded"],
)
def test_xml_forms_and_multipart_are_415_never_sniffed(client: Any, clean_db: str, content_type: str) -> None:
    """A canonical run sent under a body type the API never reads is refused, not sniffed and stored."""
    for path in ("/api/v1/runs", "/api/v1/runs/bulk", "/api/v1/advise"):
        response = client.post(path, content=json.dumps(CANONICAL), headers={"content-type": content_type})
        _assert_problem(response, 415, "header.content-type", "is not read here")
    _assert_nothing_stored(clean_db)
