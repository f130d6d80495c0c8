"""POST/GET /api/v1/runs end to end on both databases: formats, context, idempotency, bad input."""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ingest"

CANONICAL: dict[str, Any] = {
    "deployment": "chat-prod",
    "measured_at": "2026-11-29T08:00:00Z",
    "labels": {"git_sha": "abc123"},
    "setup": {
        "runtime": "vllm",
        "hardware": "nvidia-a10g",
        "gpu_count": 1,
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "quantization": "bf16",
        "engine_args": {"enable_prefix_caching": True, "enable_chunked_prefill": True},
    },
    "workload": {"num_requests": 200, "concurrency": 1, "prompt_tokens_mean": 512, "output_tokens_mean": 256},
    "metrics": {
        "ttft_ms": {"mean": 120, "p50": 110, "p90": 150, "p99": 190},
        "itl_ms": {"mean": 30.5, "p50": 30, "p90": 31.5, "p99": 33},
        "tpot_ms": {"mean": 30.5, "p50": 30, "p99": 33},
        "decode_tok_s": 32.8,
        "output_throughput_tok_s": 32.0,
        "request_throughput_rps": 0.12,
        "queue_waiting_mean": 0,
        "kv_cache_usage_mean": 0.05,
        "requests_completed": 200,
        "requests_failed": 0,
    },
}


def _counts(url: str) -> dict[str, int]:
    async def run() -> dict[str, int]:
        engine = create_async_engine(url)
        try:
            async with engine.connect() as conn:
                out = {}
                for table in ("run", "raw_payload", "recommendation", "deployment"):
                    out[table] = int((await conn.execute(text(f"SELECT count(*) FROM {table}"))).scalar_one())
                return out
        finally:
            await engine.dispose()

    return asyncio.run(run())


def _post(client: Any, body: Any, **kwargs: Any) -> Any:
    if isinstance(body, (dict, list)):
        body = json.dumps(body).encode()
    return client.post("/api/v1/runs", content=body, **kwargs)


def test_canonical_run_is_stored_analysed_and_idempotent(client: Any, clean_db: str) -> None:
    first = _post(client, CANONICAL)
    assert first.status_code == 201, first.text
    body = first.json()
    assert set(body) >= {"run", "verdict", "recommendations", "expectations"}
    run = body["run"]
    assert run["deployment"] == "chat-prod"
    assert run["setup"]["hardware"] == "nvidia-a10g"
    assert run["setup"]["model"] == "llama-3.1-8b"
    # 32.8 tok/s against a 37.5 tok/s bandwidth ceiling with 16-bit weights: quantizing is the lever
    assert body["verdict"] == "warn"
    assert body["recommendations"][0]["action"] == "quantize-weights"
    # physics says decode is bandwidth-bound
    assert body["expectations"]["physics"]["decode_bound"] == "bandwidth"
    assert 0.8 < run["efficiency"]["decode_bandwidth_utilisation"] < 0.95

    again = _post(client, CANONICAL)
    assert again.status_code == 200
    assert again.json()["run"]["id"] == run["id"]
    assert again.json()["recommendations"] == body["recommendations"]
    assert _counts(clean_db)["run"] == 1

    got = client.get(f"/api/v1/runs/{run['id']}")
    assert got.status_code == 200
    assert got.json()["metrics"]["decode_tok_s"] == 32.8
    raw = client.get(f"/api/v1/runs/{run['id']}/raw")
    assert json.loads(raw.content) == CANONICAL


def test_aliases_resolve_to_the_same_run(client: Any, clean_db: str) -> None:
    assert _post(client, CANONICAL).status_code == 201
    alias = copy.deepcopy(CANONICAL)
    alias["setup"]["hardware"] = "NVIDIA A10G"
    response = _post(client, alias)
    assert response.status_code == 200, response.text  # same normalised content → same run
    assert _counts(clean_db)["run"] == 1


