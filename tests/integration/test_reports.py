"""The weekly report end to end on both databases, over a generated fleet with injected regressions,
an improvement, an applied recommendation that paid off, and a deployment that went quiet."""

from __future__ import annotations

import asyncio
import json
import random
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from advisor.domain.reports.delivery import DeliveryFailed, deliver, next_run, post_with_retries
from advisor.reports.weeks import IsoWeek
from advisor.settings import ReportSettings
from tests.unit.reports.test_context import make_report

WEEK = IsoWeek.parse("2026-W48")
RUNS_PER_WEEK = 10
APPLIED_AT = WEEK.previous().start + timedelta(days=3)  # Thursday of W47

_A10G = {"hardware": "nvidia-a10g", "model": "meta-llama/Llama-3.1-8B-Instruct", "quantization": "bf16"}
_H100 = {"hardware": "nvidia-h100-sxm", "model": "meta-llama/Llama-3.1-8B-Instruct", "quantization": "fp8"}
_BASE_METRICS = {"ttft_p50": 110.0, "ttft_p99": 190.0, "itl_p50": 30.0, "itl_p99": 33.0, "decode": 32.8}

#: name: (hardware, noise, {week: {metric: factor}}, {week: engine-arg or version overrides})
FLEET: dict[str, dict[str, Any]] = {
    "stable-a10g": {"setup": _A10G, "noise": 0.06},
    "stable-h100": {"setup": _H100, "noise": 0.10, "scale": {"decode": 3.0, "itl_p50": 1 / 3, "itl_p99": 1 / 3}},
    "ttft-regress": {
        "setup": _A10G,
        "noise": 0.05,
        "this_week": {"ttft_p50": 1.5, "ttft_p99": 1.5},
        "this_setup": {"engine_args": {"max_num_batched_tokens": 512}},
    },
    "decode-regress": {
        "setup": _H100,
        "noise": 0.05,
        "scale": {"decode": 3.0, "itl_p50": 1 / 3, "itl_p99": 1 / 3},
        "this_week": {"decode": 0.7},
        "this_setup": {"runtime_version": "0.11.1"},
    },
    "itl-better": {"setup": _A10G, "noise": 0.05, "this_week": {"itl_p99": 0.6}},
    "quiet": {"setup": _A10G, "noise": 0.05, "quiet": True},
    "adopted": {"setup": _A10G, "noise": 0.05, "adopted": True},
}

EXPECTED_REGRESSIONS = {
    ("ttft-regress", "ttft_p50_ms"),
    ("ttft-regress", "ttft_p99_ms"),
    ("decode-regress", "decode_tok_s"),
}


def _run(name: str, spec: dict[str, Any], at: datetime, rng: random.Random) -> dict[str, Any]:
    this_week = at >= WEEK.start
    factors = {k: spec.get("scale", {}).get(k, 1.0) for k in _BASE_METRICS}
    if this_week:
        factors = {k: f * spec.get("this_week", {}).get(k, 1.0) for k, f in factors.items()}
    engine_args: dict[str, Any] = {
        "enable_chunked_prefill": True,
        "max_num_batched_tokens": 2048,
        "enable_prefix_caching": True,
    }
    setup: dict[str, Any] = {"runtime": "vllm", "runtime_version": "0.11.0", "gpu_count": 1, **spec["setup"]}
    workload: dict[str, Any] = {
        "num_requests": 200,
        "concurrency": 1,
        "prompt_tokens_mean": 512,
        "output_tokens_mean": 256,
    }
    if spec.get("adopted"):
        # A long shared system prompt without prefix caching until the advice was applied.
        workload.update(prompt_tokens_mean=3000, shared_prefix_tokens=2500)
        cached = at >= APPLIED_AT
        engine_args["enable_prefix_caching"] = cached
        factors["ttft_p50"] = factors["ttft_p99"] = 8.0 if not cached else 2.4
    if this_week and "this_setup" in spec:
        setup.update({k: v for k, v in spec["this_setup"].items() if k != "engine_args"})
        engine_args.update(spec["this_setup"].get("engine_args", {}))
    setup["engine_args"] = engine_args
    m = {k: v * factors[k] * (1 + spec["noise"] * rng.gauss(0, 1)) for k, v in _BASE_METRICS.items()}
    return {
        "deployment": name,
        "measured_at": at.isoformat(),
        "setup": setup,
        "workload": workload,
        "metrics": {
            "ttft_ms": {"p50": m["ttft_p50"], "p99": max(m["ttft_p99"], m["ttft_p50"])},
            "itl_ms": {"p50": m["itl_p50"], "p99": max(m["itl_p99"], m["itl_p50"])},
            "decode_tok_s": m["decode"],
            "requests_completed": 200,
        },
    }


