"""Figures a parser derives when its tool does not report them: decode speed from TPOT, prefill
speed from TTFT (only where that is honest, with a note saying how it was obtained)."""

from __future__ import annotations

from advisor.canonical import Metrics, Percentiles, Workload

__all__ = ["MIN_PREFILL_TOKENS", "decode_from_tpot", "drop_unstreamed_timings", "not_streamed", "prefill_from_ttft"]

#: A response that evaluated fewer prompt tokens than this gives no prefill speed (docs/formats.md
#: §9.3, llama-server: "skip it when prompt_n is very small"): with the rest of the prompt served from
#: the cache, fixed per-request overhead dominates such a tiny batch.
MIN_PREFILL_TOKENS = 32


def not_streamed(itl: Percentiles | None, output_tokens_mean: float | None) -> bool:
    """Every inter-token gap is 0 although requests produced more than one token: the response came
    in one piece (a non-streaming endpoint, SGLang's ``/generate`` without ``stream``), so no token
    gap was measured and the "TTFT" is the time to the whole response."""
    if itl is None or output_tokens_mean is None or output_tokens_mean <= 1:
        return False
    values = [getattr(itl, f) for f in Percentiles.__struct_fields__]
    known = [v for v in values if v is not None]
    return bool(known) and all(v == 0 for v in known)


def drop_unstreamed_timings(metrics: Metrics, notes: list[str]) -> None:
    """Keep only what a non-streamed run measured (see :func:`not_streamed`): the response time.

    TTFT becomes the end-to-end latency when the file has none (the first token arrived with the
    last); ITL, TPOT and the decode rate derived from TPOT are dropped: a mean TPOT of
    (latency - TTFT) / (tokens - 1) over responses that arrived whole is noise around zero."""
    ttft, e2e = metrics.ttft_ms, metrics.e2e_ms
    if e2e.mean is None and ttft.mean is not None:
        metrics.e2e_ms = ttft
    metrics.ttft_ms = Percentiles()
    metrics.itl_ms = Percentiles()
    metrics.tpot_ms = Percentiles()
    metrics.decode_tok_s = None
    notes.append(
        "not streamed: every inter-token latency is 0 while requests produced more than one token, so each "
        "response arrived whole; TTFT, ITL and TPOT are left out (TTFT was the time to the whole response)"
    )


def decode_from_tpot(metrics: Metrics) -> None:
    """Per-sequence decode speed = 1000 / mean TPOT (DESIGN §4), when TPOT is known and positive."""
    tpot = metrics.tpot_ms.mean
    if metrics.decode_tok_s is None and tpot is not None and tpot > 0:
        metrics.decode_tok_s = 1000.0 / tpot


def prefill_from_ttft(metrics: Metrics, workload: Workload, notes: list[str]) -> None:
    """Approximate per-sequence prefill speed as mean prompt tokens ÷ mean client TTFT.

    Only at concurrency 1: under load the client TTFT also holds queueing behind other requests'
    prefills, and the quotient would describe the queue, not the engine (docs/formats.md §9.3 marks the
    figure approximate even then, since TTFT includes network and HTTP overhead).
    """
    ttft = metrics.ttft_ms.mean
    prompt = workload.prompt_tokens_mean
    if metrics.prefill_tok_s is not None or ttft is None or ttft <= 0 or not prompt:
        return
    if workload.concurrency is not None and workload.concurrency <= 1:
        estimate = prompt / ttft * 1000.0
        if metrics.decode_tok_s is not None and estimate <= metrics.decode_tok_s:
            # Prefill processes the prompt in parallel and always outruns one-token-at-a-time decode;
            # a slower "prefill" means the TTFT holds something else (reasoning tokens the tool did
            # not count as output, a cold start, queueing at a gateway).
            notes.append(
                f"prefill_tok_s not derived: prompt_tokens_mean / ttft_ms.mean = {estimate:.1f} tok/s is "
                "below the decode speed, so TTFT holds more than prefill (reasoning tokens? cold start?)"
            )
            return
        metrics.prefill_tok_s = estimate
        notes.append(
            "prefill_tok_s approximated as prompt_tokens_mean / ttft_ms.mean (client TTFT includes "
            "network and HTTP overhead)"
        )
    else:
        notes.append(
            "prefill_tok_s not derived: with concurrency above 1 (or unknown) the client TTFT "
            "includes queueing behind other requests"
        )
