from __future__ import annotations

from typing import ClassVar

from advisor.rules import fixes
from advisor.rules.base import Evidence, Finding, Rule
from advisor.rules.config import Spec, ThresholdSpec
from advisor.rules.context import RunContext
from advisor.rules.helpers import annotate_fix, fmt


class DisaggregationOnSmallDeployment(Rule):
    """Prefill and decode are disaggregated on too few GPUs (or too little load) to pay off.

    ## Why is this bad?
    Disaggregation moves every prompt's KV cache from a prefill worker to a decode worker. On one
    machine with a few GPUs, what used to be a pointer hand-off becomes gigabytes copied over
    PCIe or the network per second, each pool idles while the other is busy, and both need their
    own copy of the weights. Chunked prefill gives most of the isolation with one flag, on the GPUs
    you already have.

    ## Fix
    Serve both phases in the same instances with chunked prefill (vLLM: drop
    ``--kv-transfer-config``, keep ``--max-num-batched-tokens 2048``; SGLang: drop
    ``--disaggregation-mode``), and use the extra GPUs as replicas. Revisit disaggregation with
    many accelerators and steady, prompt-heavy traffic (SCH003).

    ## Example
    A 1P1D SGLang deployment on two GPUs serving Qwen2.5-3B at concurrency 8: each prompt's KV is
    copied between the GPUs, and two monolithic replicas would serve the same traffic.
    """

    id = "SCH004"
    name = "scheduling.disaggregation_on_small_deployment"
    action = "avoid-disaggregation"
    thresholds: ClassVar[tuple[Spec, ...]] = (
        ThresholdSpec("gpus", ascending=False, unit="devices", doc="accelerators in the deployment; fewer is worse"),
        ThresholdSpec("concurrency", ascending=False, unit="streams", doc="streams in flight; less load is worse"),
    )

    def evaluate(self, ctx: RunContext) -> Finding | None:
        e = ctx.engine
        if e.disaggregated.value is not True:
            return None
        gpus = ctx.run.setup.gpu_count
        conc = ctx.measured.concurrency
        if gpus is None and conc is None:
            return None
        severity = max(self.t("gpus").severity_of(gpus), self.t("concurrency").severity_of(conc))
        evidence = [
            Evidence(e.disaggregated.arg or "disaggregation", True, "false unless many GPUs and steady load", "run")
        ]
        if gpus is not None:
            evidence.append(Evidence("gpu_count", float(gpus), f"> {fmt(self.t('gpus').low)}", "run"))
        if conc is not None:
            evidence.append(Evidence("concurrency", conc, f"> {fmt(self.t('concurrency').low)}", "run"))
        return Finding(
            severity=severity,
            title=(
                f"Prefill/decode disaggregation on {gpus if gpus is not None else 'few'} GPUs"
                f"{f' at {fmt(conc)} streams' if conc is not None else ''}: the KV transfers cost more "
                "than the isolation gains"
            ),
            evidence=tuple(evidence),
            fix=annotate_fix(
                fixes.merge(
                    {
                        "vllm": (
                            "Drop --kv-transfer-config and serve both phases in each instance with "
                            "--max-num-batched-tokens 2048;"
                        ),
                        "sglang": (
                            "Drop --disaggregation-mode and serve both phases in each server with "
                            "--chunked-prefill-size 2048;"
                        ),
                        "trtllm": (
                            "Serve context and generation in the same instances with enable_chunked_prefill: true;"
                        ),
                        "other": "Serve both phases in the same instances with chunked prefill;",
                    },
                    {k: "use the freed GPUs as replicas." for k in ("vllm", "sglang", "trtllm", "other")},
                ),
                ctx.runtime,
                ctx.run.setup.runtime_version,
            ),
            expected_gain=None,
            confidence=0.6,
        )
