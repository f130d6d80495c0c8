"""The engine: ranking, damping, supersession, verdict and the output shape (DESIGN §4, §5)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

from advisor.canonical import SLO, decode_run
from advisor.rules import Evidence, Finding, Gain, Phase, Rule, RunContext, Severity, Status, advise, build_context
from advisor.rules.config import RuleConfig
from advisor.rules.engine import score
from advisor.rules.registry import get_rules, thresholds_table

RUN: dict[str, Any] = {
    "setup": {
        "runtime": "vllm",
        "hardware": "nvidia-a10g",
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "quantization": "bf16",
    },
    "workload": {"num_requests": 500, "concurrency": 1, "prompt_tokens_mean": 500, "output_tokens_mean": 200},
    "metrics": {"decode_tok_s": 33.0, "ttft_ms": {"p50": 250, "p99": 300}},
}


@pytest.fixture(scope="module")
def ctx() -> RunContext:
    return build_context(decode_run(RUN))


def fake(
    rule_id: str,
    severity: Severity,
    *,
    gain: Gain | None = None,
    confidence: float = 0.8,
    action: str = "shorten-prompt",
    returned_action: str | None = None,
    supersedes: tuple[str, ...] = (),
    status: Status = Status.STABLE,
    fails_at: Severity | None = None,
    damp_by_gain: bool = True,
    fix: dict[str, str] | None = None,
    boom: bool = False,
) -> Rule:
    """A rule that returns a fixed finding (or raises)."""

    class Fake(Rule):
        """Fake."""

        id = rule_id
        name = f"test.{rule_id.lower()}"
        phase = Phase.PREFILL

        def evaluate(self, ctx: RunContext) -> Finding | None:
            if boom:
                raise RuntimeError("kaput")
            return Finding(
                severity=severity,
                title=f"{rule_id} finding",
                evidence=(Evidence("x", 1.0, "< 1", "run"),),
                fix=fix if fix is not None else {"vllm": "--flag", "other": "generic"},
                expected_gain=gain,
                confidence=confidence,
                action=returned_action,
            )

    Fake.action = action
    Fake.supersedes = supersedes  # type: ignore[misc]
    Fake.rule_status = status
    Fake.fails_verdict_at = fails_at
    Fake.damp_by_gain = damp_by_gain
    return Fake(RuleConfig(rule_id), thresholds_table().common)


BIG = Gain("ttft_ms.p50", 1000.0, 250.0)  # ÷4: full size


def test_ranking_is_severity_then_score_then_id(ctx: RunContext) -> None:
    rules = [
        fake("PRE009", Severity.MODERATE, gain=BIG, confidence=0.9),
        fake("PRE002", Severity.SEVERE, gain=BIG, confidence=0.3),
        fake("PRE001", Severity.SEVERE, gain=BIG, confidence=0.9),
        fake("PRE003", Severity.SEVERE, gain=BIG, confidence=0.9),
        fake("PRE004", Severity.LOW, gain=BIG),
    ]
    advice = advise(ctx, rules=rules)
    assert [r.rule_id for r in advice.recommendations] == ["PRE001", "PRE003", "PRE002", "PRE009", "PRE004"]
    assert advise(ctx, rules=list(reversed(rules))).recommendations == advice.recommendations


@pytest.mark.parametrize(
    ("severity", "gain", "confidence", "expected"),
    [
        (Severity.CRITICAL, Gain("m", 100.0, 400.0), 1.0, 1.0),
        (Severity.SEVERE, Gain("m", 100.0, 400.0), 1.0, 0.75),
        (Severity.CRITICAL, Gain("m", 100.0, 200.0), 1.0, 0.5),  # ×2 is half the size of ×4
        (Severity.CRITICAL, Gain("m", 200.0, 100.0), 1.0, 0.5),  # ÷2 is the same size as ×2
        (Severity.CRITICAL, Gain("m", 100.0, 1600.0), 0.5, 0.5),  # capped at ×4
        (Severity.MODERATE, None, 1.0, 0.25),  # unknown gain counts as half size
        (Severity.NONE, Gain("m", 100.0, 400.0), 1.0, 0.0),
    ],
)
def test_score(severity: Severity, gain: Gain | None, confidence: float, expected: float) -> None:
    assert math.isclose(score(severity, gain, confidence), expected, abs_tol=1e-3)


@pytest.mark.parametrize(
    ("to", "expected"),
    [
        (975.0, Severity.NONE),
        (970.0, Severity.LOW),
        (925.0, Severity.LOW),
        (900.0, Severity.MODERATE),
        (800.0, Severity.SEVERE),
        (500.0, Severity.CRITICAL),
    ],
)
def test_a_small_gain_is_never_critical(ctx: RunContext, to: float, expected: Severity) -> None:
    advice = advise(
        ctx, rules=[fake("PRE001", Severity.CRITICAL, gain=Gain("ttft_ms.p50", 1000.0, to))], min_severity=Severity.NONE
    )
    assert advice.recommendations[0].severity is expected


def test_rules_may_opt_out_of_gain_damping(ctx: RunContext) -> None:
    rule = fake("REG009", Severity.SEVERE, gain=Gain("m", 100.0, 102.0), damp_by_gain=False)
    assert advise(ctx, rules=[rule]).recommendations[0].severity is Severity.SEVERE


def test_findings_below_low_are_suppressed(ctx: RunContext) -> None:
    advice = advise(ctx, rules=[fake("PRE001", Severity.NONE), fake("PRE002", Severity.LOW)])
    assert [r.rule_id for r in advice.recommendations] == ["PRE002"]
    assert [(s.rule_id, s.reason) for s in advice.findings_suppressed] == [("PRE001", "below-threshold")]


def test_supersession_drops_the_weaker_explanation(ctx: RunContext) -> None:
    rules = [fake("CAP001", Severity.MODERATE, supersedes=("PRE005",)), fake("PRE005", Severity.SEVERE)]
    advice = advise(ctx, rules=rules)
    assert [r.rule_id for r in advice.recommendations] == ["CAP001"]
    assert [(s.rule_id, s.reason) for s in advice.findings_suppressed] == [("PRE005", "superseded-by:CAP001")]


def test_a_silent_rule_supersedes_nothing(ctx: RunContext) -> None:
    rules = [fake("CAP001", Severity.NONE, supersedes=("PRE005",)), fake("PRE005", Severity.SEVERE)]
    assert [r.rule_id for r in advise(ctx, rules=rules).recommendations] == ["PRE005"]


@pytest.mark.parametrize(
    ("rules", "slo", "verdict"),
    [
        ([], None, "pass"),
        ([("PRE001", Severity.LOW, {})], None, "pass"),
        ([("PRE001", Severity.MODERATE, {})], None, "warn"),
        # A severe or critical finding never leaves the verdict at pass, preview or not.
        ([("PRE001", Severity.CRITICAL, {"status": Status.PREVIEW})], None, "warn"),
        ([("PRE001", Severity.MODERATE, {"status": Status.PREVIEW})], None, "pass"),
        (
            [("REG003", Severity.MODERATE, {"fails_at": Severity.MODERATE, "action": "investigate-regression"})],
            None,
            "fail",
        ),
        ([("REG003", Severity.LOW, {"fails_at": Severity.MODERATE, "action": "investigate-regression"})], None, "pass"),
        ([("REG003", Severity.SEVERE, {"fails_at": Severity.MODERATE, "status": Status.PREVIEW})], None, "warn"),
        ([], {"ttft_p99_ms": 250}, "fail"),  # measured p99 is 300
        ([], {"ttft_p99_ms": 400, "decode_tok_s_min": 30}, "pass"),
        ([], {"decode_tok_s_min": 40}, "fail"),
        ([], {"itl_p99_ms": 50}, "pass"),  # not measured: cannot breach
    ],
)
def test_verdict(
    ctx: RunContext, rules: list[tuple[str, Severity, dict[str, Any]]], slo: dict[str, float] | None, verdict: str
) -> None:
    local = dataclasses.replace(ctx, slo=SLO(**slo) if slo else None)
    built = [fake(rid, sev, **kw) for rid, sev, kw in rules]
    advice = advise(local, rules=built)
    assert advice.verdict == verdict
    if verdict != "pass":
        assert advice.verdict_reasons


def test_verdict_reasons_are_structured(ctx: RunContext) -> None:
    local = dataclasses.replace(ctx, slo=SLO(ttft_p99_ms=200))
    rules = [fake("PRE001", Severity.SEVERE), fake("PRE002", Severity.LOW)]
    advice = advise(local, rules=rules)
    assert advice.verdict == "fail"
    reasons = [r.to_dict() for r in advice.verdict_reasons]
    # A fail lists what fails it: the breached objective, not the severe finding that would warn.
    assert [(r["kind"], r["name"], r["limit"], r["found"]) for r in reasons] == [("slo", "ttft_p99_ms", 200.0, 300.0)]
    assert reasons[0]["text"] == "SLO ttft_p99_ms: ttft_ms.p99 300 is above the objective 200"
    assert advice.to_dict()["verdict_reasons"] == reasons

    warned = advise(ctx, rules=rules)
    assert warned.verdict == "warn"
    assert [r.to_dict() for r in warned.verdict_reasons] == [
        {
            "kind": "finding",
            "name": "PRE001",
            "limit": "moderate",
            "found": "severe",
            "text": "PRE001 test.pre001 is severe (limit moderate): PRE001 finding",
        }
    ]


def test_a_failing_finding_is_one_reason_not_two(ctx: RunContext) -> None:
    rule = fake("REG003", Severity.SEVERE, fails_at=Severity.MODERATE, action="investigate-regression")
    advice = advise(ctx, rules=[rule])
    assert advice.verdict == "fail"
    assert [(r.kind, r.name, r.limit, r.found) for r in advice.verdict_reasons] == [
        ("finding", "REG003", "moderate", "severe")
    ]


def test_missing_context_is_at_most_moderate_and_never_fails(ctx: RunContext) -> None:
    rule = fake("MEAS004", Severity.CRITICAL, fails_at=Severity.SEVERE, action="improve-measurement")
    rule.asks_for_context = True  # type: ignore[misc]
    advice = advise(ctx, rules=[rule])
    assert [r.severity for r in advice.recommendations] == [Severity.MODERATE]
    assert advice.verdict == "warn"


def test_the_missing_fields_rule_asks_for_context_and_never_fails() -> None:
    run = decode_run({**RUN, "setup": {"runtime": None, "hardware": None, "model": None, "quantization": None}})
    advice = advise(build_context(run))
    rec = next(r for r in advice.recommendations if r.rule_id == "MEAS004")
    assert rec.severity is Severity.MODERATE
    assert advice.verdict == "warn"


def test_slo_checks_report_measured_and_unmeasured(ctx: RunContext) -> None:
    local = dataclasses.replace(ctx, slo=SLO(ttft_p99_ms=250, itl_p99_ms=50, decode_tok_s_min=30))
    checks = {c.objective: c for c in advise(local, rules=[]).slo}
    assert checks["ttft_p99_ms"].met is False and checks["ttft_p99_ms"].found == 300
    assert checks["decode_tok_s_min"].met is True
    assert checks["itl_p99_ms"].met is None and checks["itl_p99_ms"].found is None


def test_all_requests_failed_fails_the_verdict() -> None:
    run = decode_run({**RUN, "metrics": {"requests_completed": 0, "requests_failed": 200}})
    advice = advise(build_context(run))
    assert advice.verdict == "fail"
    assert advice.recommendations[0].rule_id == "MEAS005"
    assert advice.recommendations[0].severity is Severity.CRITICAL


def test_a_failing_rule_is_reported_not_fatal(ctx: RunContext) -> None:
    advice = advise(ctx, rules=[fake("PRE001", Severity.SEVERE, boom=True), fake("PRE002", Severity.SEVERE)])
    assert [r.rule_id for r in advice.recommendations] == ["PRE002"]
    assert advice.findings_suppressed[0].reason == "error: RuntimeError: kaput"
    with pytest.raises(RuntimeError, match="kaput"):
        advise(ctx, rules=[fake("PRE001", Severity.SEVERE, boom=True)], strict=True)


def test_an_undeclared_action_is_a_malformed_finding(ctx: RunContext) -> None:
    rule = fake("PRE001", Severity.SEVERE, returned_action="add-capacity")
    assert advise(ctx, rules=[rule]).recommendations == ()
    with pytest.raises(ValueError, match="not one it declares"):
        advise(ctx, rules=[rule], strict=True)


def test_the_runs_runtime_fix_comes_first(ctx: RunContext) -> None:
    fix = {"other": "generic", "ollama": "OLLAMA_X=1", "vllm": "--flag", "sglang": "--sg"}
    rec = advise(ctx, rules=[fake("PRE001", Severity.SEVERE, fix=fix)]).recommendations[0]
    assert list(rec.fix) == ["vllm", "sglang", "ollama", "other"]
    assert rec.fix_for_runtime == "--flag"
    only_generic = advise(ctx, rules=[fake("PRE001", Severity.SEVERE, fix={"other": "generic"})]).recommendations[0]
    assert only_generic.fix_for_runtime == "generic"


def test_recommendation_shape_is_the_public_contract(ctx: RunContext) -> None:
    out = advise(ctx, rules=[fake("PRE001", Severity.SEVERE, gain=BIG)]).to_dict()
    assert {"verdict", "recommendations", "expectations"} <= set(out)
    rec = out["recommendations"][0]
    design = {
        "rule_id",
        "name",
        "action",
        "phase",
        "severity",
        "score",
        "title",
        "evidence",
        "fix",
        "expected_gain",
        "confidence",
        "docs",
    }
    assert design <= set(rec)
    assert rec["severity"] == "severe"
    assert rec["evidence"] == [{"metric": "x", "found": 1.0, "expected": "< 1", "source": "run"}]
    assert rec["expected_gain"] == {"metric": "ttft_ms.p50", "from": 1000.0, "to": 250.0, "relative": -0.75}
    assert rec["docs"].endswith("/PRE001")
    assert out["expectations"]["model_version"]


def test_every_registered_rule_runs_on_a_sparse_run() -> None:
    """No rule may crash on a run that has almost nothing in it."""
    sparse = build_context(decode_run({"metrics": {"decode_tok_s": 10}}))
    advice = advise(sparse, rules=get_rules(), strict=True)
    assert [r.rule_id for r in advice.recommendations] == ["MEAS004"]
    assert advice.missing


def test_every_registered_rule_runs_on_a_dense_run() -> None:
    dense = {
        "deployment": "d",
        "setup": {
            "runtime": "vllm",
            "runtime_version": "0.11.0",
            "hardware": "nvidia-h100-sxm",
            "gpu_count": 8,
            "tensor_parallel": 1,
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "quantization": "bf16",
            "kv_cache_dtype": "auto",
            "max_model_len": 8192,
            "engine_args": {
                "max_num_batched_tokens": 2048,
                "enable_prefix_caching": True,
                "max_num_seqs": 256,
                "gpu_memory_utilization": 0.9,
            },
        },
        "labels": {"planned_hardware": "nvidia-h200-sxm"},
        "workload": {
            "num_requests": 2000,
            "concurrency": 32,
            "request_rate": 8,
            "prompt_tokens_mean": 2000,
            "output_tokens_mean": 256,
            "shared_prefix_tokens": 500,
            "kv_depth_tokens": 0,
        },
        "metrics": {
            "ttft_ms": {"mean": 80, "p50": 70, "p90": 110, "p99": 160, "max": 240},
            "itl_ms": {"p50": 12, "p99": 30},
            "tpot_ms": {"p50": 13, "p99": 20},
            "e2e_ms": {"p50": 3500, "p99": 5200},
            "decode_tok_s": 75,
            "prefill_tok_s": 25000,
            "output_throughput_tok_s": 2300,
            "request_throughput_rps": 8,
            "queue_waiting_mean": 0,
            "queue_waiting_max": 0,
            "running_mean": 30,
            "kv_cache_usage_mean": 0.3,
            "kv_cache_usage_max": 0.45,
            "prefix_cache_hit_rate": 0.22,
            "preemptions": 0,
            "requests_completed": 2000,
            "requests_failed": 0,
            "duration_s": 250,
        },
    }
    advice = advise(build_context(decode_run(dense)), rules=get_rules(), strict=True)
    assert advice.verdict == "pass", [r.title for r in advice.recommendations]
    assert all(r.severity <= Severity.LOW for r in advice.recommendations)
