"""The Litestar application factory."""

from __future__ import annotations

import functools
import logging
from typing import Any

import structlog
from advanced_alchemy.extensions.litestar import SQLAlchemyPlugin
from litestar import Litestar, Router
from litestar.config.response_cache import ResponseCacheConfig
from litestar.logging.config import StructLoggingConfig
from litestar.middleware.logging import LoggingMiddlewareConfig
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import ScalarRenderPlugin, SwaggerRenderPlugin
from litestar.openapi.spec import Components, SecurityScheme
from litestar.plugins import InitPlugin
from litestar.plugins.prometheus import PrometheusConfig
from litestar.plugins.structlog import StructlogConfig, StructlogPlugin
from litestar.types import ControllerRouterHandler

from advisor import __version__
from advisor.db.config import make_sqlalchemy_config
from advisor.domain.reports.schedule import start_schedule as start_report_schedule
from advisor.domain.reports.schedule import stop_schedule as stop_report_schedule
from advisor.server.metrics import DomainMetricsController
from advisor.server.middleware import RequestMetrics, edge_middleware
from advisor.server.problems import internal_error_handler, problem_details_plugin
from advisor.server.timeouts import RequestTimeoutMiddleware
from advisor.settings import Settings, get_settings

__all__ = ["create_app"]


def _route_handlers() -> list[ControllerRouterHandler]:
    # Imported here so that importing advisor.server does not import every domain at once.
    from advisor.domain import api_controllers, root_controllers

    return [*root_controllers(), MetricsController, Router(path="/api/v1", route_handlers=api_controllers())]


async def _drain_background() -> None:
    """Stop this worker's background work (bulk analysis, refits) before the engine goes."""
    from advisor.domain.runs.pipeline import drain_background

    await drain_background()


class MetricsController(DomainMetricsController):
    """advisor's own Prometheus metrics (request counts and latencies per route)."""

    path = "/metrics"
    openmetrics_format = False
    #: In token mode the metrics need a read token (route counts and latencies tell an outsider
    #: what the fleet does); in auth mode none, like everything else, they are open.
    opt = {"role": "read"}


_PROMETHEUS = PrometheusConfig(
    app_name="advisor",
    prefix="advisor",
    # Label by route template (/api/v1/runs/{run_id}), never by raw path: bounded cardinality.
    group_path=True,
    exclude=["/metrics", "/schema"],
)


@functools.cache
def _request_metrics() -> RequestMetrics:
    """One per process: the metric objects are process-wide (prometheus_client's registry)."""
    return RequestMetrics(_PROMETHEUS)


def _auth_plugins(settings: Settings) -> list[InitPlugin]:
    """ADVISOR_AUTH_MODE=token installs the bearer-token guard; "none" installs nothing (no cost)."""
    if settings.auth.mode != "token":
        return []
    from advisor.domain.auth import TokenAuthPlugin

    return [TokenAuthPlugin()]


def _throttle(settings: Settings) -> list[Any]:
    """The per-token (or per-address) request rate, unless ADVISOR_AUTH_RATE_LIMIT_PER_SECOND=0."""
    if settings.auth.rate_limit_per_second <= 0:
        return []
    from advisor.server.throttle import rate_limit_config

    return [rate_limit_config(settings.auth.rate_limit_per_second).middleware]


def _openapi_security(settings: Settings) -> dict[str, Any]:
    """Token mode: the schema declares the bearer scheme, and its UIs offer a place for the token."""
    if settings.auth.mode != "token":
        return {}
    return {
        "components": Components(security_schemes={"bearer": SecurityScheme(type="http", scheme="bearer")}),
        "security": [{"bearer": []}],
    }


def create_app(settings: Settings | None = None) -> Litestar:
    """Build the app. ``settings`` defaults to the environment (``ADVISOR_*``)."""
    settings = settings or get_settings()
    # Fail at start-up, not at the first analysis, when a thresholds override file is invalid.
    from advisor.rules.registry import thresholds_table

    thresholds_table()
    level = logging.getLevelNamesMapping()[settings.server.log_level.upper()]
    # /health asks Alembic for the revision on every call; its INFO lines are noise.
    logging.getLogger("alembic").setLevel(max(level, logging.WARNING))
    logging.getLogger("httpx").setLevel(max(level, logging.WARNING))
    sqlalchemy_config = make_sqlalchemy_config(settings.db)
    from advisor.domain.web import csrf_config, resolve_secret_key, session_config
    from advisor.domain.web import template_config as web_template_config

    secret_key = resolve_secret_key(settings)
    log_config = StructlogConfig(
        structlog_logging_config=StructLoggingConfig(
            wrapper_class=structlog.make_filtering_bound_logger(level),
            log_exceptions="never",  # internal_error_handler logs them once, with the request id
            disable_stack_trace={400, 404, 409, 413, 415, 422, 429, 499, 503},
            pretty_print_tty=settings.server.log_format == "console",
        ),
        middleware_logging_config=LoggingMiddlewareConfig(
            # Never the query string: a token sent as ?token= would land in the log. Headers are
            # not logged either (Authorization and cookies are secrets).
            request_log_fields=("method", "path"),
            response_log_fields=["status_code"],
        ),
        # Request logs are INFO lines: above INFO the middleware would only gather what is dropped.
        enable_middleware_logging=level <= logging.INFO,
    )
    app = Litestar(
        route_handlers=_route_handlers(),
        plugins=[
            SQLAlchemyPlugin(config=sqlalchemy_config),
            problem_details_plugin(),
            StructlogPlugin(log_config),
            *_auth_plugins(settings),
        ],
        # Request id, security headers, (the rate limiter,) input limits and request metrics in
        # one pure-ASGI layer (advisor.server.middleware), then the pages' sessions (not on /api/).
        middleware=[
            *edge_middleware(throttle=_throttle(settings), metrics=_request_metrics()),
            RequestTimeoutMiddleware(  # inside the edge: its 503/408 carry the request id and headers
                seconds=settings.server.request_timeout_s, bulk_seconds=settings.server.bulk_request_timeout_s
            ),
            session_config(secret_key).middleware,
        ],
        csrf_config=csrf_config(secret_key),
        template_config=web_template_config(),
        exception_handlers={Exception: internal_error_handler},
        openapi_config=OpenAPIConfig(
            title="advisor",
            version=__version__,
            summary="LLM serving configuration advisor",
            description=(
                "Stores measured runs of LLM servers, explains them with roofline physics, predicts "
                "what the hardware should reach and returns ranked, explained recommendations."
            ),
            path="/schema",
            render_plugins=[ScalarRenderPlugin(), SwaggerRenderPlugin(path="/swagger")],
            **_openapi_security(settings),
        ),
        request_max_body_size=settings.server.max_body_bytes,
        # The engine is created here, not by the plugin, so closing its pool is ours to do.
        on_startup=[start_report_schedule],
        on_shutdown=[stop_report_schedule, _drain_background, sqlalchemy_config.get_engine().dispose],
        response_cache_config=ResponseCacheConfig(default_expiration=60),
        debug=settings.server.debug,
    )
    app.state.settings = settings
    app.state.sqlalchemy_config = sqlalchemy_config
    return app
