"""The engineers' flows in a real Chromium against a real server, on SQLite and Postgres."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import FIXTURES
from tests.e2e.web.conftest import Server

pytestmark = pytest.mark.e2e

VLLM_BENCH = FIXTURES / "ingest" / "vllm_bench" / "vllm_bench_serve.json"
DOCS_IMG = Path(__file__).resolve().parents[3] / "docs" / "img"


def _fill_setup(page: Any, deployment: str) -> None:
    page.fill("#deployment", deployment)
    page.select_option("#runtime", "vllm")
    page.fill("#hardware", "nvidia-h100-sxm")
    page.fill("#model", "meta-llama/Llama-3.1-8B-Instruct")
    page.fill("#quantization", "bf16")


def _submit_bench(page: Any, server: Server, deployment: str = "chat-prod") -> None:
    page.goto(server.url + "/runs/new")
    _fill_setup(page, deployment)
    page.set_input_files("#file", str(VLLM_BENCH))
    page.fill("#slo\\.ttft_p99_ms", "200")
    page.click("button[type=submit].primary")
    page.wait_for_url("**/runs/*")


def _shot(page: Any, name: str) -> None:
    """The docs' screenshots (docs/img/web-*.png) come from these flows on SQLite."""
    DOCS_IMG.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(DOCS_IMG / f"web-{name}.png"), full_page=True)


def test_dashboard_opens_empty_then_lists_the_deployment(server: Server, page: Any) -> None:
    page.goto(server.url + "/")
    assert page.title() == "Fleet · advisor"
    assert page.locator(".empty").first.is_visible()
    _submit_bench(page, server)
    page.goto(server.url + "/")
    row = page.locator('tr[data-deployment="chat-prod"]')
    assert row.count() == 1
    assert row.locator("[data-verdict]").inner_text() in {"pass", "warn", "fail"}
    assert row.locator("meter").count() >= 1  # decode efficiency against its ceiling
    assert page.console_errors == []  # no CSP violation, no script error


def test_upload_a_vllm_bench_file_and_read_the_result(server: Server, page: Any) -> None:
    _submit_bench(page, server)
    assert page.title().startswith("Run #")
    recs = page.locator("article.rec[data-action][data-severity]")
    assert recs.count() >= 1
    severities = [recs.nth(i).get_attribute("data-severity") for i in range(recs.count())]
    order = ["critical", "severe", "moderate", "low", "none"]
    assert severities == sorted(severities, key=order.index)  # ranked: most severe first
    assert recs.first.locator("pre code").inner_text().strip()  # the fix, ready to copy
    chart = page.locator('svg[data-chart="roofline"]')
    assert chart.is_visible()
    assert chart.locator('[data-phase="decode"] circle.measured').count() == 1
    assert chart.locator('[data-roof="bandwidth"]').count() == 1
    whatif = page.locator("table[data-whatif]")
    assert whatif.locator('tr[data-whatif-kind="quantization"]').count() >= 1
    assert whatif.locator('tr[data-whatif-kind="hardware"]').count() >= 1
    # Mark the first recommendation applied, with a note.
    first = recs.first
    rec_id = first.get_attribute("id")
    first.locator("input[name=note]").fill("raised --num-prompts to 1000")
    first.locator("button[value=applied]").click()
    page.wait_for_load_state()
    assert page.locator(f"#{rec_id}").get_attribute("data-status") == "applied"
    assert "raised --num-prompts" in page.locator(f"#{rec_id}").inner_text()
    assert page.console_errors == []


