"""Figures derived when a tool does not report them (advisor.ingest.derive)."""

from __future__ import annotations

import pytest

from advisor.canonical import Metrics, Percentiles, Workload
from advisor.ingest.derive import decode_from_tpot, prefill_from_ttft


@pytest.mark.parametrize(
    ("concurrency", "ttft", "decode", "expected"),
    [
        (1.0, 100.0, 50.0, 5120.0),  # 512 tokens in 100 ms
        (8.0, 100.0, 50.0, None),  # queueing inside TTFT
        (None, 100.0, 50.0, None),  # unknown concurrency
        (1.0, 20000.0, 50.0, None),  # 25.6 tok/s "prefill" below decode: TTFT holds something else
    ],
)
def test_prefill_from_ttft_only_when_it_means_prefill(
    concurrency: float | None, ttft: float, decode: float, expected: float | None
) -> None:
    metrics = Metrics(ttft_ms=Percentiles(mean=ttft), decode_tok_s=decode)
    notes: list[str] = []
    prefill_from_ttft(metrics, Workload(concurrency=concurrency, prompt_tokens_mean=512.0), notes)
    assert metrics.prefill_tok_s == (pytest.approx(expected) if expected is not None else None)
    assert len(notes) == 1


def test_decode_from_tpot() -> None:
    metrics = Metrics(tpot_ms=Percentiles(mean=8.0))
    decode_from_tpot(metrics)
    assert metrics.decode_tok_s == 125.0
    empty = Metrics()
    decode_from_tpot(empty)
    assert empty.decode_tok_s is None