def test_native_file_with_context_from_query_and_headers(client: Any) -> None:
    data = (FIXTURES / "vllm_bench" / "vllm_bench_serve.json").read_bytes()
    response = client.post(
        "/api/v1/runs?hardware=nvidia-h100-sxm&label=ci_job=42",
        content=data,
        headers={"X-Advisor-Deployment": "chat-staging", "Content-Type": "application/json"},
    )
    assert response.status_code == 201, response.text
    run = response.json()["run"]
    assert run["deployment"] == "chat-staging"
    assert run["setup"]["hardware"] == "nvidia-h100-sxm"
    assert run["labels"]["ci_job"] == "42"
    assert run["source"]["format"] == "vllm_bench"
    raw = client.get(f"/api/v1/runs/{run['id']}/raw")
    assert raw.content == data


def test_a_file_with_several_runs_returns_runs(client: Any, clean_db: str) -> None:
    data = (FIXTURES / "llama_bench" / "llama_bench.json").read_bytes()
    response = client.post("/api/v1/runs?deployment=laptop", content=data)
    assert response.status_code == 201, response.text
    runs = response.json()["runs"]
    assert len(runs) >= 2
    assert all(set(item) >= {"run", "verdict", "recommendations", "expectations"} for item in runs)
    assert len({item["run"]["id"] for item in runs}) == len(runs)
    assert _counts(clean_db)["raw_payload"] == 1
    assert client.post("/api/v1/runs?deployment=laptop", content=data).status_code == 200
    assert _counts(clean_db)["run"] == len(runs)


def test_idempotency_key(client: Any, clean_db: str) -> None:
    headers = {"Idempotency-Key": "deploy-77"}
    first = _post(client, CANONICAL, headers=headers)
    assert first.status_code == 201
    assert _post(client, CANONICAL, headers=headers).json()["run"]["id"] == first.json()["run"]["id"]
    other = copy.deepcopy(CANONICAL)
    other["metrics"]["decode_tok_s"] = 20.0
    reused = _post(client, other, headers=headers)
    assert reused.status_code == 422
    assert reused.json()["field"] == "header.idempotency-key"
    assert _counts(clean_db)["run"] == 1


def _bad(field_in: str | None, status: int, response: Any) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    if field_in is not None:
        assert field_in in (response.json().get("field") or ""), response.json()


def _mutated(path: str, value: Any) -> dict[str, Any]:
    doc = copy.deepcopy(CANONICAL)
    node = doc
    *parents, last = path.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    return doc


@pytest.mark.parametrize(
    ("name", "body", "status", "field"),
    [
        ("empty", b"", 400, "body"),
        ("whitespace", b"   \n", 400, "body"),
        ("truncated_json", json.dumps(CANONICAL).encode()[:-20], 400, "body"),
        ("binary_garbage", bytes(range(256)) * 4, 400, "body"),
        ("unrecognised", b'{"hello": "world"}', 422, "format"),
        ("negative_ttft", _mutated("metrics.ttft_ms.p50", -1), 422, "metrics.ttft_ms.p50"),
        ("nan_decode", json.dumps(CANONICAL).replace("32.8", "NaN").encode(), 422, "metrics.decode_tok_s"),
        ("p50_above_p99", _mutated("metrics.ttft_ms.p50", 500), 422, "metrics.ttft_ms"),
        (
            "kv_usage_above_one",
            _mutated("metrics.kv_cache_usage_mean", 1.5),
            422,
            "metrics.kv_cache_usage_mean",
        ),
        ("wrong_type", _mutated("workload.num_requests", "many"), 422, "workload.num_requests"),
        ("unknown_hardware", _mutated("setup.hardware", "nvidia-h1000"), 422, "setup.hardware"),
        ("unknown_model", _mutated("setup.model", "not-a-model-xyz"), 422, "setup.model"),
        ("unknown_quant", _mutated("setup.quantization", "q17"), 422, "setup.quantization"),
        ("unknown_runtime", _mutated("setup.runtime", "excel"), 422, "setup.runtime"),
        ("misspelt_key", _mutated("metrics.ttft_ms.p5O", 1), 422, "metrics.ttft_ms"),
    ],
)
def test_bad_input_is_a_clear_4xx_and_writes_nothing(
    client: Any, clean_db: str, name: str, body: Any, status: int, field: str
) -> None:
    _bad(field, status, _post(client, body))
    assert _counts(clean_db) == {"run": 0, "raw_payload": 0, "recommendation": 0, "deployment": 0}