def test_dashboard_leads_to_the_deployment_and_its_trends(server: Server, page: Any) -> None:
    _submit_bench(page, server)
    # A second run of the same deployment, typed in, so the trend has two points.
    page.goto(server.url + "/runs/new")
    _fill_setup(page, "chat-prod")
    page.click("details summary")
    page.fill("#metrics\\.ttft_ms\\.p50", "60")
    page.fill("#metrics\\.ttft_ms\\.p99", "310")
    page.fill("#metrics\\.itl_ms\\.p99", "40")
    page.fill("#metrics\\.decode_tok_s", "110")
    page.fill("#workload\\.prompt_tokens_mean", "1000")
    page.fill("#workload\\.concurrency", "8")
    page.click("button[type=submit].primary")
    page.wait_for_url("**/runs/*")
    page.goto(server.url + "/")
    page.click('tr[data-deployment="chat-prod"] th a')
    page.wait_for_url("**/deployments/chat-prod")
    charts = page.locator('svg[data-chart="trend"]')
    assert charts.count() == 4
    ttft_p99 = charts.nth(1)
    assert ttft_p99.locator("circle").count() == 2
    assert ttft_p99.locator('[data-slo="ttft_p99_ms"]').count() == 1  # the SLO from the first form
    # The SLO editor stores new objectives.
    page.fill("#slo\\.itl_p99_ms", "50")
    page.click('form[data-form="slo"] button[type=submit]')
    page.wait_for_url("**/deployments/chat-prod")
    assert page.locator('svg[data-chart="trend"]').nth(2).locator('[data-slo="itl_p99_ms"]').count() == 1


def test_a_malformed_upload_shows_its_field_error(server: Server, page: Any, tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"date": "2025-01-01", "completed": ')
    page.goto(server.url + "/runs/new")
    _fill_setup(page, "chat-prod")
    page.set_input_files("#file", str(broken))
    page.click("button[type=submit].primary")
    error = page.locator('[data-error-for="file"]')
    assert error.is_visible()
    assert error.inner_text().strip()
    assert page.locator("#file").get_attribute("aria-invalid") == "true"
    assert page.input_value("#deployment") == "chat-prod"  # what was typed is kept
    assert "/runs/new" in page.url


def test_a_script_in_user_text_stays_inert(server: Server, page: Any) -> None:
    # Deployment names are restricted, but labels, notes and file contents are free text: a script
    # in a recommendation note, rendered on the run page, must stay text.
    payload = "<script>window.__xss = 1</script><img src=x onerror=window.__xss=2>"
    _submit_bench(page, server)
    first = page.locator("article.rec").first
    first.locator("input[name=note]").fill(payload)
    first.locator("button[value=dismissed]").click()
    page.wait_for_load_state()
    assert payload in page.locator("article.rec").first.inner_text()
    assert page.evaluate("window.__xss") is None
    page.goto(server.url + "/runs/new")
    page.fill("#deployment", payload)
    page.click("details summary")
    page.fill("#metrics\\.ttft_ms\\.p50", "10")
    page.click("button[type=submit].primary")
    assert page.locator('[data-error-for="deployment"]').is_visible()
    assert page.input_value("#deployment") == payload
    assert page.evaluate("window.__xss") is None


def test_token_mode_asks_to_sign_in_and_respects_the_role(token_server: Server, page: Any) -> None:
    reader = token_server.cli("tokens", "create", "alice", "--role", "read").strip().splitlines()[0]
    submitter = token_server.cli("tokens", "create", "bob", "--role", "submit").strip().splitlines()[0]
    page.goto(token_server.url + "/runs/new")
    assert page.url == token_server.url + "/signin?next=/runs/new", page.url
    assert page.title() == "Sign in · advisor"
    page.fill("#token", "not-a-token")
    page.click("button[type=submit]")
    assert page.locator('[data-error-for="token"]').is_visible()
    page.fill("#token", reader)
    page.click("button[type=submit]")
    page.wait_for_url("**/runs/new")
    assert page.locator("form.run-form").count() == 0  # read-only: no submit form
    assert page.locator("a[href='/runs/new']").count() == 0
    cookies = {c["name"]: c for c in page.context.cookies()}
    session = cookies["advisor_session"]
    assert session["httpOnly"] and session["sameSite"] == "Lax"
    assert reader not in json.dumps(page.context.cookies())  # the cookie never holds the token
    page.click("text=Sign out")
    page.wait_for_url("**/signin")
    page.goto(token_server.url + "/signin?next=/runs/new")
    page.fill("#token", submitter)
    page.click("button[type=submit]")
    page.wait_for_url("**/runs/new")
    assert page.locator("form.run-form").count() == 1
    if "sqlite" in token_server.database_url:
        page.goto(token_server.url + "/signin")
        _shot(page, "signin")
    # The API itself still wants its bearer token: a page session is not an API credential.
    api = httpx.get(token_server.url + "/api/v1/runs", cookies={"advisor_session": session["value"]})
    assert api.status_code == 401
