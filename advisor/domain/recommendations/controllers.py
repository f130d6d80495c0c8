"""Thin HTTP handlers for a recommendation's lifecycle."""

from __future__ import annotations

from litestar import Controller, patch
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody

from advisor.domain.providers import session_service
from advisor.domain.recommendations.schemas import RecommendationOut, StatusIn
from advisor.domain.recommendations.services import RecommendationService

__all__ = ["RecommendationController"]


class RecommendationController(Controller):
    path = "/recommendations"
    tags = ("recommendations",)
    dependencies = {"recommendations": session_service(RecommendationService)}

    @patch("/{rec_id:int}", summary="Mark a recommendation applied or dismissed (with a note)")
    async def set_status(
        self,
        recommendations: NamedDependency[RecommendationService],
        rec_id: FromPath[int],
        data: JSONBody[StatusIn],
    ) -> RecommendationOut:
        return await recommendations.set_status(rec_id, data.status, data.note)
