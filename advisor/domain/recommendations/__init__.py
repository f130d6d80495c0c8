"""Recommendations: one typed shape (:class:`RecommendationOut`) for the engine's ranked findings and
for stored rows, and their lifecycle (open → applied or dismissed, with a note)."""

from __future__ import annotations

from advisor.domain.recommendations.schemas import STATUSES, RecommendationOut, StatusIn
from advisor.domain.recommendations.services import (
    RecommendationService,
    recommendation_out,
    recommendation_values,
)

__all__ = [
    "STATUSES",
    "RecommendationOut",
    "RecommendationService",
    "StatusIn",
    "recommendation_out",
    "recommendation_values",
]