def _generate(client: Any) -> dict[str, int]:
    """Three weeks of runs through POST /api/v1/runs (so each carries its recommendations)."""
    rng = random.Random(48)
    counts: dict[str, int] = {}
    client.put("/api/v1/deployments/ttft-regress", json={"slo": {"ttft_p99_ms": 400}})
    for name, spec in FLEET.items():
        for week in (WEEK.previous(2), WEEK.previous(), WEEK):
            if spec.get("quiet") and week == WEEK:
                continue
            for i in range(RUNS_PER_WEEK):
                at = week.start + timedelta(hours=1 + i * 16.5)
                response = client.post("/api/v1/runs", json=_run(name, spec, at, rng))
                assert response.status_code == 201, response.text
                counts[name] = counts.get(name, 0) + 1
    return counts


def _apply_prefix_caching(client: Any, db_url: str) -> int:
    """Mark the adopted deployment's enable-prefix-caching advice applied, as of W47's Thursday."""
    runs = client.get("/api/v1/runs", params={"deployment": "adopted", "limit": 200}).json()["items"]
    before = [r for r in runs if r["measured_at"] < APPLIED_AT.isoformat().replace("+00:00", "Z")]
    recs = client.get(f"/api/v1/runs/{before[0]['id']}/recommendations").json()
    rec = next(r for r in recs if r["action"] == "enable-prefix-caching")
    assert client.patch(f"/api/v1/recommendations/{rec['id']}", json={"status": "applied"}).status_code == 200

    async def backdate() -> None:  # the PATCH stamps "now"; the fleet lives in November
        engine = create_async_engine(db_url)
        try:
            async with engine.begin() as conn:
                await conn.execute(
                    text("UPDATE recommendation SET status_changed_at = :at WHERE id = :id"),
                    {"at": APPLIED_AT.replace(tzinfo=None) if "sqlite" in db_url else APPLIED_AT, "id": rec["id"]},
                )
        finally:
            await engine.dispose()

    asyncio.run(backdate())
    return int(rec["id"])


