"""Corruptions the fuzz test found: a parser answers them with an IngestError, never a crash."""

from __future__ import annotations

from pathlib import Path

import pytest

from advisor.errors import IngestError
from advisor.ingest.base import Input
from advisor.ingest.registry import parse

INGEST = Path(__file__).resolve().parents[2] / "fixtures" / "ingest"


def test_csv_with_a_stray_carriage_return_inside_a_field_is_an_ingest_error() -> None:
    text = (INGEST / "genai_perf_csv" / "cloudai-ai-dynamo-doc-profile_export_genai_perf-isl3000.csv").read_text(
        "utf-8"
    )
    corrupted = text.replace("249.48", "249\r.48", 1)
    assert corrupted != text
    with pytest.raises(IngestError, match="not a readable CSV"):
        parse(Input(corrupted.encode("utf-8"), file_name="profile_export_genai_perf.csv"), "genai_perf_csv")


def test_llama_bench_markdown_rate_with_two_decimal_points_is_skipped_not_a_crash() -> None:
    path = INGEST / "llama_bench" / "edge-md-stderr-banner-pg-build-footer.md.txt"
    text = path.read_text("utf-8")
    _, good = parse(Input(text.encode("utf-8"), file_name=path.name), "llama_bench")
    rate = "600.12"
    assert rate in text
    corrupted = text.replace(rate, "600.1.", 1)
    try:
        _, runs = parse(Input(corrupted.encode("utf-8"), file_name=path.name), "llama_bench")
    except IngestError:
        return
    # The unreadable row is dropped; the others are read as before.
    assert len(runs) == len(good) - 1
