"""``POST /runs`` answers through :class:`JSONAnswer`: the same status, headers and body as the
Litestar ``Response`` it replaces, for the structs the route returns."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest
from litestar import Litestar, Response, post
from litestar.params import FromPath
from litestar.testing import TestClient

from advisor.domain.recommendations import RecommendationOut
from advisor.domain.runs.controllers import JSONAnswer
from advisor.domain.runs.schemas import RunOut, RunResult


def _result(run_id: int, *, stored_before: bool = False) -> RunResult:
    run = RunOut(
        id=run_id,
        deployment="prod-α",  # non-ASCII text, encoded alike
        measured_at=datetime(2026, 1, 2, 3, 4, 5, 678_901, tzinfo=UTC),
        submitted_at=datetime(2026, 12, 2, tzinfo=UTC),
        submitted_by=None,
        content_hash="ab" * 32,
        verdict="warn",
        setup={"runtime": "vllm", "engine_args": {"enable_prefix_caching": True}},
        workload={"concurrency": 4.0},
        metrics={"ttft_ms": {"p50": 228.73801688523415}, "decode_tok_s": 34.75929254183783},
        labels={"i": "7"},
        source={"format": "canonical"},
        efficiency={"decode_bandwidth_utilisation": 0.6704, "prefill_mfu": None},
        links={"self": f"/api/v1/runs/{run_id}"},
    )
    recommendation = RecommendationOut(
        id=3,
        run_id=run_id,
        rank=1,
        rule_id="DEC001",
        name="decode.near_ceiling_with_wide_weights",
        action="quantize-weights",
        phase="decode",
        severity="moderate",
        score=0.121,
        title="Decode reaches 67% of the ceiling",
        evidence=[{"metric": "decode_tok_s", "found": 34.8, "expected": "<= 51.8 (ceiling)"}],
        fix={"vllm": "--quantization fp8"},
        expected_gain={"metric": "decode_tok_s", "from": 34.8, "to": 54.4},
        confidence=0.75,
    )
    return RunResult(
        run=run,
        verdict="warn",
        recommendations=[recommendation],
        expectations={"decode_tok_s": {"ceiling": 51.848358652256685, "low": None}},
        verdict_reasons=[{"kind": "finding", "name": "DEC001"}],
        analysis={"notes": [], "slo": []},
        stored_before=stored_before,
    )


CASES: dict[str, tuple[Any, int]] = {
    "one_run_created": (_result(1), 201),
    "one_run_stored_before": (_result(2, stored_before=True), 200),
    "a_sweep": ({"runs": [_result(3), _result(4, stored_before=True)]}, 201),
}


def _app() -> Litestar:
    @post("/litestar/{case:str}", status_code=201)
    async def through_litestar(case: FromPath[str]) -> Response[Any]:
        content, status = CASES[case]
        return Response(content, status_code=status)

    @post("/answer/{case:str}", status_code=201)
    async def through_answer(case: FromPath[str]) -> JSONAnswer:
        content, status = CASES[case]
        return JSONAnswer(content, status)

    return Litestar([through_litestar, through_answer])


@pytest.mark.parametrize("case", sorted(CASES))
def test_json_answer_sends_what_litestar_sends(case: str) -> None:
    with TestClient(_app()) as client:
        expected = client.post(f"/litestar/{case}")
        got = client.post(f"/answer/{case}")
    assert got.status_code == expected.status_code == CASES[case][1]
    assert got.content == expected.content
    assert got.headers.raw == expected.headers.raw  # same names, values and order
    assert msgspec.json.decode(got.content)  # a JSON document, not an empty body