def test_weekly_report_over_a_generated_fleet(client: Any, clean_db: str) -> None:
    _generate(client)
    rec_id = _apply_prefix_caching(client, clean_db)

    response = client.get("/api/v1/reports/weekly", params={"week": str(WEEK), "format": "json"})
    assert response.status_code == 200, response.text
    report = response.json()
    assert report["week"] == "2026-W48" and report["previous_week"] == "2026-W47"

    # Exactly the injected regressions, with their size, runs and what changed in the setup.
    assert {(r["deployment"], r["metric"]) for r in report["regressions"]} == EXPECTED_REGRESSIONS
    by_key = {(r["deployment"], r["metric"]): r for r in report["regressions"]}
    ttft = by_key[("ttft-regress", "ttft_p99_ms")]
    assert ttft["change"] == pytest.approx(0.5, abs=0.12)
    assert len(ttft["runs"]) == 2 * RUNS_PER_WEEK
    assert {c["field"]: (c["last_week"], c["this_week"]) for c in ttft["setup_changes"]} == {
        "engine_args.max_num_batched_tokens": (2048, 512)
    }
    assert ttft["slo"] == 400
    decode = by_key[("decode-regress", "decode_tok_s")]
    assert decode["change"] == pytest.approx(-0.3, abs=0.08)
    assert [c["field"] for c in decode["setup_changes"]] == ["runtime_version"]
    assert ("itl-better", "itl_p99_ms") in {(r["deployment"], r["metric"]) for r in report["improvements"]}

    # The applied advice paid off on its own metric, by the same noise test.
    assert len(report["adoption"]) == 1
    adoption = report["adoption"][0]
    assert (adoption["recommendation_id"], adoption["deployment"], adoption["action"]) == (
        rec_id,
        "adopted",
        "enable-prefix-caching",
    )
    assert adoption["metric"] == "ttft_ms.p50" and adoption["verdict"] == "better"
    assert adoption["change"] < -0.5
    assert adoption["runs_before"] >= 8 and adoption["runs_after"] >= 8

    # Open recommendations from each deployment's latest run, ranked by total expected gain.
    top = report["top_recommendations"]
    assert top and top == sorted(top, key=lambda t: -t["total_expected_gain"])
    assert all(t["deployments"] for t in top)
    assert "quiet" not in {d for t in top for d in t["deployments"]}  # no run this week

    fleet = {m["name"]: m for m in report["fleet"]}
    assert fleet["deployments"]["this_week"] == len(FLEET) - 1 and fleet["deployments"]["last_week"] == len(FLEET)
    assert fleet["runs"]["this_week"] == (len(FLEET) - 1) * RUNS_PER_WEEK
    # ttft-regress has an SLO (p99 ≤ 400 ms): met last week (~190 ms), and still this week (~285 ms).
    assert fleet["slo_attainment"]["this_week"] == 1.0
    assert fleet["decode_efficiency_median"]["this_week"] is not None
    assert [t["week"] for t in report["trend"]][-2:] == ["2026-W47", "2026-W48"]
    assert {h["hardware"] for h in report["hardware"]} == {"nvidia-a10g", "nvidia-h100-sxm"}
    assert report["data_quality"]["deployments_without_runs"] == ["quiet"]
    assert report["data_quality"]["runs_not_analysed"] == 0

    # The other formats and the page render the same report.
    md = client.get("/api/v1/reports/weekly", params={"week": str(WEEK), "format": "md"})
    assert md.headers["content-type"].startswith("text/markdown")
    assert "| ttft-regress | ttft_p99_ms |" in md.text
    html = client.get("/api/v1/reports/weekly", params={"week": str(WEEK), "format": "html"})
    assert html.headers["content-type"].startswith("text/html")
    assert 'data-deployment="decode-regress"' in html.text and "<svg" in html.text
    page = client.get(f"/reports/{WEEK}")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert 'data-deployment="decode-regress"' in page.text and 'data-week="2026-W48"' in page.text
    # The page sits in the web UI's layout; the API's HTML is a standalone document.
    assert 'href="/static/advisor.css"' in page.text and page.text.count("<main") == 1
    assert "/static/" not in html.text

    # One snapshot per week: regenerating it is idempotent (same row, same bytes).
    snapshots = client.get("/api/v1/reports").json()
    assert [(s["week"], s["format"]) for s in snapshots] == [("2026-W48", "json")]
    again = client.get("/api/v1/reports/weekly", params={"week": str(WEEK), "refresh": "true"})
    assert again.content == response.content
    after = client.get("/api/v1/reports").json()
    assert len(after) == 1 and after[0]["created_at"] == snapshots[0]["created_at"]
    assert after[0]["bytes"] == snapshots[0]["bytes"]


def test_a_stable_fleet_has_no_regression(client: Any, clean_db: str) -> None:
    rng = random.Random(7)
    for name in ("calm-1", "calm-2", "calm-3"):
        for week in (WEEK.previous(), WEEK):
            for i in range(12):
                at = week.start + timedelta(hours=2 + i * 13)
                run = _run(name, {"setup": _A10G, "noise": 0.12}, at, rng)
                assert client.post("/api/v1/runs", json=run).status_code == 201
    report = client.get("/api/v1/reports/weekly", params={"week": str(WEEK)}).json()
    assert report["regressions"] == [] and report["improvements"] == []
    assert {m["verdict"] for d in report["deployments"] for m in d["metrics"]} == {"same"}


def test_the_current_week_is_live_and_not_stored(client: Any, clean_db: str) -> None:
    current = IsoWeek.of(datetime.now(WEEK.start.tzinfo))
    assert client.get("/api/v1/reports/weekly", params={"week": str(current)}).status_code == 200
    assert client.get("/api/v1/reports").json() == []
    # With no week, the last complete one, which is stored.
    body = client.get("/api/v1/reports/weekly").json()
    assert body["week"] == str(current.previous())
    assert [s["week"] for s in client.get("/api/v1/reports").json()] == [str(current.previous())]


