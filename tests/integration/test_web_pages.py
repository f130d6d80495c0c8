"""The web pages through Litestar's TestClient, on SQLite and Postgres: every page, escaping, CSRF,
security headers, form errors and token mode."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from typing import Any

import pytest
from litestar import Litestar, Response, get
from litestar.testing import TestClient

from advisor.settings import AuthSettings, DatabaseSettings, ServerSettings, Settings
from tests.conftest import FIXTURES

pytestmark = pytest.mark.db

BENCH = (FIXTURES / "ingest" / "vllm_bench" / "vllm_bench_serve.json").read_bytes()
SETUP = {
    "deployment": "chat-prod",
    "runtime": "vllm",
    "hardware": "nvidia-h100-sxm",
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "quantization": "bf16",
}


def _csrf(client: Any, path: str = "/runs/new") -> str:
    page = client.get(path)
    assert page.status_code == 200, page.text
    match = re.search(r'name="_csrf_token" value="([^"]+)"', page.text)
    assert match, "the form carries no CSRF token"
    return match.group(1)


def _submit(client: Any, fields: dict[str, str], file: bytes | None = BENCH) -> Any:
    files = {"file": ("bench.json", file, "application/json")} if file is not None else None
    return client.post("/runs/new", data={"_csrf_token": _csrf(client), **fields}, files=files, follow_redirects=False)


def test_every_page_renders(client: Any) -> None:
    assert client.get("/").status_code == 200
    response = _submit(client, {**SETUP, "slo.ttft_p99_ms": "200"})
    assert response.status_code == 303, response.text
    run_path = response.headers["location"]
    assert re.fullmatch(r"/runs/\d+", run_path)
    run_id = int(run_path.rsplit("/", 1)[1])
    run = client.get(run_path)
    assert run.status_code == 200
    assert 'data-chart="roofline"' in run.text
    assert "data-whatif" in run.text
    assert re.search(r'data-action="[a-z-]+" data-severity="(critical|severe|moderate|low|none)"', run.text)
    dashboard = client.get("/")
    assert 'data-deployment="chat-prod"' in dashboard.text
    assert f'href="/runs/{run_id}"' in dashboard.text
    deployment = client.get("/deployments/chat-prod")
    assert deployment.status_code == 200
    assert deployment.text.count('data-chart="trend"') == 4
    assert 'data-slo="ttft_p99_ms"' in deployment.text
    assert client.get(f"/compare?a={run_id}&b={run_id}").status_code == 200
    assert client.get("/compare").status_code == 200
    rules = client.get("/rules")
    assert rules.status_code == 200 and 'data-rule="PRE002"' in rules.text
    assert "Why is this bad?" in client.get("/rules/PRE002").text
    css = client.get("/static/advisor.css")
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")


def test_missing_things_are_html_404_pages(client: Any) -> None:
    for path in ("/runs/987654", "/deployments/nope", "/rules/NOPE999"):
        response = client.get(path)
        assert response.status_code == 404, path
        assert response.headers["content-type"].startswith("text/html")
        assert 'data-status="404"' in response.text


def test_security_headers_on_pages_and_api(client: Any) -> None:
    for path in ("/", "/api/v1/rules"):
        headers = client.get(path).headers
        assert "script-src 'self'" in headers["content-security-policy"]
        assert "frame-ancestors 'none'" in headers["content-security-policy"]
        assert "unsafe-inline" not in headers["content-security-policy"]
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["referrer-policy"]
    # Litestar's OpenAPI UI boots with an inline script: /schema gets a policy that lets it run.
    assert "frame-ancestors 'none'" in client.get("/schema").headers["content-security-policy"]
    # No inline script anywhere in the pages (the CSP would block it).
    assert not re.search(r"<script(?![^>]*\bsrc=)[^>]*>", client.get("/runs/new").text)


def test_forms_need_the_csrf_token_but_the_api_does_not(client: Any) -> None:
    refused = client.post("/runs/new", data=SETUP, files={"file": ("b.json", BENCH, "application/json")})
    assert refused.status_code == 403
    assert client.post("/api/v1/runs?deployment=chat-prod", content=BENCH).status_code == 201


def test_user_text_is_escaped(client: Any) -> None:
    response = _submit(client, SETUP)
    run_path = response.headers["location"]
    page = client.get(run_path).text
    rec_id = re.search(r'id="rec-(\d+)"', page).group(1)  # type: ignore[union-attr]
    script = "<script>alert(1)</script>"
    client.post(
        f"/recommendations/{rec_id}/status",
        data={"_csrf_token": _csrf(client, run_path), "status": "dismissed", "note": script},
    )
    page = client.get(run_path).text
    assert script not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert 'data-status="dismissed"' in page
    # Rejected input echoed back into the form is escaped too.
    echoed = _submit(client, {"deployment": script, "metrics.ttft_ms.p50": "10"}, file=None)
    assert echoed.status_code == 422
    assert script not in echoed.text and 'data-error-for="deployment"' in echoed.text


@pytest.mark.parametrize(
    ("fields", "file", "field"),
    [
        (SETUP, b'{"date": "2025-01-01", "completed": ', "file"),
        ({**SETUP, "hardware": "nvidia-h9999"}, BENCH, "hardware"),
        ({**SETUP, "hardware": '{"name": "box", '}, BENCH, "hardware"),
        ({**SETUP, "gpu_count": "two"}, BENCH, "gpu_count"),
        ({**SETUP, "metrics.ttft_ms.p50": "-5"}, None, "metrics.ttft_ms.p50"),
        ({**SETUP, "runtime": "nope"}, BENCH, "runtime"),
        (SETUP, None, "file"),
    ],
    ids=[
        "malformed-upload",
        "unknown-hardware",
        "broken-inline-spec",
        "not-a-number",
        "negative",
        "runtime",
        "no-data",
    ],
)
def test_form_errors_sit_next_to_their_field(
    client: Any, fields: dict[str, str], file: bytes | None, field: str
) -> None:
    response = _submit(client, fields, file)
    assert response.status_code == 422, response.text
    assert f'data-error-for="{field}"' in response.text
    assert f'value="{fields["deployment"]}"' in response.text  # the typed values are kept


def test_typed_metrics_are_stored_as_a_run(client: Any) -> None:
    fields = {**SETUP, "metrics.ttft_ms.p50": "120", "metrics.decode_tok_s": "95", "workload.prompt_tokens_mean": "900"}
    response = _submit(client, fields, file=None)
    assert response.status_code == 303, response.text
    run_id = response.headers["location"].rsplit("/", 1)[1]
    stored = client.get(f"/api/v1/runs/{run_id}").json()
    assert stored["metrics"]["ttft_ms"]["p50"] == 120
    assert stored["metrics"]["decode_tok_s"] == 95
    assert stored["setup"]["hardware"] == "nvidia-h100-sxm"


def test_the_slo_editor_stores_objectives(client: Any) -> None:
    _submit(client, SETUP)
    token = _csrf(client, "/deployments/chat-prod")
    saved = client.post(
        "/deployments/chat-prod/slo",
        data={"_csrf_token": token, "slo.ttft_p99_ms": "400", "slo.decode_tok_s_min": "30"},
        follow_redirects=False,
    )
    assert saved.status_code == 303
    assert client.get("/api/v1/deployments/chat-prod").json()["slo"] == {"ttft_p99_ms": 400, "decode_tok_s_min": 30}
    for value in ("soon", "-3"):
        bad = client.post("/deployments/chat-prod/slo", data={"_csrf_token": token, "slo.ttft_p99_ms": value})
        assert bad.status_code == 422 and 'data-error-for="slo.ttft_p99_ms"' in bad.text, value
    assert client.get("/api/v1/deployments/chat-prod").json()["slo"]["ttft_p99_ms"] == 400  # unchanged


@pytest.fixture
def token_client(clean_db: str) -> Iterator[Any]:
    from advisor.server import create_app

    settings = Settings(
        db=DatabaseSettings(url=clean_db), server=ServerSettings(log_level="warning"), auth=AuthSettings(mode="token")
    )
    with TestClient(app=create_app(settings)) as tc:
        yield tc


def _token(clean_db: str, name: str, role: str) -> str:
    from advisor.db.config import make_sqlalchemy_config
    from advisor.domain.auth import ApiTokenService

    async def create() -> str:
        config = make_sqlalchemy_config(DatabaseSettings(url=clean_db))
        async with ApiTokenService.new(config=config) as service:
            _, token = await service.create_token(name, role)  # type: ignore[arg-type]
        await config.get_engine().dispose()
        return token

    return asyncio.run(create())


def test_token_mode_signs_in_and_respects_roles(token_client: Any, clean_db: str) -> None:
    reader, submitter = _token(clean_db, "alice", "read"), _token(clean_db, "bob", "submit")
    redirect = token_client.get("/deployments/x?y=1", follow_redirects=False)
    assert redirect.status_code == 303
    assert redirect.headers["location"] == "/signin?next=/deployments/x%3Fy%3D1"
    signin = token_client.get("/signin?next=/runs/new")
    token = re.search(r'name="_csrf_token" value="([^"]+)"', signin.text).group(1)  # type: ignore[union-attr]
    wrong = token_client.post("/signin", data={"_csrf_token": token, "token": "nope", "next": "/"})
    assert wrong.status_code == 401 and 'data-error-for="token"' in wrong.text
    offsite = token_client.post(
        "/signin", data={"_csrf_token": token, "token": reader, "next": "//evil.example/"}, follow_redirects=False
    )
    assert offsite.status_code == 303 and offsite.headers["location"] == "/"  # never an open redirect
    cookie = offsite.headers["set-cookie"]
    assert "httponly" in cookie.lower() and "samesite=lax" in cookie.lower()
    assert reader not in cookie
    readonly = token_client.get("/runs/new")
    assert readonly.status_code == 403 and "run-form" not in readonly.text
    assert 'href="/runs/new"' not in token_client.get("/").text
    token_client.cookies.clear()
    token = _csrf(token_client, "/signin")
    token_client.post("/signin", data={"_csrf_token": token, "token": submitter, "next": "/"})
    assert "run-form" in token_client.get("/runs/new").text
    # A page session is no API credential.
    assert token_client.get("/api/v1/runs").status_code == 401


def test_the_secret_key_is_generated_once_and_kept_private(tmp_path: Any) -> None:
    from advisor.domain.web import resolve_secret_key
    from advisor.settings import WebSettings

    db = DatabaseSettings(url=f"sqlite+aiosqlite:///{tmp_path / 'advisor.db'}")
    first = resolve_secret_key(Settings(db=db))
    key_file = tmp_path / ".advisor-secret-key"  # beside the SQLite database
    assert key_file.read_text().strip() == first and len(first) >= 32
    assert key_file.stat().st_mode & 0o777 == 0o600
    assert resolve_secret_key(Settings(db=db)) == first  # a restart (or a second worker) reuses it
    assert resolve_secret_key(Settings(db=db, web=WebSettings(secret_key="from-the-env"))) == "from-the-env"
    elsewhere = tmp_path / "keys" / "advisor"
    elsewhere.parent.mkdir()
    assert resolve_secret_key(Settings(db=db, web=WebSettings(secret_key_file=elsewhere))) != first
    memory = DatabaseSettings(url="sqlite+aiosqlite:///:memory:")
    assert resolve_secret_key(Settings(db=memory)) != resolve_secret_key(Settings(db=memory))  # per process


def test_an_unexpected_failure_returns_the_form_not_a_500(client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from advisor.domain.runs.pipeline import RunPipeline

    async def broken(self: Any, request: Any) -> Any:
        raise RuntimeError("a parser bug")

    monkeypatch.setattr(RunPipeline, "submit", broken)
    response = _submit(client, SETUP)
    assert response.status_code == 422
    assert 'data-error-for="file"' in response.text and "nothing was stored" in response.text


def test_the_deployment_page_links_to_a_prefilled_form(client: Any) -> None:
    _submit(client, SETUP)
    page = client.get("/deployments/chat-prod").text
    assert 'href="/runs/new?deployment=chat-prod&amp;runtime=vllm"' in page
    form = client.get("/runs/new?deployment=chat-prod&runtime=vllm").text
    assert 'name="deployment" value="chat-prod"' in form
    assert '<option value="vllm" selected>' in form


def test_a_response_with_its_own_policy_keeps_it() -> None:
    from advisor.domain.web import SecurityHeadersMiddleware

    own = "default-src 'self'; style-src 'sha256-abc'"

    @get("/own", sync_to_thread=False)
    def with_policy() -> Response[str]:
        return Response("x", headers={"Content-Security-Policy": own})

    with TestClient(app=Litestar([with_policy], middleware=[SecurityHeadersMiddleware()])) as tc:
        headers = tc.get("/own").headers
    assert headers["content-security-policy"] == own
    assert headers["x-content-type-options"] == "nosniff"
