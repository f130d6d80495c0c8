"""Load ``rules/cases/<ID>.yaml`` and run one case (sqlfluff's YAML rule cases, for our rules).

File shape::

    rule: PRE002
    base:                      # optional, deep-merged under every case's run
      setup: {runtime: vllm, hardware: nvidia-a10g, ...}
    cases:
      fires_on_3k_system_prompt:
        run: {...}             # a (partial) canonical run, validated by decode_run
        slo: {...}             # optional SLO
        baseline: [{...}]      # optional: each entry deep-merged over this case's full run
        thresholds: {PRE002: {prefix_share: [...]}}   # optional overrides (any section)
        expectations: {decode_tok_s: [expected, low, high], ...}   # optional fixed bands
        expect:
          severity: severe     # none = the rule stays silent
          action: enable-prefix-caching
          fix_contains: "--enable-prefix-caching"   # in the fix for the run's runtime
          title_contains: "..."
          gain: {metric: ttft_ms.p50, to: [100, 200], relative: [-0.9, -0.5]}
          evidence: [metric, ...]                    # evidence rows that must be present
          confidence: [min, max]

Expectations default to none (the what-ifs then use the physics ceilings), so a case does not
move when the prior is recalibrated; give bands explicitly where a rule reads them.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from advisor.canonical import SLO, decode_run
from advisor.ml.expectations import Band, Expectations
from advisor.rules import RunContext, Severity, advise, build_context, get_rule, rules_data_dir, thresholds_table
from advisor.rules.engine import Recommendation

CASE_KEYS = {"run", "slo", "baseline", "thresholds", "expectations", "expect", "description"}
EXPECT_KEYS = {"severity", "action", "fix_contains", "title_contains", "gain", "evidence", "confidence"}


class RuleCase(NamedTuple):
    rule_id: str
    name: str
    run: dict[str, Any]
    slo: dict[str, Any] | None
    baseline: list[dict[str, Any]]
    thresholds: dict[str, dict[str, Any]]
    expectations: dict[str, list[float]] | None
    expect: dict[str, Any]

    @property
    def test_id(self) -> str:
        return f"{self.rule_id}-{self.name}"


def cases_dir() -> Path:
    return rules_data_dir() / "cases"


def deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(base))
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def load_cases(path: Path) -> list[RuleCase]:
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(doc, dict) or set(doc) - {"rule", "base", "cases"}:
        raise ValueError(
            f"{path}: top level must have rule, base, cases; got {sorted(doc) if isinstance(doc, dict) else doc!r}"
        )
    rule_id = doc["rule"]
    if path.stem != rule_id:
        raise ValueError(f"{path}: file name must be the rule id {rule_id!r}")
    base = doc.get("base") or {}
    out: list[RuleCase] = []
    for name, body in (doc.get("cases") or {}).items():
        unknown = set(body) - CASE_KEYS
        if unknown:
            raise ValueError(f"{path}: case {name!r} has unknown keys {sorted(unknown)}")
        expect = body.get("expect") or {}
        if set(expect) - EXPECT_KEYS or "severity" not in expect:
            raise ValueError(f"{path}: case {name!r} expect needs severity and only {sorted(EXPECT_KEYS)}")
        run = deep_merge(base, body.get("run") or {})
        out.append(
            RuleCase(
                rule_id=rule_id,
                name=name,
                run=run,
                slo=body.get("slo"),
                baseline=[deep_merge(run, b) for b in body.get("baseline") or []],
                thresholds=body.get("thresholds") or {},
                expectations=body.get("expectations"),
                expect=expect,
            )
        )
    return out


def all_cases() -> list[RuleCase]:
    return [case for path in sorted(cases_dir().glob("*.yaml")) for case in load_cases(path)]


def _no_expectations(*_args: Any, **_kwargs: Any) -> None:
    return None


def build_case_context(case: RuleCase) -> RunContext:
    run = decode_run(case.run)
    slo = SLO(**case.slo) if case.slo else None
    baseline = [decode_run(b) for b in case.baseline]
    ctx = build_context(run, slo=slo, baseline_runs=baseline, expectations_fn=_no_expectations)  # type: ignore[arg-type]
    if case.expectations:
        bands = {k: Band(*v) for k, v in case.expectations.items()}
        exp = Expectations(
            decode_tok_s=bands.get("decode_tok_s"),
            prefill_tok_s=bands.get("prefill_tok_s"),
            ttft_ms=bands.get("ttft_ms"),
            itl_ms=bands.get("itl_ms"),
            model_version="case",
            source="rule case",
        )
        ctx = dataclasses.replace(ctx, expectations=exp)
    return ctx


def run_case(case: RuleCase) -> tuple[RunContext, Recommendation | None]:
    table = thresholds_table()
    if case.thresholds:
        table = table.with_overrides(case.thresholds, origin=f"case {case.test_id}")
    rule = get_rule(case.rule_id, table=table)
    ctx = build_case_context(case)
    advice = advise(ctx, rules=[rule], min_severity=Severity.NONE, strict=True)
    found = [r for r in advice.recommendations if r.rule_id == case.rule_id]
    return ctx, (found[0] if found else None)


def check(case: RuleCase) -> None:
    """Assert the case's expectations; the messages name what differed."""
    _ctx, rec = run_case(case)
    expect = case.expect
    want = Severity.from_label(expect["severity"])
    got = rec.severity if rec is not None else Severity.NONE
    detail = f"{case.test_id}: {rec.title if rec else 'no finding'}"
    assert got == want, f"{detail}: severity {got.label}, expected {want.label}"
    if rec is None or want == Severity.NONE:
        return
    assert rec.evidence, f"{detail}: a finding must carry evidence"
    assert rec.fix and rec.fix_for_runtime, f"{detail}: a finding must carry a fix (and one for the run's runtime)"
    assert 0.0 <= rec.confidence <= 1.0
    if "action" in expect:
        assert rec.action == expect["action"], f"{detail}: action {rec.action}"
    if "fix_contains" in expect:
        assert expect["fix_contains"] in rec.fix_for_runtime, f"{detail}: fix {rec.fix_for_runtime!r}"
    if "title_contains" in expect:
        assert expect["title_contains"] in rec.title, f"{detail}: title {rec.title!r}"
    if "evidence" in expect:
        metrics = {e.metric for e in rec.evidence}
        missing = set(expect["evidence"]) - metrics
        assert not missing, f"{detail}: evidence lacks {sorted(missing)} (has {sorted(metrics)})"
    if "confidence" in expect:
        low, high = expect["confidence"]
        assert low <= rec.confidence <= high, f"{detail}: confidence {rec.confidence}"
    if "gain" in expect:
        gain = expect["gain"]
        assert rec.expected_gain is not None, f"{detail}: expected a gain"
        if "metric" in gain:
            assert rec.expected_gain.metric == gain["metric"], f"{detail}: gain metric {rec.expected_gain.metric}"
        if "to" in gain:
            low, high = gain["to"]
            assert low <= rec.expected_gain.to <= high, (
                f"{detail}: gain to {rec.expected_gain.to:.4g} not in [{low}, {high}]"
            )
        if "relative" in gain:
            low, high = gain["relative"]
            rel = rec.expected_gain.relative
            assert low <= rel <= high, f"{detail}: gain relative {rel:.3f} not in [{low}, {high}]"
