from __future__ import annotations

from typing import ClassVar

from advisor.rules.base import Evidence, Finding, Gain, Rule
from advisor.rules.config import ParamSpec, Spec, ThresholdSpec
from advisor.rules.context import MetricBaseline, RunContext
from advisor.rules.damping import sample_cap
from advisor.rules.helpers import fmt
from advisor.rules.severity import Severity, damp


class RegressedAgainstBaseline(Rule):
    """The run is worse than this deployment's own recent comparable runs, beyond their noise.

    ## Why is this bad?
    The baseline is the median of the deployment's last comparable runs (same runtime, hardware,
    model, quantization, parallelism and a similar workload), with a robust spread (1.4826 × MAD,
    which one odd run cannot inflate). A metric several spreads worse than the median did not
    drift by chance: something changed between those runs and this one, typically the engine
    version, a flag, the driver, the model revision or the traffic.

    ## Fix
    Diff this run's setup against the baseline's (labels such as ``git_sha``, ``runtime_version``,
    ``engine_args``) and bisect: re-run the previous version on the same hardware. The verdict is
    ``fail`` so CI stops the change.

    ## Example
    After a vLLM upgrade, decode on the same H100 drops from a median of 186 tok/s (five runs within
    ±2; the spread floor of 2 % makes it 3.7) to 161: 6.7 spreads and 13 % worse.
    """

    id = "REG003"
    name = "regression.against_baseline"
    action = "investigate-regression"
    fails_verdict_at = Severity.MODERATE
    damp_by_gain = False  # the relative threshold already grades the size
    thresholds: ClassVar[tuple[Spec, ...]] = (
        ThresholdSpec("relative", ascending=True, unit="ratio", doc="how much worse than the baseline median"),
        ThresholdSpec(
            "noise",
            ascending=True,
            unit="spreads",
            doc="how many robust spreads worse; below 'moderate' is within noise",
        ),
        ParamSpec(
            "spread_floor",
            unit="ratio",
            doc="smallest spread assumed, as a fraction of the median (identical runs are not noise-free)",
            minimum=0,
        ),
    )

    def evaluate(self, ctx: RunContext) -> Finding | None:
        base = ctx.baseline
        if base is None:
            return None
        worst: tuple[Severity, float, str, float, MetricBaseline, float] | None = None
        regressed: list[tuple[str, float, MetricBaseline, float]] = []
        floor, noise, grade = self.p("spread_floor"), self.t("noise"), self.t("relative")
        for metric, mb in base.metrics.items():
            found = ctx.metric(metric)
            if found is None or mb.median <= 0:
                continue
            worse = (mb.median - found) if mb.higher_is_better else (found - mb.median)
            if worse <= 0:
                continue
            spread = max(mb.spread, floor * abs(mb.median))
            z = worse / spread if spread > 0 else float("inf")
            relative = worse / mb.median
            severity = damp(
                grade.severity_of(relative),
                noise.severity_of(z),
                sample_cap(self.common, ctx.measured.n_requests) if metric.endswith("p99") else None,
            )
            if severity == Severity.NONE:
                continue
            regressed.append((metric, found, mb, z))
            key = (severity, relative)
            if worst is None or key > (worst[0], worst[1]):
                worst = (severity, relative, metric, found, mb, z)
        if worst is None:
            return None
        severity, relative, metric, found, mb, z = worst
        regressed.sort(key=lambda r: -r[3])
        evidence = tuple(
            Evidence(
                name,
                value,
                (f"{fmt(b.median)} ± {fmt(max(b.spread, self.p('spread_floor') * abs(b.median)))} over {b.n} runs"),
                "baseline",
            )
            for name, value, b, _z in regressed[:4]
        )
        return Finding(
            severity=severity,
            title=(
                f"{metric} regressed {relative:.0%} against this deployment's baseline "
                f"({fmt(found)} vs a median of {fmt(mb.median)} over {base.n} runs, {z:.1f} spreads)"
            ),
            evidence=evidence,
            fix={
                "other": (
                    "Diff this run against the baseline runs (labels such as git_sha and "
                    "runtime_version, engine_args, driver, "
                    "model revision, traffic) and bisect by re-running the previous version on the "
                    "same hardware."
                )
            },
            expected_gain=Gain(metric, found, mb.median),
            confidence=min(0.9, 0.5 + 0.05 * base.n),
        )
