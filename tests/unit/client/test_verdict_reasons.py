"""The verdict's reasons in every output style and in the gate, and the workload context options."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from advisor.client.exit_codes import ExitCode
from advisor.client.gate import evaluate_gate
from advisor.client.render import reason_text, render_results
from tests.unit.client.fakes import RESULT, FakeAdvisor, advisor_http, invoke

SLO_REASON: dict[str, Any] = {
    "kind": "slo",
    "name": "ttft_p99_ms",
    "limit": 200,
    "found": 261.7,
    "text": "SLO ttft_p99_ms: ttft_ms.p99 261.7 is above the objective 200",
}
FINDING_REASON: dict[str, Any] = {"kind": "finding", "name": "PRE002", "limit": "moderate", "found": "severe"}


def _failed() -> dict[str, Any]:
    result = copy.deepcopy(RESULT)
    result["verdict"] = "fail"
    result["verdict_reasons"] = [SLO_REASON, FINDING_REASON]
    return result


def test_reason_text_prefers_the_servers_sentence_and_builds_one_otherwise() -> None:
    assert reason_text(SLO_REASON) == SLO_REASON["text"]
    assert reason_text({k: v for k, v in SLO_REASON.items() if k != "text"}) == (
        "SLO ttft_p99_ms: found 262, limit 200"
    )
    assert reason_text(FINDING_REASON) == "PRE002 is severe (limit moderate)"
    assert reason_text("an old stored sentence") == "an old stored sentence"


def test_text_prints_the_reasons_under_the_verdict() -> None:
    lines = render_results([("bench.json", _failed())], "text").splitlines()
    at = lines.index("verdict: FAIL")
    assert lines[at + 1] == "  because SLO ttft_p99_ms: ttft_ms.p99 261.7 is above the objective 200"
    assert lines[at + 2] == "  because PRE002 is severe (limit moderate)"


def test_markdown_lists_the_reasons() -> None:
    md = render_results([("bench.json", _failed())], "md")
    assert "Verdict reasons:\n\n- SLO ttft_p99_ms: ttft_ms.p99 261.7 is above the objective 200\n" in md
    assert "- PRE002 is severe (limit moderate)" in md


def test_github_verdict_annotation_carries_the_reasons() -> None:
    last = render_results([("bench.json", _failed())], "github").splitlines()[-1]
    assert last.startswith("::error file=bench.json,title=advisor verdict%3A fail::")
    assert "%0Abecause SLO ttft_p99_ms: ttft_ms.p99 261.7 is above the objective 200" in last
    assert last.endswith("%0Abecause PRE002 is severe (limit moderate)")


def test_a_run_without_reasons_prints_none() -> None:
    text = render_results([("bench.json", RESULT)], "text")
    assert "because" not in text


def test_the_verdict_gate_says_why() -> None:
    gate = evaluate_gate([_failed()], fail_on_verdict="fail")
    assert gate.reasons == (
        "run 7: verdict fail (--fail-on-verdict fail): SLO ttft_p99_ms: ttft_ms.p99 261.7 is above the "
        "objective 200; PRE002 is severe (limit moderate)",
    )


def test_workload_options_travel_as_query_parameters(tmp_path: Path) -> None:
    bench = tmp_path / "bench.json"
    bench.write_text(json.dumps({"metrics": {"decode_tok_s": 20.8}}))
    fake = FakeAdvisor()
    args = ["submit", str(bench), "--concurrency", "12", "--prompt-tokens", "512", "--output-tokens", "128.5"]
    result = invoke([*args, "--request-rate", "2.5"], advisor=advisor_http(fake.handler))
    assert result.exit_code == ExitCode.OK, result.output
    params = dict(fake.requests[0].url.params)
    assert {k: params[k] for k in ("concurrency", "prompt_tokens", "output_tokens", "request_rate")} == {
        "concurrency": "12",
        "prompt_tokens": "512",
        "output_tokens": "128.5",
        "request_rate": "2.5",
    }


def test_workload_options_go_into_the_wrapper_context(tmp_path: Path) -> None:
    bench = tmp_path / "bench.json"
    bench.write_text("{}")
    scrape = tmp_path / "metrics.prom"
    scrape.write_text("vllm:num_requests_waiting 0\n")
    fake = FakeAdvisor()
    result = invoke(
        ["advise", str(bench), "--metrics", str(scrape), "--concurrency", "8"], advisor=advisor_http(fake.handler)
    )
    assert result.exit_code == ExitCode.OK, result.output
    assert json.loads(fake.requests[0].content)["context"] == {"concurrency": 8}


def test_a_non_positive_concurrency_is_a_usage_error(tmp_path: Path) -> None:
    bench = tmp_path / "bench.json"
    bench.write_text("{}")
    fake = FakeAdvisor()
    result = invoke(["submit", str(bench), "--concurrency", "0"], advisor=advisor_http(fake.handler))
    assert result.exit_code == ExitCode.USAGE
    assert fake.requests == []
