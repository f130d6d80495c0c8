"""The pages: thin handlers that call one page function and render its template."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote

from litestar import Controller, Request, Response, get, post
from litestar.datastructures import UploadFile
from litestar.di import NamedDependency
from litestar.exceptions import HTTPException
from litestar.params import FromPath, FromQuery, QueryParameter
from litestar.response import Redirect, Template
from litestar.status_codes import HTTP_303_SEE_OTHER
from sqlalchemy.ext.asyncio import AsyncSession

from advisor.domain.catalog.services import CatalogService
from advisor.domain.deployments.schemas import DeploymentIn
from advisor.domain.deployments.services import DeploymentService
from advisor.domain.recommendations.services import RecommendationService
from advisor.domain.web import pages
from advisor.domain.web.auth import SignInRequired, WebUser, sign_in, sign_out, web_guard
from advisor.domain.web.submission import FormErrors, FormInput, error_field, slo_from_form, submit_form
from advisor.errors import AdvisorError

__all__ = ["SignInController", "WebController"]


def _user(request: Request[Any, Any, Any]) -> WebUser:
    user: WebUser = request.state.web_user
    return user


def _page(request: Request[Any, Any, Any], name: str, context: dict[str, Any], status: int = 200) -> Template:
    return Template(
        template_name=f"web/{name}.html",
        context={**context, "user": _user(request), "token_mode": request.app.state.settings.auth.mode == "token"},
        status_code=status,
    )


def _error_page(request: Request[Any, Any, Any], status: int, title: str, detail: str) -> Response[Any]:
    user = getattr(request.state, "web_user", None)
    return Template(
        template_name="web/error.html",
        context={
            "status": status,
            "title": title,
            "detail": detail,
            "user": user,
            "token_mode": request.app.state.settings.auth.mode == "token",
        },
        status_code=status,
    )


def _signin_redirect(request: Request[Any, Any, Any], exc: SignInRequired) -> Response[Any]:
    return Redirect(f"/signin?next={quote(exc.next_path, safe='/')}", status_code=HTTP_303_SEE_OTHER)


def _advisor_error(request: Request[Any, Any, Any], exc: AdvisorError) -> Response[Any]:
    return _error_page(request, exc.status, exc.title, exc.detail)


def _http_error(request: Request[Any, Any, Any], exc: HTTPException) -> Response[Any]:
    title = "Not found" if exc.status_code == 404 else "Request refused"
    return _error_page(request, exc.status_code, title, str(exc.detail))


def _forbidden(request: Request[Any, Any, Any]) -> Response[Any]:
    return _error_page(
        request, 403, "Forbidden", f"submitting needs the submit role; you are signed in as {_user(request).role}"
    )


async def _form_input(request: Request[Any, Any, Any]) -> FormInput:
    form = await request.form()
    fields: dict[str, str] = {}
    upload: UploadFile | None = None
    for key, value in form.multi_items():
        if isinstance(value, UploadFile):
            upload = value if value.filename else upload
        elif key != "_csrf_token":
            fields[key] = str(value)
    data = await upload.read() if upload is not None else None
    return FormInput(fields=fields, file_name=upload.filename if upload else None, file_bytes=data or None)


class WebController(Controller):
    """The engineers' pages. Every handler is guarded: in token mode they need a session."""

    path = "/"
    guards = [web_guard]
    include_in_schema = False
    exception_handlers = {
        SignInRequired: _signin_redirect,
        AdvisorError: _advisor_error,
        HTTPException: _http_error,
    }

    @get("/", name="web.dashboard")
    async def dashboard(self, request: Request[Any, Any, Any], db_session: NamedDependency[AsyncSession]) -> Template:
        return _page(request, "dashboard", await pages.dashboard_page(db_session))

    @get("/runs/new", name="web.new_run")
    async def new_run(
        self, request: Request[Any, Any, Any], db_session: NamedDependency[AsyncSession]
    ) -> Response[Any]:
        if not _user(request).can_submit:
            return _forbidden(request)
        catalog = await CatalogService(db_session).current()
        return _page(request, "new_run", pages.form_page(catalog, dict(request.query_params)))

    @post("/runs/new", name="web.submit_run")
    async def submit_run(
        self, request: Request[Any, Any, Any], db_session: NamedDependency[AsyncSession]
    ) -> Response[Any]:
        user = _user(request)
        if not user.can_submit:
            return _forbidden(request)
        form = await _form_input(request)
        try:
            results = await submit_form(
                request.app.state.sqlalchemy_config.get_engine(),
                form,
                submitted_by=user.name or None,
                refit_after_runs=request.app.state.settings.model.refit_after_runs,
            )
        except FormErrors as exc:
            catalog = await CatalogService(db_session).current()
            return _page(request, "new_run", pages.form_page(catalog, form.fields, exc.errors), status=422)
        return Redirect(f"/runs/{results[0].run.id}", status_code=HTTP_303_SEE_OTHER)

    @get("/runs/{run_id:int}", name="web.run")
    async def run(
        self, request: Request[Any, Any, Any], db_session: NamedDependency[AsyncSession], run_id: FromPath[int]
    ) -> Template:
        return _page(request, "run", await pages.run_page(db_session, run_id))

    @post("/recommendations/{rec_id:int}/status", name="web.recommendation_status")
    async def recommendation_status(
        self, request: Request[Any, Any, Any], db_session: NamedDependency[AsyncSession], rec_id: FromPath[int]
    ) -> Response[Any]:
        if not _user(request).can_submit:
            return _forbidden(request)
        form = await request.form()
        note = str(form.get("note") or "").strip() or None
        updated = await RecommendationService(db_session).set_status(rec_id, str(form.get("status") or ""), note)
        return Redirect(f"/runs/{updated.run_id}#rec-{rec_id}", status_code=HTTP_303_SEE_OTHER)

    @get("/deployments/{name:str}", name="web.deployment")
    async def deployment(
        self, request: Request[Any, Any, Any], db_session: NamedDependency[AsyncSession], name: FromPath[str]
    ) -> Template:
        return _page(request, "deployment", await pages.deployment_page(db_session, name))

    @post("/deployments/{name:str}/slo", name="web.deployment_slo")
    async def deployment_slo(
        self, request: Request[Any, Any, Any], db_session: NamedDependency[AsyncSession], name: FromPath[str]
    ) -> Response[Any]:
        if not _user(request).can_submit:
            return _forbidden(request)
        form = await request.form()
        fields = {key: str(value) for key, value in form.items() if key != "_csrf_token"}
        try:
            await DeploymentService(session=db_session).put(name, DeploymentIn(slo=slo_from_form(fields)))
            return Redirect(f"/deployments/{quote(name)}", status_code=HTTP_303_SEE_OTHER)
        except FormErrors as exc:
            errors = exc.errors
        except AdvisorError as exc:
            errors = {
                error_field(f"slo.{exc.field.rsplit('.', 1)[-1]}" if exc.field else None, FormInput()): exc.detail
            }
        context = await pages.deployment_page(db_session, name)
        return _page(request, "deployment", {**context, "errors": errors, "values": fields}, status=422)

    @get("/compare", name="web.compare")
    async def compare(
        self,
        request: Request[Any, Any, Any],
        db_session: NamedDependency[AsyncSession],
        a: FromQuery[int | None] = None,
        b: FromQuery[int | None] = None,
    ) -> Template:
        return _page(request, "compare", await pages.compare_page(db_session, a, b))

    @get("/rules", name="web.rules")
    async def rules(self, request: Request[Any, Any, Any]) -> Template:
        return _page(request, "rules", pages.rules_page())

    @get("/rules/{rule_id:str}", name="web.rule")
    async def rule(self, request: Request[Any, Any, Any], rule_id: FromPath[str]) -> Template:
        return _page(request, "rule", pages.rule_page(rule_id))