def test_the_page_and_the_standalone_html_keep_their_styles_under_the_csp(client: Any, clean_db: str) -> None:
    page = client.get(f"/reports/{WEEK}")
    assert page.status_code == 200
    assert "<style" not in page.text and "script-src 'self'" in page.headers["content-security-policy"]
    assert 'href="/static/advisor.css"' in page.text
    assert "#weekly-report .worse" in client.get("/static/advisor.css").text
    standalone = client.get("/api/v1/reports/weekly", params={"week": str(WEEK), "format": "html"})
    assert "<style>" in standalone.text and "<script" not in standalone.text
    policy = standalone.headers["content-security-policy"]
    assert "style-src 'unsafe-inline'" in policy and "script" not in policy and "default-src 'none'" in policy


def test_bad_week_and_format_are_422(client: Any, clean_db: str) -> None:
    response = client.get("/api/v1/reports/weekly", params={"week": "2026-48"})
    assert response.status_code == 422
    assert response.json()["field"] == "week"
    assert client.get("/reports/2026-W99").status_code == 422
    assert client.get("/api/v1/reports/weekly", params={"format": "pdf"}).status_code == 400


# ------------------------------------------------------------------------------------------
# Delivery to chat, against a real HTTP receiver on 127.0.0.1 that fails the first attempts


class _Receiver(BaseHTTPRequestHandler):
    failures = 0
    status = 503
    bodies: list[dict[str, Any]] = []
    attempts = 0

    def do_POST(self) -> None:
        cls = type(self)
        cls.attempts += 1
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if cls.attempts <= cls.failures:
            self.send_response(cls.status)
            self.end_headers()
            return
        cls.bodies.append(json.loads(body))
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[tuple[str, type[_Receiver]]]:
    handler = type("Receiver", (_Receiver,), {"bodies": [], "attempts": 0, "failures": 0})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", handler
    finally:
        server.shutdown()
        server.server_close()


def test_webhook_retries_with_backoff_then_delivers(receiver: tuple[str, type[_Receiver]]) -> None:
    url, handler = receiver
    handler.failures = 2
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    attempts = asyncio.run(post_with_retries(url, {"text": "hello"}, retries=3, backoff=0.5, sleep=sleep))
    assert attempts == 3 and handler.attempts == 3
    assert handler.bodies == [{"text": "hello"}]
    assert len(waits) == 2 and 0.5 <= waits[0] < 0.7 and 1.0 <= waits[1] < 1.3  # exponential, with jitter


def test_webhook_gives_up_after_the_retries(receiver: tuple[str, type[_Receiver]]) -> None:
    url, handler = receiver
    handler.failures = 10

    async def sleep(seconds: float) -> None:
        return None

    with pytest.raises(DeliveryFailed, match="after 3 attempts: HTTP 503"):
        asyncio.run(post_with_retries(url, {"text": "x"}, retries=2, backoff=0.01, sleep=sleep))
    assert handler.attempts == 3


def test_webhook_does_not_retry_a_client_error(receiver: tuple[str, type[_Receiver]]) -> None:
    url, handler = receiver
    handler.failures, handler.status = 10, 404
    with pytest.raises(DeliveryFailed, match="HTTP 404"):
        asyncio.run(post_with_retries(url, {"text": "x"}, retries=3, backoff=0.01))
    assert handler.attempts == 1


def test_deliver_posts_the_slack_summary(receiver: tuple[str, type[_Receiver]]) -> None:
    url, handler = receiver
    handler.failures = 1
    settings = ReportSettings(webhook_url=url, webhook_backoff_s=0.01, public_url="https://advisor.example")
    report = make_report()
    assert asyncio.run(deliver(report, settings)) == 2
    (body,) = handler.bodies
    assert body["text"].startswith("*Weekly fleet report 2026-W48* (<https://advisor.example/reports/2026-W48|")
    assert "regressions" in body["text"]
    assert asyncio.run(deliver(report, ReportSettings(webhook_url=None))) == 0


