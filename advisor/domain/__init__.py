"""Domain contexts: where the pure parts meet the database. Each context has thin controllers,
services that own persistence, and msgspec schemas."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from litestar.types import ControllerRouterHandler

__all__ = ["api_controllers", "root_controllers"]


def root_controllers() -> list[ControllerRouterHandler]:
    """Handlers mounted at the root: /health, the web pages and their static files, the report page."""
    from advisor.domain.reports.controllers import ReportPageController
    from advisor.domain.system.controllers import SystemController
    from advisor.domain.web import SignInController, WebController, static_router

    return [SystemController, ReportPageController, WebController, SignInController, static_router()]


def api_controllers() -> list[ControllerRouterHandler]:
    """Handlers mounted under /api/v1."""
    from advisor.domain.catalog.controllers import CatalogController
    from advisor.domain.deployments.controllers import DeploymentController
    from advisor.domain.models.controllers import ModelController
    from advisor.domain.predictions.controllers import PredictController
    from advisor.domain.recommendations.controllers import RecommendationController
    from advisor.domain.reports.controllers import ReportController
    from advisor.domain.runs.controllers import AdviseController, RunController
    from advisor.domain.system.controllers import FormatsController
    from advisor.domain.system.rules import RulesController

    return [
        RunController,
        AdviseController,
        RecommendationController,
        DeploymentController,
        CatalogController,
        PredictController,
        FormatsController,
        RulesController,
        ModelController,
        ReportController,
    ]
