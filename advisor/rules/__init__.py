"""The rules engine: turn a measured run into ranked, explained recommendations (DESIGN §5).

Typical use::

    ctx = build_context(run, slo=slo, baseline_runs=recent_runs)
    advice = advise(ctx)
    advice.to_dict()  # {"verdict", "recommendations", "expectations", ...}

Rules live one per file in ``advisor/rules/<group>/<ID>.py``; thresholds in
``rules/thresholds.toml``; executable examples in ``rules/cases/<ID>.yaml``.
"""

from __future__ import annotations

from advisor.rules.base import ACTIONS, GROUPS, Evidence, Finding, Gain, Phase, Rule, Status
from advisor.rules.config import (
    ParamSpec,
    ThresholdsError,
    ThresholdSpec,
    ThresholdTable,
    load_table,
    rules_data_dir,
)
from advisor.rules.context import (
    Baseline,
    MetricBaseline,
    MissingField,
    RunContext,
    build_baseline,
    build_context,
)
from advisor.rules.engine import Advice, Recommendation, SloCheck, Suppressed, advise
from advisor.rules.registry import catalogue, get_rule, get_rules, rule_classes, thresholds_table
from advisor.rules.severity import Severity, Thresholds

__all__ = [
    "ACTIONS",
    "GROUPS",
    "Advice",
    "Baseline",
    "Evidence",
    "Finding",
    "Gain",
    "MetricBaseline",
    "MissingField",
    "ParamSpec",
    "Phase",
    "Recommendation",
    "Rule",
    "RunContext",
    "Severity",
    "SloCheck",
    "Status",
    "Suppressed",
    "ThresholdSpec",
    "ThresholdTable",
    "Thresholds",
    "ThresholdsError",
    "advise",
    "build_baseline",
    "build_context",
    "catalogue",
    "get_rule",
    "get_rules",
    "load_table",
    "rule_classes",
    "rules_data_dir",
    "thresholds_table",
]