def test_an_unreachable_webhook_fails_after_retries() -> None:
    async def sleep(seconds: float) -> None:
        return None

    transport = httpx.MockTransport(lambda request: (_ for _ in ()).throw(httpx.ConnectError("refused")))

    async def go() -> None:
        async with httpx.AsyncClient(transport=transport) as client:
            await post_with_retries(
                "http://hook.invalid/", {"text": "x"}, retries=2, backoff=0, client=client, sleep=sleep
            )

    with pytest.raises(DeliveryFailed, match="after 3 attempts: ConnectError"):
        asyncio.run(go())


def test_next_scheduled_build() -> None:
    settings = ReportSettings(schedule_enabled=True, schedule_weekday=1, schedule_time="06:00")
    tuesday = datetime(2026, 12, 1, 19, 0, tzinfo=WEEK.start.tzinfo)
    assert next_run(tuesday, settings) == datetime(2026, 12, 7, 6, 0, tzinfo=WEEK.start.tzinfo)
    monday_early = datetime(2026, 12, 7, 5, 59, tzinfo=WEEK.start.tzinfo)
    assert next_run(monday_early, settings) == datetime(2026, 12, 7, 6, 0, tzinfo=WEEK.start.tzinfo)
    assert next_run(datetime(2026, 12, 7, 6, 0, tzinfo=WEEK.start.tzinfo), settings).day == 14


# ------------------------------------------------------------------------------------------
# The CLI: over HTTP by default, on the database with --db


def test_cli_fetches_the_report_over_http(client: Any, clean_db: str, tmp_path: Any) -> None:
    from click.testing import CliRunner

    from advisor.cli.report import report_group
    from advisor.client import Injected

    rng = random.Random(1)
    for i in range(3):
        client.post(
            "/api/v1/runs", json=_run("cli-dep", {"setup": _A10G, "noise": 0.05}, WEEK.start + timedelta(hours=i), rng)
        )
    runner = CliRunner()
    result = runner.invoke(
        report_group, ["weekly", "--week", str(WEEK)], obj=Injected(advisor=client), catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    assert result.output.startswith("# Weekly fleet report 2026-W48")
    assert "cli-dep" in result.output
    out = tmp_path / "w48.json"
    result = runner.invoke(
        report_group,
        ["weekly", "--week", str(WEEK), "--format", "json", "--out", str(out)],
        obj=Injected(advisor=client),
    )
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_bytes())["week"] == "2026-W48"
    bad = runner.invoke(report_group, ["weekly", "--week", "48"], obj=Injected(advisor=client))
    assert bad.exit_code == 4 and "week" in bad.output


def test_cli_builds_on_the_database(
    client: Any, clean_db: str, monkeypatch: pytest.MonkeyPatch, receiver: tuple[str, type[_Receiver]]
) -> None:
    from click.testing import CliRunner

    from advisor.cli.report import report_group
    from advisor.settings import get_settings

    rng = random.Random(2)
    for i in range(3):
        client.post(
            "/api/v1/runs", json=_run("db-dep", {"setup": _H100, "noise": 0.05}, WEEK.start + timedelta(hours=i), rng)
        )
    url, handler = receiver
    monkeypatch.setenv("ADVISOR_DATABASE_URL", clean_db)
    monkeypatch.setenv("ADVISOR_REPORT_WEBHOOK_URL", url)
    get_settings.cache_clear()
    try:
        result = CliRunner().invoke(
            report_group, ["weekly", "--db", "--week", str(WEEK), "--format", "html", "--deliver"]
        )
    finally:
        get_settings.cache_clear()
    assert result.exit_code == 0, result.output
    assert 'data-week="2026-W48"' in result.output and "db-dep" in result.output
    assert len(handler.bodies) == 1 and "2026-W48" in handler.bodies[0]["text"]
    # The complete week was stored as a snapshot, which the API now lists.
    assert [s["week"] for s in client.get("/api/v1/reports").json()] == ["2026-W48"]


