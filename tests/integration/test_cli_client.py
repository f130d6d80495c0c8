"""The CLI client against the real app: AdvisorClient over Litestar's TestClient (an httpx.Client),
on a migrated database, on SQLite and Postgres."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner, Result

from advisor.cli import cli
from advisor.client import AdvisorClient, Injected
from advisor.client.exit_codes import ExitCode
from advisor.client.gate import SEVERITIES
from tests.unit.client.fakes import FakeClock, FakeLLM, vllm_scrape_factory

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "ingest"

#: A run whose 2,500-token shared prefix is prefilled every time (prefix caching off).
CANONICAL: dict[str, Any] = {
    "deployment": "chat-prod",
    "measured_at": "2026-11-29T08:00:00Z",
    "setup": {
        "runtime": "vllm",
        "hardware": "nvidia-a10g",
        "gpu_count": 1,
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "quantization": "bf16",
        "engine_args": {"enable_prefix_caching": False},
    },
    "workload": {
        "num_requests": 200,
        "concurrency": 1,
        "prompt_tokens_mean": 3000,
        "output_tokens_mean": 256,
        "shared_prefix_tokens": 2500,
    },
    "metrics": {
        "ttft_ms": {"mean": 900, "p50": 880, "p90": 950, "p99": 1900},
        "itl_ms": {"mean": 30.5, "p50": 30, "p90": 31.5, "p99": 33},
        "decode_tok_s": 32.8,
        "requests_completed": 200,
    },
}


def run_cli(
    client: httpx.Client, *args: str, target: httpx.Client | None = None, clock: FakeClock | None = None
) -> Result:
    injected = Injected(advisor=client, target=target, sleep=lambda _s: None, clock=clock)
    return CliRunner().invoke(cli, list(args), obj=injected, catch_exceptions=False)


@pytest.fixture
def canonical_file(tmp_path: Path) -> Path:
    path = tmp_path / "run.json"
    path.write_text(json.dumps(CANONICAL))
    return path


def test_submit_stores_and_resubmission_is_the_same_run(client: Any, canonical_file: Path) -> None:
    first = run_cli(client, "submit", str(canonical_file), "-o", "json")
    assert first.exit_code == ExitCode.OK, first.output
    body = json.loads(first.stdout)
    assert body["run"]["deployment"] == "chat-prod"
    assert body["run"]["setup"]["model"] == "llama-3.1-8b"
    assert body["verdict"] == "warn"  # 87 % of the A10G's bandwidth ceiling with 16-bit weights: quantize
    again = run_cli(client, "submit", str(canonical_file), "-o", "json")
    assert json.loads(again.stdout)["run"]["id"] == body["run"]["id"]
    listed = run_cli(client, "runs", "list", "-o", "json")
    assert json.loads(listed.stdout)["total"] == 1


def test_text_summary_shows_the_findings(client: Any, canonical_file: Path) -> None:
    result = run_cli(client, "submit", str(canonical_file))
    assert result.exit_code == ExitCode.OK
    assert "verdict:" in result.stdout
    assert "recommendations" in result.stdout
    assert "PRE002" in result.stdout  # the uncached 2,500-token prefix
    assert "--enable-prefix-caching" in result.stdout  # the vLLM fix


def test_the_gate_follows_the_real_findings(client: Any, canonical_file: Path) -> None:
    answer = json.loads(run_cli(client, "advise", str(canonical_file), "-o", "json").stdout)
    worst = max(SEVERITIES.index(r["severity"]) for r in answer["recommendations"])
    assert worst >= SEVERITIES.index("moderate")
    at_worst = run_cli(client, "advise", str(canonical_file), "--fail-on", SEVERITIES[worst])
    assert at_worst.exit_code == ExitCode.GATE
    assert "gate failed" in at_worst.stderr
    if worst < len(SEVERITIES) - 1:
        above = run_cli(client, "advise", str(canonical_file), "--fail-on", SEVERITIES[worst + 1])
        assert above.exit_code == ExitCode.OK
    verdict_gate = run_cli(client, "advise", str(canonical_file), "--fail-on-verdict", "warn")
    assert verdict_gate.exit_code == (ExitCode.OK if answer["verdict"] == "pass" else ExitCode.GATE)


def test_advise_stores_nothing(client: Any, canonical_file: Path) -> None:
    assert run_cli(client, "advise", str(canonical_file)).exit_code == ExitCode.OK
    assert AdvisorClient(client).runs()["total"] == 0


def test_native_file_with_context_options(client: Any) -> None:
    data = FIXTURES / "vllm_bench" / "vllm_bench_serve.json"
    result = run_cli(
        client,
        "submit",
        str(data),
        "--hardware",
        "nvidia-h100-sxm",
        "-d",
        "chat-staging",
        "--label",
        "ci_job=42",
        "--runtime",
        "vllm",
        "-o",
        "json",
    )
    assert result.exit_code == ExitCode.OK, result.output
    run = json.loads(result.stdout)["run"]
    assert run["deployment"] == "chat-staging"
    assert run["setup"]["hardware"] == "nvidia-h100-sxm"
    assert run["labels"]["ci_job"] == "42"
    assert run["source"]["format"] == "vllm_bench"
    raw = run_cli(client, "runs", "raw", str(run["id"]))
    assert raw.stdout_bytes == data.read_bytes()


def test_rejected_input_exits_4_naming_the_field(client: Any, canonical_file: Path) -> None:
    result = run_cli(client, "submit", str(canonical_file), "--hardware", "nvidia-h100-sxn")
    assert result.exit_code == ExitCode.REJECTED
    assert "setup.hardware" in result.stderr
    assert "nvidia-h100-sxm" in result.stderr  # the near match


def test_usage_error_exits_2(client: Any, tmp_path: Path) -> None:
    assert run_cli(client, "submit", str(tmp_path / "missing.json")).exit_code == ExitCode.USAGE


def test_inline_hardware_and_a_metrics_pair_go_through_the_wrapper(client: Any, tmp_path: Path) -> None:
    run = copy.deepcopy(CANONICAL)
    del run["setup"]["hardware"]
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps(run))
    scrape = vllm_scrape_factory("meta-llama/Llama-3.1-8B-Instruct")
    before, after = tmp_path / "before.prom", tmp_path / "after.prom"
    before.write_text(scrape())
    after.write_text(scrape())
    result = run_cli(
        client,
        "submit",
        str(bench),
        "--hardware",
        '{"name": "lab-gpu", "mem_bandwidth_gb_s": 1000, "fp16_tflops": 200, "memory_gb": 48}',
        "--metrics",
        str(before),
        "--metrics",
        str(after),
        "-o",
        "json",
    )
    assert result.exit_code == ExitCode.OK, result.output
    stored = json.loads(result.stdout)["run"]
    assert stored["metrics"]["kv_cache_usage_mean"] == pytest.approx(0.42)
    assert stored["metrics"]["queue_waiting_max"] == pytest.approx(3.0)
    assert stored["metrics"]["prefix_cache_hit_rate"] == pytest.approx(0.1)
    assert stored["metrics"]["decode_tok_s"] == pytest.approx(32.8)  # the benchmark's own figure


def test_runs_show_and_compare(client: Any, tmp_path: Path) -> None:
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(json.dumps(CANONICAL))
    changed = copy.deepcopy(CANONICAL)
    changed["setup"]["engine_args"]["enable_prefix_caching"] = True
    changed["metrics"]["ttft_ms"] = {"mean": 200, "p50": 180, "p90": 220, "p99": 400}
    second.write_text(json.dumps(changed))
    ids = [json.loads(run_cli(client, "submit", str(p), "-o", "json").stdout)["run"]["id"] for p in (first, second)]

    shown = run_cli(client, "runs", "show", str(ids[0]))
    assert shown.exit_code == ExitCode.OK
    assert "PRE002" in shown.stdout

    compared = run_cli(client, "compare", str(ids[0]), str(ids[1]), "-o", "json")
    assert compared.exit_code == ExitCode.OK
    comp = json.loads(compared.stdout)
    assert [c["path"] for c in comp["setup_changes"]] == ["engine_args.enable_prefix_caching"]
    moved = {m["metric"]: m["verdict"] for m in comp["metrics"] if m["verdict"] != "noise"}
    assert moved["ttft_ms.p50"] == "better"
    assert "decode_tok_s" not in moved
    assert not any("one thing at a time" in n for n in comp["notes"])

    missing = run_cli(client, "runs", "show", "999999")
    assert missing.exit_code == ExitCode.REJECTED


def test_predict_follows_the_seed_table(client: Any) -> None:
    result = run_cli(
        client,
        "predict",
        "--model",
        "llama-3.1-8b",
        "--hardware",
        "nvidia-a10g",
        "--quantization",
        "bf16",
        "-o",
        "json",
    )
    assert result.exit_code == ExitCode.OK, result.output
    # 600 GB/s ÷ 16 GB ≈ 37.5 tok/s (DESIGN §1)
    assert 33 < json.loads(result.stdout)["decode_tok_s"]["ceiling"] < 40
    text = run_cli(client, "predict", "--model", "llama-3.1-8b", "--hardware", "nvidia-a10g", "--quantization", "bf16")
    assert "decode tok/s" in text.stdout and "bound" in text.stdout

    ranked = run_cli(client, "predict", "--model", "llama-3.1-8b", "--quantization", "bf16", "-o", "json")
    ranking = json.loads(ranked.stdout)
    bandwidths = [r["mem_bandwidth_gb_s"] for r in ranking]
    assert bandwidths[0] == max(bandwidths)


def test_catalog_list_show_add(client: Any, tmp_path: Path) -> None:
    listed = run_cli(client, "catalog", "list", "hardware", "-o", "json")
    assert listed.exit_code == ExitCode.OK
    assert any(e["id"] == "nvidia-a10g" for e in json.loads(listed.stdout))
    alias = run_cli(client, "catalog", "show", "hardware", "NVIDIA A10G", "-o", "json")
    assert json.loads(alias.stdout)["id"] == "nvidia-a10g"
    repo = run_cli(client, "catalog", "show", "models", "meta-llama/Llama-3.1-8B-Instruct", "-o", "json")
    assert json.loads(repo.stdout)["id"] == "llama-3.1-8b"

    spec = tmp_path / "box.json"
    spec.write_text(json.dumps({"id": "lab-box", "name": "Lab box", "mem_bandwidth_gb_s": 256, "memory_gb": 128}))
    added = run_cli(client, "catalog", "add", "hardware", str(spec))
    assert added.exit_code == ExitCode.OK, added.output
    shown = run_cli(client, "catalog", "show", "hardware", "lab-box", "-o", "json")
    assert json.loads(shown.stdout)["mem_bandwidth_gb_s"] == 256
    user = run_cli(client, "catalog", "list", "hardware", "--origin", "user", "-o", "json")
    assert [e["id"] for e in json.loads(user.stdout)] == ["lab-box"]
    unknown = run_cli(client, "catalog", "show", "hardware", "nvidia-h100")
    assert unknown.exit_code == ExitCode.REJECTED
    assert "nvidia-h100-sxm" in unknown.stderr


def test_measure_submits_a_run_the_server_accepts(client: Any) -> None:
    model = "meta-llama/Llama-3.1-8B-Instruct"
    # The probe runs on a fake clock the fake server advances: 5 ms + 0.05 ms a prompt token, then a
    # token every 2 ms.
    clock = FakeClock()
    llm = FakeLLM(
        clock,
        fixed_s=0.005,
        per_token_s=0.00005,
        itl_s=0.002,
        model=model,
        metrics=vllm_scrape_factory(model),
    )
    target = httpx.Client(transport=httpx.MockTransport(llm.handler), base_url="http://llm.test")
    result = run_cli(
        client,
        "measure",
        "http://llm.test",
        "-n",
        "3",
        "--max-tokens",
        "16",
        "-d",
        "chat-prod",
        "--hardware",
        "nvidia-a10g",
        "--quantization",
        "bf16",
        "-o",
        "json",
        target=target,
        clock=clock,
    )
    assert result.exit_code == ExitCode.OK, result.output
    doc = json.loads(result.stdout)
    stored = doc["result"]["run"]
    assert stored["deployment"] == "chat-prod"
    assert stored["setup"]["model"] == "llama-3.1-8b"
    assert stored["setup"]["runtime"] == "vllm"
    # 1,800 more prompt tokens cost 90 ms more: 20,000 tok/s; a token every 2 ms: 500 tok/s.
    assert stored["metrics"]["prefill_tok_s"] == pytest.approx(20_000, rel=1e-6)
    assert stored["metrics"]["decode_tok_s"] == pytest.approx(500.0)
    assert stored["metrics"]["kv_cache_usage_max"] == pytest.approx(0.42)
    assert stored["workload"]["prompt_tokens_mean"] == pytest.approx(2000, abs=5)
    assert AdvisorClient(client).run(stored["id"])["metrics"]["decode_tok_s"] > 0


def test_rules_list_and_show(client: Any) -> None:
    listed = run_cli(client, "rules", "list", "-o", "json")
    assert listed.exit_code == ExitCode.OK
    ids = {r["rule_id"] for r in json.loads(listed.stdout)}
    assert "PRE002" in ids
    shown = run_cli(client, "rules", "show", "prefill.repeated_prefix_not_cached")
    assert shown.exit_code == ExitCode.OK
    assert "PRE002" in shown.stdout and "Why is this bad?" in shown.stdout
    unknown = run_cli(client, "rules", "show", "PRE0002")
    assert unknown.exit_code == ExitCode.REJECTED
    assert "PRE002" in unknown.stderr


def test_model_fit_polls_the_job_and_list_shows_the_active_version(client: Any) -> None:
    empty = run_cli(client, "model", "list")
    assert empty.exit_code == ExitCode.OK
    assert "physics prior" in empty.output

    fitted = run_cli(client, "model", "fit", "--activate", "-o", "json")
    assert fitted.exit_code == ExitCode.OK, fitted.output
    job = json.loads(fitted.output)
    assert job["status"] == "succeeded"
    version = job["result"]["version"]

    listed = run_cli(client, "model", "list")
    assert listed.exit_code == ExitCode.OK
    line = next(row for row in listed.output.splitlines() if version in row)
    assert "*" in line  # the active version is marked