def test_unknown_hardware_lists_close_matches(client: Any) -> None:
    response = _post(client, _mutated("setup.hardware", "nvidia-h100-sxn"))
    assert response.status_code == 422
    assert "nvidia-h100-sxm" in response.json()["matches"]


def test_file_contradicting_context_names_both(client: Any, clean_db: str) -> None:
    data = (FIXTURES / "vllm_bench" / "vllm_bench_serve.json").read_bytes()
    model_in_file = json.loads(data)["model_id"]
    response = client.post("/api/v1/runs?model=qwen2.5-7b", content=data)
    _bad("setup.model", 422, response)
    assert model_in_file in response.json()["detail"]
    assert "qwen2.5-7b" in response.json()["detail"]
    assert _counts(clean_db)["run"] == 0


def test_body_over_the_limit_is_413(client: Any, clean_db: str) -> None:
    response = client.post("/api/v1/runs", content=b"{" + b" " * 10_000_001 + b"}")
    _bad("body", 413, response)
    assert _counts(clean_db)["run"] == 0


def test_wrapper_combines_benchmark_and_metrics_scrape(client: Any) -> None:
    bench = (FIXTURES / "vllm_bench" / "vllm_bench_serve.json").read_text()
    scrape = (FIXTURES / "prometheus" / "vllm_metrics.prom").read_text()  # same model as the benchmark
    wrapper = {
        "context": {"deployment": "chat-prod", "hardware": "nvidia-h100-sxm"},
        "files": [
            {"name": "bench.json", "content": bench},
            {"name": "metrics.txt", "content": scrape, "role": "metrics"},
        ],
    }
    response = _post(client, wrapper)
    assert response.status_code == 201, response.text
    metrics = response.json()["run"]["metrics"]
    bench_only = client.post("/api/v1/advise?hardware=nvidia-h100-sxm", content=bench.encode()).json()["run"]
    assert metrics["ttft_ms"] == bench_only["metrics"]["ttft_ms"]  # latency percentiles: the benchmark's
    assert "kv_cache_usage_mean" not in bench_only["metrics"]
    assert 0 <= metrics["kv_cache_usage_mean"] <= 1  # server telemetry: the scrape's


def test_advise_stores_nothing(client: Any, clean_db: str) -> None:
    response = client.post("/api/v1/advise", content=json.dumps(CANONICAL).encode())
    assert response.status_code == 200, response.text
    assert set(response.json()) >= {"run", "verdict", "recommendations", "expectations"}
    assert _counts(clean_db)["run"] == 0


def _ndjson(n: int, start: int = 0) -> bytes:
    lines = []
    for i in range(start, start + n):
        doc = copy.deepcopy(CANONICAL)
        doc["measured_at"] = f"2026-11-{1 + i % 28:02d}T{i % 24:02d}:00:00Z"
        doc["metrics"]["decode_tok_s"] = 30 + i * 0.01
        lines.append(json.dumps(doc))
    return "\n".join(lines).encode()


def test_bulk_is_all_or_nothing_and_idempotent(client: Any, clean_db: str) -> None:
    response = client.post("/api/v1/runs/bulk", content=_ndjson(5))
    assert response.status_code == 200, response.text
    assert response.json()["created"] == 5
    again = client.post("/api/v1/runs/bulk", content=_ndjson(5))
    assert again.json() == {**again.json(), "created": 0, "existing": 5}

    bad = _ndjson(3, start=10).split(b"\n")
    bad.insert(2, json.dumps(_mutated("metrics.ttft_ms.p50", -3)).encode())
    response = client.post("/api/v1/runs/bulk", content=b"\n".join(bad))
    _bad("items[2]", 422, response)
    assert _counts(clean_db)["run"] == 5

    # a bulk run gets its recommendations on first read, and keeps its own raw item
    run_id = client.get("/api/v1/runs?limit=1").json()["items"][0]["id"]
    recs = client.get(f"/api/v1/runs/{run_id}/recommendations")
    assert recs.status_code == 200
    assert isinstance(recs.json(), list)
    raw = client.get(f"/api/v1/runs/{run_id}/raw")
    assert json.loads(raw.content)["deployment"] == "chat-prod"


