"""Domain contexts: where the pure parts meet the database. Each context has thin controllers,
services that own persistence, and msgspec schemas."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from litestar.types import ControllerRouterHandler

__all__ = ["api_controllers", "root_controllers"]


def root_controllers() -> list[ControllerRouterHandler]:
    """Handlers mounted at the root (/health)."""
    from advisor.domain.system.controllers import SystemController

    return [SystemController]


def api_controllers() -> list[ControllerRouterHandler]:
    """Handlers mounted under /api/v1."""
    from advisor.domain.catalog.controllers import CatalogController
    from advisor.domain.deployments.controllers import DeploymentController
    from advisor.domain.models.controllers import ModelController
    from advisor.domain.predictions.controllers import PredictController
    from advisor.domain.runs.controllers import AdviseController, RecommendationController, RunController
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
    ]
