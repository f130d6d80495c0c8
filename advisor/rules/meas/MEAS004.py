from __future__ import annotations

from typing import ClassVar

from advisor.rules.base import Evidence, Finding, Rule
from advisor.rules.config import Spec, ThresholdSpec
from advisor.rules.context import RunContext

#: How much of the diagnosis each missing field blocks (summed, then graded).
WEIGHTS: dict[str, float] = {
    "setup.hardware": 3.0,
    "setup.model": 3.0,
    "setup.quantization": 3.0,
    "setup": 3.0,
    "workload.concurrency": 2.0,
    "metrics.decode_tok_s": 2.0,
    "workload.prompt_tokens_mean": 1.0,
    "setup.runtime": 1.0,
}


class MissingFieldsBlockDiagnosis(Rule):
    """Fields the diagnosis needs are missing; the finding says which and how to supply them.

    ## Why is this bad?
    Without the hardware, model and quantization there is no roofline: no ceiling, no expected
    band, no what-if, and most findings cannot be made at all. Without the concurrency, a slow
    per-stream decode cannot be told apart from a busy batch; without the prompt length, TTFT
    cannot be judged. Silence from the other rules then means "could not check", not "healthy".
    Missing context is information, not failure: this finding is at most ``moderate``, never
    fails the verdict and never trips ``--fail-on severe``. What the file implies is derived
    first (the concurrency by Little's law from the request rate and the latency).

    ## Fix
    Supply the named fields: in a canonical run under ``setup`` / ``workload`` / ``metrics``; with
    a native benchmark file as query parameters (``?hardware=nvidia-a10g``), headers
    (``X-Advisor-Hardware``) or CLI options (``advisor submit --hardware nvidia-a10g``). Unknown
    devices and models can be given as inline spec objects.

    ## Example
    A ``vllm bench serve`` result submitted without ``--hardware``: the file names the model but
    not the GPU, so decode efficiency cannot be computed.
    """

    id = "MEAS004"
    name = "measurement.missing_fields"
    action = "improve-measurement"
    #: "Cannot judge, add X" is information, not failure: at most moderate, never fails a verdict.
    asks_for_context = True
    thresholds: ClassVar[tuple[Spec, ...]] = (
        ThresholdSpec(
            "blocked",
            ascending=True,
            unit="weight",
            doc=(
                "summed weight of the missing fields (hardware/model/quantization 3, concurrency and "
                "decode 2, others 1)"
            ),
        ),
    )

    def evaluate(self, ctx: RunContext) -> Finding | None:
        if not ctx.missing:
            return None
        blocked = sum(WEIGHTS.get(m.field, 1.0) for m in ctx.missing)
        return Finding(
            severity=self.t("blocked").severity_of(blocked),
            title=f"{_what_is_missing(ctx)}: {ctx.missing[0].blocks} cannot be checked",
            evidence=tuple(Evidence(m.field, m.reason, "given", "run") for m in ctx.missing),
            fix={"other": " ".join(f"{m.field}: {m.how}." for m in ctx.missing)},
            expected_gain=None,
            confidence=1.0,
            details={"missing": [m.to_dict() for m in ctx.missing]},
        )


def _what_is_missing(ctx: RunContext) -> str:
    """``Missing setup.hardware, …``; a model the file names but the catalog does not know is said
    to be unknown, by name, rather than missing (the user did give it)."""
    named = ctx.run.setup.model
    unknown = isinstance(named, str) and bool(named.strip())
    absent = [m.field for m in ctx.missing if not (unknown and m.field == "setup.model")]
    parts: list[str] = []
    if unknown and len(absent) < len(ctx.missing):
        name = str(named).strip()
        shown = name if len(name) <= 80 else name[:77] + "..."
        parts.append(f"The model {shown!r} (setup.model) is unknown to the catalog")
    if absent:
        parts.append(("missing " if parts else "Missing ") + ", ".join(absent))
    return "; ".join(parts)
