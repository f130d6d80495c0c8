"""Expectations for a multi-device setup: the all-reduces of tensor parallelism and the expert
dispatch of expert parallelism, added to what one forward pass is expected to take.

The roofline scales bandwidth and compute by the TP degree as if the devices were one (its
ceiling stays the ideal); the fitted model and the prior learn their efficiency mostly from
single-device runs. A group of ``tp`` devices also pays, every forward pass, the communication
:mod:`advisor.physics.parallel` computes from the interconnect: two all-reduces per layer
(:func:`~advisor.physics.parallel.tp_communication_seconds`) and, for an MoE model under expert
parallelism, the all-to-all dispatch and combine per MoE layer
(:func:`~advisor.physics.parallel.expert_dispatch_seconds`). Adding that time to the expected
pass turns every rate down and every latency up; ceilings and floors stay as the physics gives
them, so the guarantees (``low ≤ expected ≤ high ≤ ceiling``) hold.

Expert parallelism is read from the engine arguments that switch it on: vLLM's
``enable_expert_parallel`` (``--enable-expert-parallel``) and SGLang's ``ep_size`` /
``expert_parallel_size`` (``--ep-size``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from advisor.ml.expectations import Band, Expectations, physical_band
from advisor.physics import ModelSpec, Roofline
from advisor.physics.parallel import expert_dispatch_seconds, parse_interconnect, tp_communication_seconds

__all__ = ["expert_parallel", "pass_communication_seconds", "with_communication"]


def expert_parallel(engine_args: Mapping[str, Any] | None, model: ModelSpec) -> bool:
    """Whether the engine arguments put an MoE model's experts on separate devices."""
    if not model.is_moe or not engine_args:
        return False
    if engine_args.get("enable_expert_parallel") is True:
        return True
    for key in ("ep_size", "expert_parallel_size"):
        value = engine_args.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 1:
            return True
    return False


def pass_communication_seconds(
    model: ModelSpec, *, tp: int, tokens: float, interconnect: str | None, expert_parallel: bool
) -> float:
    """Seconds one forward pass of ``tokens`` tokens spends communicating across ``tp`` devices."""
    if tp <= 1:
        return 0.0
    link = parse_interconnect(interconnect)
    seconds = tp_communication_seconds(model, tp=tp, tokens=tokens, interconnect=link)
    if expert_parallel:
        seconds += expert_dispatch_seconds(model, ep=tp, tokens=tokens, interconnect=link)
    return seconds


def _slower_rate(band: Band | None, tokens: float, seconds: float) -> Band | None:
    """A per-stream rate band after ``seconds`` more per pass of ``tokens`` tokens per stream."""
    if band is None or seconds <= 0:
        return band

    def slowed(rate: float) -> float:
        return tokens / (tokens / rate + seconds)

    return physical_band(slowed(band.expected), slowed(band.low), slowed(band.high), band.ceiling, rate=True)


def _later(band: Band | None, milliseconds: float) -> Band | None:
    if band is None or milliseconds <= 0:
        return band
    return physical_band(
        band.expected + milliseconds, band.low + milliseconds, band.high + milliseconds, band.ceiling, rate=False
    )


def with_communication(
    exp: Expectations,
    roofline: Roofline,
    model: ModelSpec,
    *,
    interconnect: str | None,
    expert_parallel: bool = False,
) -> tuple[Expectations, list[str]]:
    """``exp`` for a TP group of ``roofline.tensor_parallel`` devices (unchanged for one device),
    and notes saying what was added."""
    tp = roofline.tensor_parallel
    if tp <= 1:
        return exp, []
    decode_comm = pass_communication_seconds(
        model, tp=tp, tokens=roofline.concurrency, interconnect=interconnect, expert_parallel=expert_parallel
    )
    prompt = float(roofline.prompt_tokens or 0)
    prefill_comm = (
        pass_communication_seconds(
            model, tp=tp, tokens=prompt, interconnect=interconnect, expert_parallel=expert_parallel
        )
        if prompt > 0
        else 0.0
    )
    decode = _slower_rate(exp.decode_tok_s, 1.0, decode_comm)
    prefill = _slower_rate(exp.prefill_tok_s, prompt, prefill_comm) if prompt > 0 else exp.prefill_tok_s
    itl = _later(exp.itl_ms, decode_comm * 1000.0)
    what = "all-reduces" + (" and expert dispatch" if expert_parallel else "")
    notes = [
        f"TP {tp} over {interconnect or 'an unknown link (PCIe Gen4 assumed)'}: {what} add "
        f"{decode_comm * 1000.0:.2f} ms per decode step"
        + (f" and {prefill_comm * 1000.0:.1f} ms per prefill" if prefill_comm > 0 else "")
    ]
    adjusted = replace(
        exp,
        decode_tok_s=decode,
        prefill_tok_s=prefill,
        ttft_ms=_later(exp.ttft_ms, prefill_comm * 1000.0),
        itl_ms=itl,
        itl_p99_ms=_later(exp.itl_p99_ms, decode_comm * 1000.0),
        ttft_p99_ms=_later(exp.ttft_p99_ms, prefill_comm * 1000.0),
        source=f"{exp.source}; {what} for TP {tp}",
    )
    return adjusted, notes
