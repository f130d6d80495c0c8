"""``workload.output_tokens_requested`` (issue 12 item 6) and aiperf's deliberate cancellations: what
each parser reads from the file's own config, and where nothing says it, nothing is guessed."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from advisor.canonical import CanonicalRun, validate_run
from advisor.errors import InvalidInput
from advisor.ingest.formats.genai_perf import parse_profile
from advisor.ingest.formats.guidellm import _spec_output_tokens
from advisor.ingest.formats.per_request import parse_aiperf_records
from advisor.ingest.formats.vllm_bench import parse_vllm_result

INGEST = Path(__file__).resolve().parents[2] / "fixtures" / "ingest"


def _json(path: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((INGEST / path).read_text(encoding="utf-8"))
    return doc


@pytest.mark.parametrize(
    ("path", "aiperf", "requested"),
    [
        # genai-perf 0.0.x flat config: --output-tokens-mean 400
        ("genai_perf/wellflat-gptoss20b-vllm-c1-per_request-key-profile_export_genai_perf.json", False, 400.0),
        # genai-perf nested config: input.output_tokens.mean
        ("genai_perf/wellflat-gptoss20b-vllm-c1-telemetry-profile_export_genai_perf.json", False, 300.0),
        # aiperf: input.prompt.output_tokens.mean (--osl 250)
        ("aiperf/aiperf-gptoss20b-c100-cancel10-profile_export_aiperf.json", True, 250.0),
        # June 2025 aiperf with no output length configured
        ("aiperf/aiperf-2025-06-early-schema-profile_export_aiperf.json", True, None),
    ],
)
def test_the_requested_output_comes_from_the_tools_own_config(path: str, aiperf: bool, requested: float | None) -> None:
    run = parse_profile(_json(path), aiperf=aiperf)
    assert run.workload.output_tokens_requested == requested


def test_aiperf_cancellations_are_counted_as_sent_not_failed() -> None:
    doc = _json("aiperf/aiperf-gptoss20b-c100-cancel10-profile_export_aiperf.json")
    run = parse_profile(doc, aiperf=True)
    assert (run.metrics.requests_completed, run.metrics.requests_failed, run.workload.num_requests) == (89, 0, 100)
    # A real error beside the cancellations still counts as failed.
    errored = copy.deepcopy(doc)
    errored["error_summary"].append(
        {"error_details": {"code": 500, "type": "ServerError", "message": "boom"}, "count": 3}
    )
    errored["records"]["error_request_count"]["avg"] = 14
    run = parse_profile(errored, aiperf=True)
    assert (run.metrics.requests_failed, run.workload.num_requests) == (3, 103)


def test_aiperf_records_keep_cancelled_requests_out_of_the_failures() -> None:
    lines = (INGEST / "aiperf_records" / "edge-warmup-record-and-cancelled-request.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    run = parse_aiperf_records(records)
    cancelled = sum(1 for r in records if r["metadata"].get("was_cancelled"))
    assert cancelled >= 1
    assert run.metrics.requests_failed == 0
    assert any("cancelled on purpose" in n for n in run.source.notes)


@pytest.mark.parametrize(
    ("spec", "tokens"),
    [
        ("prompt_tokens=128,output_tokens=128", 128.0),  # v0.3 request_loader.data
        (["prompt_tokens=1024,output_tokens=128,output_tokens_stdev=8"], 128.0),  # requests.data
        ([{"kind": "synthetic", "config": "prompt_tokens=1024,output_tokens=64"}], 64.0),  # v0.7 data
        ("['/root/aime_2024_v2.jsonl']", None),  # a dataset file: the length is not requested
        ("prompt_tokens=128,max_output_tokens=99", None),  # not the output_tokens key
    ],
)
def test_guidellm_synthetic_data_spec(spec: object, tokens: float | None) -> None:
    assert _spec_output_tokens(spec) == tokens


def test_vllm_reads_a_merged_random_output_len_and_nothing_else() -> None:
    doc = _json("vllm_bench/vllm_bench_serve.json")
    assert parse_vllm_result(doc, legacy=False).workload.output_tokens_requested is None
    swept = dict(doc, random_output_len=256)
    assert parse_vllm_result(swept, legacy=False).workload.output_tokens_requested == 256.0
    labelled = dict(doc, output_len="long")
    assert parse_vllm_result(labelled, legacy=False).workload.output_tokens_requested is None


def test_the_field_is_bounded_like_the_other_lengths() -> None:
    run = CanonicalRun()
    run.workload.output_tokens_requested = -1.0
    with pytest.raises(InvalidInput, match="output_tokens_requested"):
        validate_run(run)
