"""Gate, compare and the output styles (text, md, github, json)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from advisor.client.compare import compare_runs
from advisor.client.gate import evaluate_gate, results_of
from advisor.client.render import annotation, fmt, render_results, table
from tests.unit.client.fakes import RESULT, FakeAdvisor, advisor_http, invoke


def _result(verdict: str, *severities: str) -> dict[str, Any]:
    return {
        "run": {"id": 1},
        "verdict": verdict,
        "recommendations": [{"rule_id": f"R{i}", "severity": s} for i, s in enumerate(severities)],
    }


@pytest.mark.parametrize(
    ("result", "fail_on", "fail_on_verdict", "failed"),
    [
        (_result("pass"), "low", "warn", False),
        (_result("pass", "none"), "low", None, False),  # "none" is never a finding that gates
        (_result("pass", "low"), "low", None, True),
        (_result("pass", "low"), "moderate", None, False),
        (_result("warn", "moderate", "low"), "moderate", None, True),
        (_result("warn", "severe"), "critical", None, False),
        (_result("fail", "critical"), "critical", None, True),
        (_result("warn"), None, "warn", True),
        (_result("warn"), None, "fail", False),
        (_result("fail"), None, "fail", True),
        (_result("fail"), None, "warn", True),
        (_result("fail", "critical"), None, None, False),  # no gate asked for
    ],
)
def test_gate_table(result: dict[str, Any], fail_on: str | None, fail_on_verdict: str | None, failed: bool) -> None:
    gate = evaluate_gate([result], fail_on=fail_on, fail_on_verdict=fail_on_verdict)
    assert gate.failed is failed
    assert bool(gate.reasons) is failed


def test_gate_reasons_name_the_rules_and_runs() -> None:
    gate = evaluate_gate(
        [_result("warn", "severe", "low"), {**_result("pass", "critical"), "run": {"id": 9}}], fail_on="severe"
    )
    assert gate.reasons == (
        "run 1: 1 recommendation(s) at or above severe: R0 (severe)",
        "run 9: 1 recommendation(s) at or above severe: R0 (critical)",
    )


def test_results_of_a_sweep() -> None:
    assert len(results_of({"runs": [_result("pass"), _result("warn")]})) == 2
    assert results_of(_result("pass"))[0]["verdict"] == "pass"


# ------------------------------------------------------------------------------------------------
# compare


def _run(run_id: int, **changes: Any) -> dict[str, Any]:
    run: dict[str, Any] = {
        "id": run_id,
        "setup": {"runtime": "vllm", "hardware": "nvidia-a10g", "engine_args": {"enable_prefix_caching": False}},
        "workload": {"prompt_tokens_mean": 2000.0, "concurrency": 1.0},
        "metrics": {
            "ttft_ms": {"p50": 800.0, "p99": 1000.0},
            "itl_ms": {"p50": 30.0},
            "decode_tok_s": 33.0,
            "requests_completed": 200,
        },
    }
    for path, value in changes.items():
        node = run
        *parents, last = path.split("__")
        for part in parents:
            node = node[part]
        node[last] = value
    return run


@pytest.mark.parametrize(
    ("changes", "moved"),
    [
        ({}, {}),
        ({"metrics__ttft_ms": {"p50": 830.0, "p99": 1000.0}}, {}),  # +3.75% < 5%: noise
        ({"metrics__ttft_ms": {"p50": 200.0, "p99": 1000.0}}, {"ttft_ms.p50": "better"}),
        ({"metrics__ttft_ms": {"p50": 800.0, "p99": 1120.0}}, {}),  # +12% on a p99: within 3 × 5%
        ({"metrics__ttft_ms": {"p50": 800.0, "p99": 1300.0}}, {"ttft_ms.p99": "worse"}),
        ({"metrics__decode_tok_s": 25.0}, {"decode_tok_s": "worse"}),  # higher is better for rates
        ({"metrics__decode_tok_s": 40.0}, {"decode_tok_s": "better"}),
        ({"metrics__itl_ms": {"p50": 30.4}}, {}),  # below the 0.5 ms floor
        ({"metrics__requests_completed": 400}, {}),  # bookkeeping, not performance
    ],
)
def test_compare_moves_beyond_noise(changes: dict[str, Any], moved: dict[str, str]) -> None:
    comp = compare_runs(_run(1), _run(2, **changes))
    assert {m.metric: m.verdict for m in comp.moved} == moved


def test_compare_says_change_one_thing_at_a_time() -> None:
    one = compare_runs(_run(1), _run(2, setup__engine_args={"enable_prefix_caching": True}))
    assert [c.path for c in one.setup_changes] == ["engine_args.enable_prefix_caching"]
    assert not any("one thing at a time" in n for n in one.notes)

    two = compare_runs(_run(1), _run(2, setup__hardware="nvidia-l40s", setup__runtime="sglang"))
    assert {c.path for c in two.setup_changes} == {"hardware", "runtime"}
    assert any("change one thing at a time" in n for n in two.notes)

    traffic = compare_runs(_run(1), _run(2, workload__prompt_tokens_mean=500.0))
    assert any("the workload changed too" in n for n in traffic.notes)


def test_compare_command_gates_on_regression() -> None:
    runs = {1: _run(1), 2: _run(2, metrics__decode_tok_s=20.0)}

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=runs[int(request.url.path.rsplit("/", 1)[1])])

    ok = invoke(["compare", "1", "2"], advisor=advisor_http(handler))
    assert ok.exit_code == 0
    assert "decode_tok_s" in ok.stdout and "worse" in ok.stdout
    gated = invoke(["compare", "1", "2", "--fail-on-regression", "-o", "json"], advisor=advisor_http(handler))
    assert gated.exit_code == 1
    assert json.loads(gated.stdout)["metrics"][0]["verdict"] == "worse"


# ------------------------------------------------------------------------------------------------
# output styles


@pytest.mark.parametrize(
    ("value", "text"),
    [(None, "–"), (0, "0"), (0.01234, "0.0123"), (20.83, "20.8"), (40.0, "40"), (1577.98, "1,578"), (True, "yes")],
)
def test_fmt(value: Any, text: str) -> None:
    assert fmt(value) == text


def test_text_output_has_verdict_expectations_and_fixes() -> None:
    text = render_results([("bench.json", RESULT)], "text", base_url="http://advisor.test")
    assert "verdict: WARN" in text
    assert "http://advisor.test/api/v1/runs/7" in text
    assert "decode tok/s" in text and "13.3–21.1" in text  # expected band next to the measured 20.8
    assert "1. [severe] PRE002" in text
    assert "fix (vllm): --enable-prefix-caching" in text
    assert "ttft_ms.p50 880 → 152 (-82.7%)" in text
    assert text.index("PRE002") < text.index("DEC001")  # the server's ranking is kept


def test_markdown_escapes_pipes_and_collects_evidence() -> None:
    result = copy.deepcopy(RESULT)
    result["recommendations"][0]["title"] = "a | b"
    md = render_results([("bench.json", result)], "md")
    assert md.startswith("### ⚠️ advisor: **warn**")
    assert "a \\| b" in md
    assert "| 1 | 🔴 severe | `PRE002` |" in md
    assert "<details><summary>Evidence</summary>" in md


def test_github_annotations_by_severity() -> None:
    lines = render_results([("results/bench.json", RESULT)], "github").splitlines()
    assert lines[0].startswith("::error file=results/bench.json,title=advisor PRE002 (severe)::")
    assert "%0Afix (vllm): --enable-prefix-caching" in lines[0]
    assert lines[1].startswith("::notice ")  # DEC001 is low
    assert lines[-1].startswith("::warning ") and "advisor verdict%3A warn" in lines[-1]


def test_annotation_escaping() -> None:
    assert annotation("warning", "50% done\nnext", title="a:b,c") == "::warning title=a%3Ab%2Cc::50%25 done%0Anext"


def test_github_output_writes_the_step_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    bench = tmp_path / "bench.json"
    bench.write_text("{}")
    result = invoke(["submit", str(bench), "-o", "github"], advisor=advisor_http(FakeAdvisor().handler))
    assert result.exit_code == 0
    assert "::error" in result.stdout
    assert "| 1 | 🔴 severe | `PRE002` |" in summary.read_text()


def test_table_alignment() -> None:
    out = table(["name", "value"], [["a", 1.5], ["long-name", 1234.0]]).splitlines()
    assert out[0] == "name       value"
    assert out[2] == "a            1.5"
    assert out[3] == "long-name  1,234"


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (None, None),
        ("nvidia-a10g", "nvidia-a10g"),
        ({"name": "ci-cpu", "mem_bandwidth_gb_s": 20}, "ci-cpu"),
        ({"params_b": 6.74, "num_hidden_layers": 32}, "6.74B-parameter model"),
        ({"bits_per_weight": 4.5}, "4.5 bits/weight"),
        ({"num_hidden_layers": 4}, "inline spec"),
    ],
)
def test_inline_specs_are_named_for_people(value: Any, shown: str | None) -> None:
    from advisor.client.render import name_of

    assert name_of(value) == shown