class SignInController(Controller):
    """Token mode: paste an API token to start a session."""

    path = "/signin"
    include_in_schema = False

    @get("/", name="web.signin")
    async def form(
        self, request: Request[Any, Any, Any], next_path: Annotated[str, QueryParameter(name="next")] = "/"
    ) -> Response[Any]:
        if request.app.state.settings.auth.mode != "token":
            return Redirect(_safe_next(next_path), status_code=HTTP_303_SEE_OTHER)  # nobody signs in
        return Template(
            template_name="web/signin.html",
            context={"next": _safe_next(next_path), "error": None, "user": None, "token_mode": True},
        )

    @post("/", name="web.signin_post")
    async def submit(self, request: Request[Any, Any, Any]) -> Response[Any]:
        form = await request.form()
        target = _safe_next(str(form.get("next") or "/"))
        user = await sign_in(request, str(form.get("token") or ""))
        if user is None:
            return Template(
                template_name="web/signin.html",
                context={
                    "next": target,
                    "error": "that token is unknown, revoked or expired",
                    "user": None,
                    "token_mode": True,
                },
                status_code=401,
            )
        return Redirect(target, status_code=HTTP_303_SEE_OTHER)

    @post("/out", name="web.signout")
    async def signout(self, request: Request[Any, Any, Any]) -> Response[Any]:
        sign_out(request)
        return Redirect("/signin", status_code=HTTP_303_SEE_OTHER)


def _safe_next(target: str) -> str:
    """Only a local path: never an open redirect to another site."""
    return target if target.startswith("/") and not target.startswith("//") and "\\" not in target else "/"