def test_the_schedule_builds_and_delivers_each_week(receiver: tuple[str, type[_Receiver]]) -> None:
    from advisor.domain.reports.delivery import schedule_loop

    url, handler = receiver
    settings = ReportSettings(webhook_url=url, schedule_enabled=True, schedule_time="06:00")
    now = datetime(2026, 11, 30, 5, 0, tzinfo=WEEK.start.tzinfo)
    waits: list[float] = []
    builds: list[str] = []

    async def sleep(seconds: float) -> None:
        if len(waits) == 2:
            raise asyncio.CancelledError  # stop after two weeks
        waits.append(seconds)

    async def build() -> Any:
        builds.append("built")
        if len(builds) == 1:
            raise RuntimeError("database away")  # a bad week is logged; the loop goes on
        return make_report()

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(schedule_loop(build, settings, sleep=sleep, clock=lambda: now))
    assert waits == [3600.0, 3600.0]  # Monday 05:00 → 06:00
    assert builds == ["built", "built"]
    assert len(handler.bodies) == 1 and handler.bodies[0]["text"].startswith("*Weekly fleet report 2026-W48*")


def test_the_schedule_hook_is_off_by_default_and_starts_when_enabled(settings: Any) -> None:
    from litestar.testing import TestClient

    from advisor.server import create_app
    from advisor.settings import Settings

    with TestClient(app=create_app(settings)) as tc:
        assert tc.app.state.get("report_schedule_task") is None
    enabled = Settings(db=settings.db, server=settings.server, report=ReportSettings(schedule_enabled=True))
    with TestClient(app=create_app(enabled)) as tc:
        task = tc.app.state.get("report_schedule_task")
        assert task is not None and not task.done()
    assert task.cancelled()


def test_token_mode_guards_the_page_and_the_api(settings: Any) -> None:
    from litestar.testing import TestClient

    from advisor.server import create_app
    from advisor.settings import AuthSettings, Settings

    guarded = Settings(db=settings.db, server=settings.server, auth=AuthSettings(mode="token"))
    with TestClient(app=create_app(guarded)) as tc:
        page = tc.get(f"/reports/{WEEK}", follow_redirects=False)
        assert page.status_code == 303 and page.headers["location"] == f"/signin?next=/reports/{WEEK}"
        assert tc.get("/api/v1/reports/weekly").status_code == 401


def test_a_snapshot_of_an_older_shape_is_rebuilt(client: Any, clean_db: str) -> None:
    assert client.get("/api/v1/reports/weekly", params={"week": str(WEEK)}).status_code == 200

    async def corrupt() -> None:
        engine = create_async_engine(clean_db)
        try:
            async with engine.begin() as conn:
                await conn.execute(text("UPDATE report SET content = :c"), {"c": b'{"week": "2026-W48"}'})
        finally:
            await engine.dispose()

    asyncio.run(corrupt())
    again = client.get("/api/v1/reports/weekly", params={"week": str(WEEK)})
    assert again.status_code == 200 and again.json()["previous_week"] == "2026-W47"
    assert client.get("/api/v1/reports").json()[0]["bytes"] > 100  # stored again, whole


def test_bulk_loaded_runs_count_with_their_recommendations(client: Any, clean_db: str) -> None:
    """Every stored run has its recommendations: runs the background has not analysed yet are
    analysed before the week is built."""
    rng = random.Random(7)
    spec = {"setup": _A10G, "noise": 0.05}
    docs = [_run("bulk-fleet", spec, WEEK.start + timedelta(hours=3 * i), rng) for i in range(10)]
    for doc in docs:  # a long shared system prompt, prefix caching off: a finding on every run
        doc["workload"].update(prompt_tokens_mean=3000, shared_prefix_tokens=2500)
        doc["setup"]["engine_args"]["enable_prefix_caching"] = False
        doc["metrics"]["ttft_ms"] = {"p50": 900.0, "p99": 1200.0}
    loaded = client.post("/api/v1/runs/bulk", content="\n".join(json.dumps(d) for d in docs).encode())
    assert loaded.status_code == 200 and loaded.json()["created"] == 10, loaded.text
    report = client.get("/api/v1/reports/weekly", params={"week": str(WEEK), "refresh": "true"}).json()
    assert report["data_quality"]["runs_not_analysed"] == 0
    concerned = {d for rec in report["top_recommendations"] for d in rec["deployments"]}
    assert "bulk-fleet" in concerned
