from __future__ import annotations

from typing import ClassVar

from advisor.rules.base import Evidence, Finding, Gain, Rule, Status
from advisor.rules.config import ParamSpec, Spec, ThresholdSpec
from advisor.rules.context import RunContext
from advisor.rules.damping import sample_cap, slo_cap
from advisor.rules.helpers import annotate_fix, fmt, latency_label
from advisor.rules.severity import Severity, damp


class DisaggregationWorthwhile(Rule):
    """Persistent prefill interference on a large, steadily loaded fleet: separate the phases.

    ## Why is this bad?
    Chunked prefill gives most of the isolation between prompts and streams with one flag. When it
    is already on with small chunks and ITL tails are still stretched, prefill and decode keep
    competing for the same GPUs. With many accelerators and steady traffic, separate prefill and
    decode pools let each be sized and batched for its own bottleneck (compute vs bandwidth), and
    the KV transfer between them is amortised. With few GPUs it is not (see SCH004).

    ## Fix
    Run prefill and decode as separate worker pools with a KV-transfer connector and a P/D-aware
    router: vLLM ``--kv-transfer-config`` (e.g. NixlConnector) behind llm-d or Dynamo, SGLang
    ``--disaggregation-mode prefill|decode``, TensorRT-LLM disaggregated serving. Start with a
    prefill:decode ratio from measured prompt and output rates, and keep the monolithic deployment
    as the baseline to compare.

    ## Example
    16 H100s serving 8,000-token RAG prompts at a steady 20 req/s, chunked prefill at 2048 tokens:
    ITL p50 14 ms, p99 95 ms. Decode workers that never prefill bring p99 close to p50.
    """

    id = "SCH003"
    name = "scheduling.disaggregation_worthwhile"
    action = "disaggregate-prefill-decode"
    rule_status = Status.PREVIEW
    thresholds: ClassVar[tuple[Spec, ...]] = (
        ThresholdSpec("gpus", ascending=True, unit="devices", doc="accelerators in the deployment"),
        ThresholdSpec("tail_ratio", ascending=True, unit="ratio", doc="ITL p99 ÷ p50 left after chunked prefill"),
        ParamSpec(
            "min_concurrency",
            unit="streams",
            doc="steady load below which disaggregation is not worth it",
            minimum=1,
        ),
        ParamSpec(
            "min_prompt_tokens",
            unit="tokens",
            doc="prompts shorter than this do not interfere enough",
            minimum=1,
        ),
        ParamSpec(
            "max_budget",
            unit="tokens",
            doc="the chunk size at or below which chunked prefill is 'already tuned'",
            minimum=256,
        ),
    )

    def evaluate(self, ctx: RunContext) -> Finding | None:
        e, m = ctx.engine, ctx.measured
        gpus = ctx.run.setup.gpu_count or ctx.run.setup.tensor_parallel
        itl = ctx.run.metrics.itl_ms if ctx.run.metrics.itl_ms.p99 else ctx.run.metrics.tpot_ms
        if (
            e.disaggregated.value
            or not gpus
            or not itl.p99
            or not itl.p50
            or m.concurrency is None
            or not m.prompt_tokens
        ):
            return None
        tuned = (
            e.chunked_prefill.value is True
            and e.batched_tokens.value is not None
            and e.batched_tokens.value <= self.p("max_budget")
        )
        steady = ctx.run.workload.request_rate is not None or ctx.run.workload.concurrency is not None
        if (
            not tuned
            or not steady
            or m.concurrency < self.p("min_concurrency")
            or m.prompt_tokens < self.p("min_prompt_tokens")
        ):
            return None
        ratio = itl.p99 / itl.p50
        severity = damp(
            self.t("gpus").severity_of(float(gpus)),
            self.t("tail_ratio").severity_of(ratio),
            Severity.MODERATE,  # an architecture change is never urgent on the strength of one run
            sample_cap(self.common, m.n_requests),
            slo_cap(ctx, self.common, "itl_p99_ms", "tpot_p99_ms"),
        )
        label = latency_label("itl_ms" if ctx.run.metrics.itl_ms.p99 else "tpot_ms")
        to = itl.p50 * 1.3
        return Finding(
            severity=severity,
            title=(
                f"{label} p99 stays {ratio:.1f}× the p50 with chunked prefill already at "
                f"{fmt(e.batched_tokens.value)} tokens, "
                f"on {gpus} GPUs under steady load: separate prefill and decode pools"
            ),
            evidence=(
                Evidence("gpu_count", float(gpus), f">= {fmt(self.t('gpus').low)}", "run"),
                Evidence(f"{label.lower()}_ms.p99", itl.p99, f"≈ {fmt(to)} on decode-only workers", "physics"),
                Evidence(
                    "workload.prompt_tokens_mean",
                    m.prompt_tokens,
                    f">= {fmt(self.p('min_prompt_tokens'))}",
                    "run",
                ),
            ),
            fix=annotate_fix(
                {
                    "vllm": (
                        "Run prefill and decode instances with --kv-transfer-config (e.g. NixlConnector) "
                        "behind a P/D router (llm-d, Dynamo)."
                    ),
                    "sglang": (
                        "Launch prefill and decode servers with --disaggregation-mode prefill / decode and "
                        "--disaggregation-transfer-backend (mooncake or nixl), behind the SGLang router."
                    ),
                    "trtllm": "Use TensorRT-LLM disaggregated serving (separate context and generation servers).",
                    "other": (
                        "Split prefill and decode into separate worker pools connected by KV transfer; size "
                        "them from the prompt and output token rates."
                    ),
                },
                ctx.runtime,
                ctx.run.setup.runtime_version,
            ),
            expected_gain=Gain(f"{label.lower()}_ms.p99", itl.p99, to),
            confidence=0.4,
        )
