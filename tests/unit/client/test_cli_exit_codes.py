"""The exit-code contract: 0 success/pass, 1 gate failed, 2 usage, 3 unreachable/5xx, 4 rejected."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from advisor.cli import cli
from advisor.client.exit_codes import ExitCode
from tests.unit.client.fakes import FakeAdvisor, advisor_http, invoke


@pytest.fixture
def result_file(tmp_path: Path) -> Path:
    path = tmp_path / "result.json"
    path.write_text(json.dumps({"metrics": {"decode_tok_s": 20.8}}))
    return path


def test_the_contract_is_in_the_help() -> None:
    from click.testing import CliRunner

    out = CliRunner().invoke(cli, ["--help"]).output
    for line in ("0  success", "1  the gate failed", "2  usage error", "3  server unreachable", "4  input rejected"):
        assert line in out


@pytest.mark.parametrize(
    ("gate", "code"),
    [
        ([], ExitCode.OK),
        (["--fail-on", "critical"], ExitCode.OK),  # the worst finding is severe
        (["--fail-on", "severe"], ExitCode.GATE),
        (["--fail-on", "low"], ExitCode.GATE),
        (["--fail-on-verdict", "fail"], ExitCode.OK),  # the verdict is warn
        (["--fail-on-verdict", "warn"], ExitCode.GATE),
        (["--fail-on", "critical", "--fail-on-verdict", "warn"], ExitCode.GATE),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else str(v),
)
def test_gate(result_file: Path, gate: list[str], code: int) -> None:
    fake = FakeAdvisor()
    result = invoke(["submit", str(result_file), *gate], advisor=advisor_http(fake.handler))
    assert result.exit_code == code, result.output
    assert "PRE002" in result.stdout  # the summary prints whatever the gate says
    if code == ExitCode.GATE:
        assert "gate failed" in result.stderr


def test_a_verdict_of_fail_fails_both_verdict_gates(result_file: Path) -> None:
    fake = FakeAdvisor()
    fake.result["verdict"] = "fail"
    for level in ("warn", "fail"):
        result = invoke(["submit", str(result_file), "--fail-on-verdict", level], advisor=advisor_http(fake.handler))
        assert result.exit_code == ExitCode.GATE


@pytest.mark.parametrize(
    "args",
    [
        ["submit"],  # no file
        ["submit", "does-not-exist.json"],
        ["submit", "no-match-*.json"],
        ["submit", "{file}", "--fail-on", "catastrophic"],
        ["submit", "{file}", "--engine-arg", "no-equals-sign"],
        ["submit", "{file}", "--hardware", "{not json"],
        ["submit", "{file}", "--gpu-count", "0"],
        ["submit", "{file}", "--metrics", "{file}", "--metrics", "{file}", "--metrics", "{file}"],
        ["compare", "1"],
        ["compare", "1", "two"],
        ["predict"],
        ["measure", "http://llm.test", "--concurrency", "1,zero"],
        ["measure", "http://llm.test", "--short-tokens", "500", "--long-tokens", "400"],
        ["no-such-command"],
    ],
    ids=" ".join,
)
def test_usage_errors_exit_2_and_send_nothing(result_file: Path, args: list[str]) -> None:
    fake = FakeAdvisor()
    args = [a.replace("{file}", str(result_file)) for a in args]
    result = invoke(args, advisor=advisor_http(fake.handler))
    assert result.exit_code == ExitCode.USAGE, result.output
    assert fake.requests == []


def test_unreachable_exits_3_after_retrying(result_file: Path) -> None:
    attempts: list[int] = []

    def refuse(request: httpx.Request) -> httpx.Response:
        attempts.append(1)
        raise httpx.ConnectError("connection refused", request=request)

    result = invoke(["submit", str(result_file), "--retries", "2"], advisor=advisor_http(refuse))
    assert result.exit_code == ExitCode.UNREACHABLE
    assert len(attempts) == 3
    assert "cannot reach the advisor" in result.stderr


@pytest.mark.parametrize("status", [500, 502, 503])
def test_server_errors_exit_3(result_file: Path, status: int) -> None:
    fake = FakeAdvisor(status=status, problem={"status": status, "title": "Internal Server Error", "detail": "boom"})
    result = invoke(["submit", str(result_file), "--retries", "1"], advisor=advisor_http(fake.handler))
    assert result.exit_code == ExitCode.UNREACHABLE
    assert f"{status}" in result.stderr


@pytest.mark.parametrize(
    ("status", "problem", "shown"),
    [
        (
            422,
            {
                "title": "Unknown name",
                "detail": "setup.hardware: unknown hardware 'nvidia-h1000'",
                "field": "setup.hardware",
                "matches": ["nvidia-h100-sxm"],
            },
            "nvidia-h100-sxm",
        ),
        (400, {"title": "Malformed input", "detail": "body: the body is empty", "field": "body"}, "the body is empty"),
        (404, {"title": "Not found", "detail": "no run 99"}, "no run 99"),
    ],
    ids=["422", "400", "404"],
)
def test_rejected_input_exits_4_with_the_problem(
    result_file: Path, status: int, problem: dict[str, object], shown: str
) -> None:
    fake = FakeAdvisor(status=status, problem={"status": status, **problem})
    result = invoke(["submit", str(result_file)], advisor=advisor_http(fake.handler))
    assert result.exit_code == ExitCode.REJECTED
    assert shown in result.stderr
    assert len(fake.requests) == 1  # a 4xx is never retried


def test_every_file_is_sent_and_globs_expand(tmp_path: Path) -> None:
    for name in ("a.json", "b.json", "c.txt"):
        (tmp_path / name).write_text("{}")
    fake = FakeAdvisor()
    result = invoke(["submit", str(tmp_path / "*.json"), "-o", "json"], advisor=advisor_http(fake.handler))
    assert result.exit_code == ExitCode.OK
    assert [r.headers["x-advisor-file-name"] for r in fake.requests] == ["a.json", "b.json"]
    assert isinstance(json.loads(result.stdout), list)


def test_inline_specs_and_metrics_use_the_json_wrapper(tmp_path: Path, result_file: Path) -> None:
    before, after = tmp_path / "before.prom", tmp_path / "after.prom"
    before.write_text("vllm:num_requests_waiting 0\n")
    after.write_bytes("vllm:num_requests_waiting 1\n".encode("utf-16"))  # a PowerShell redirect
    fake = FakeAdvisor()
    result = invoke(
        [
            "advise",
            str(result_file),
            "--hardware",
            '{"name": "my-box", "mem_bandwidth_gb_s": 256}',
            "--metrics",
            str(before),
            "--metrics",
            str(after),
            "--engine-arg",
            "max-num-seqs=64",
        ],
        advisor=advisor_http(fake.handler),
    )
    assert result.exit_code == ExitCode.OK, result.output
    request = fake.requests[0]
    assert request.url.path == "/api/v1/advise"
    wrapper = json.loads(request.content)
    assert wrapper["context"]["hardware"] == {"name": "my-box", "mem_bandwidth_gb_s": 256}
    assert wrapper["context"]["engine_args"] == {"max_num_seqs": 64}
    roles = [f.get("role") for f in wrapper["files"]]
    assert roles == [None, "metrics_before", "metrics_after"]
    assert wrapper["files"][2]["encoding"] == "base64"