def test_list_filters_and_cursor_pagination(client: Any) -> None:
    assert client.post("/api/v1/runs/bulk", content=_ndjson(7)).status_code == 200
    other = _mutated("setup.runtime", "sglang")
    assert _post(client, other).status_code == 201

    page = client.get("/api/v1/runs?limit=3&runtime=vllm").json()
    assert page["total"] == 7
    seen = [item["id"] for item in page["items"]]
    while page["next_cursor"]:
        page = client.get(f"/api/v1/runs?limit=3&runtime=vllm&cursor={page['next_cursor']}").json()
        seen += [item["id"] for item in page["items"]]
    assert len(seen) == len(set(seen)) == 7
    stamps = [client.get(f"/api/v1/runs/{i}").json()["measured_at"] for i in seen]
    assert stamps == sorted(stamps, reverse=True)

    assert client.get("/api/v1/runs?runtime=sglang").json()["total"] == 1
    assert client.get("/api/v1/runs?deployment=chat-prod&hardware=nvidia-a10g").json()["total"] == 8
    assert client.get("/api/v1/runs", params={"hardware": "NVIDIA A10G", "model": "llama3.1:8b"}).json()["total"] == 8
    _bad("query.hardware", 422, client.get("/api/v1/runs?hardware=nvidia-h1000"))
    assert client.get("/api/v1/runs?since=2026-11-29T00:00:00Z").json()["total"] == 1
    _bad("query.cursor", 422, client.get("/api/v1/runs?cursor=garbage"))
    _bad(None, 404, client.get("/api/v1/runs/999999"))


def test_recommendation_status_can_be_changed(client: Any) -> None:
    body = _post(client, _mutated("metrics.queue_waiting_mean", 12)).json()
    recs = body["recommendations"]
    assert recs, "twelve queued requests must produce a recommendation"
    rec_id = recs[0]["id"]
    response = client.patch(f"/api/v1/recommendations/{rec_id}", json={"status": "applied", "note": "added a replica"})
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "applied"
    stored = client.get(f"/api/v1/runs/{body['run']['id']}/recommendations").json()
    assert stored[0]["status"] == "applied"
    assert stored[0]["status_note"] == "added a replica"
    _bad("status", 422, client.patch(f"/api/v1/recommendations/{rec_id}", json={"status": "done"}))


def test_slo_in_a_submission_updates_the_deployment_and_fails_the_verdict(client: Any) -> None:
    doc = _mutated("slo", {"ttft_p99_ms": 150, "decode_tok_s_min": 20})
    body = _post(client, doc).json()
    assert body["verdict"] == "fail"  # ttft p99 190 ms breaches the 150 ms objective
    assert client.get("/api/v1/deployments/chat-prod").json()["slo"] == {"ttft_p99_ms": 150.0, "decode_tok_s_min": 20.0}

    # the stored SLO now judges later runs of the deployment, even without an slo in the body
    later = _mutated("measured_at", "2026-11-29T09:00:00Z")
    assert _post(client, later).json()["verdict"] == "fail"
    relaxed = _mutated("measured_at", "2026-11-29T10:00:00Z")
    response = client.post("/api/v1/runs?slo=ttft_p99_ms=500", content=json.dumps(relaxed).encode())
    assert response.json()["verdict"] != "fail"
    assert client.get("/api/v1/deployments/chat-prod").json()["slo"]["ttft_p99_ms"] == 500.0


def test_advise_takes_an_slo_without_storing_it(client: Any) -> None:
    response = client.post("/api/v1/advise", content=json.dumps(_mutated("slo", {"ttft_p99_ms": 150})).encode())
    assert response.json()["verdict"] == "fail"
    assert client.get("/api/v1/deployments/chat-prod").status_code == 404
