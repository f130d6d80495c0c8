"""A small fleet, every page visited in the browser, and the docs' screenshots (docs/img/web-*.png).

The fleet is seeded through the API, as CI would: a deployment with a history and a regression,
a llama.cpp laptop and a typed-in run. Each page must load without a console error (a CSP
violation is one); the screenshots are taken on SQLite only.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from tests.conftest import FIXTURES
from tests.e2e.web.conftest import Server
from tests.e2e.web.test_pages_in_browser import DOCS_IMG

pytestmark = pytest.mark.e2e


def _history_run(i: int, ttft_p99: float) -> dict[str, Any]:
    start = datetime(2026, 11, 2, 8, tzinfo=UTC)
    return {
        "deployment": "chat-prod",
        "measured_at": (start + timedelta(days=i)).isoformat().replace("+00:00", "Z"),
        "labels": {"git_sha": f"c0ffee{i}"},
        "setup": {
            "runtime": "vllm",
            "hardware": "nvidia-l40s",
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "quantization": "bf16",
            "engine_args": {"enable_prefix_caching": True, "max_num_batched_tokens": 2048},
        },
        "workload": {"num_requests": 1000, "concurrency": 8, "prompt_tokens_mean": 1500, "output_tokens_mean": 200},
        "metrics": {
            "ttft_ms": {"p50": ttft_p99 * 0.45, "p99": ttft_p99},
            "itl_ms": {"p50": 24.0 + i % 3, "p99": 41.0 + i % 4},
            "decode_tok_s": 38.0 - (i % 3),
            "prefill_tok_s": 6000.0,
        },
    }


def _seed(server: Server) -> int:
    with httpx.Client(base_url=server.url + "/api/v1", timeout=60) as api:
        for i in range(8):
            api.post("/runs", json=_history_run(i, 420.0 + 15 * (i % 3))).raise_for_status()
        last = api.post("/runs", json=_history_run(8, 1300.0))  # the regression
        last.raise_for_status()
        api.put("/deployments/chat-prod", json={"slo": {"ttft_p99_ms": 800, "itl_p99_ms": 60}}).raise_for_status()
        laptop = (FIXTURES / "ingest" / "llama_bench" / "llama_bench.json").read_bytes()
        api.post("/runs?deployment=laptop", content=laptop).raise_for_status()
        bench = (FIXTURES / "ingest" / "vllm_bench" / "vllm_bench_serve.json").read_bytes()
        api.post(
            "/runs?deployment=batch-h100&hardware=nvidia-h100-sxm&quantization=bf16&slo=ttft_p99_ms=300", content=bench
        ).raise_for_status()
        return int(last.json()["run"]["id"])


def test_every_page_in_the_browser(server: Server, page: Any) -> None:
    regressed = _seed(server)
    shoot = "sqlite" in server.database_url
    visits = [
        ("dashboard", "/", "table[data-table=deployments]"),
        ("run", f"/runs/{regressed}", 'svg[data-chart="roofline"]'),
        ("deployment", "/deployments/chat-prod", 'svg[data-chart="trend"]'),
        ("compare", f"/compare?a={regressed - 1}&b={regressed}", "table[data-table=moves]"),
        ("new-run", "/runs/new", "form.run-form"),
        ("rules", "/rules", "table[data-table=rules]"),
        ("rule", "/rules/REG003", "h1"),
        ("report", "/reports/2026-W46", "#weekly-report"),  # the week of the regression
    ]
    for name, path, selector in visits:
        page.goto(server.url + path)
        assert page.locator(selector).first.is_visible(), name
        if shoot:
            DOCS_IMG.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(DOCS_IMG / f"web-{name}.png"), full_page=True)
    assert page.console_errors == []
    # The regression is marked on the deployment's trend charts, and the run names it.
    page.goto(server.url + "/deployments/chat-prod")
    assert page.locator('svg[data-chart="trend"] [data-mark="regression"]').count() >= 1
    page.goto(server.url + f"/runs/{regressed}")
    assert page.locator('article.rec[data-action="investigate-regression"]').count() == 1
    # Printing drops the navigation and the buttons.
    page.emulate_media(media="print")
    assert not page.locator("header.top").is_visible()
