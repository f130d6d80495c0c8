from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from advanced_alchemy.base import IdentityAuditBase
from advanced_alchemy.types import DateTimeUTC, JsonB
from sqlalchemy import Float, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column, relationship

if TYPE_CHECKING:
    from advisor.db.models._run import Run


class Recommendation(IdentityAuditBase):
    """One ranked finding for a run, with its status so reports can measure payoff."""

    __tablename__ = "recommendation"
    __table_args__ = (
        Index("ix_recommendation_run_rank", "run_id", "rank"),
        Index("ix_recommendation_action_status", "action", "status"),
        Index("ix_recommendation_rule", "rule_id"),
    )

    run_id: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"))
    rank: Mapped[int] = mapped_column(Integer)
    rule_id: Mapped[str] = mapped_column(String(16))
    name: Mapped[str] = mapped_column(String(200))
    action: Mapped[str] = mapped_column(String(64))
    phase: Mapped[str | None] = mapped_column(String(32), default=None)
    severity: Mapped[str] = mapped_column(String(16))
    severity_level: Mapped[int] = mapped_column(Integer)
    score: Mapped[float] = mapped_column(Float)
    confidence: Mapped[float | None] = mapped_column(Float, default=None)
    title: Mapped[str] = mapped_column(Text)
    evidence: Mapped[list[Any]] = mapped_column(JsonB, default=list)
    fix: Mapped[dict[str, Any]] = mapped_column(JsonB, default=dict)
    expected_gain: Mapped[dict[str, Any] | None] = mapped_column(JsonB, default=None)
    body: Mapped[dict[str, Any]] = mapped_column(JsonB, default=dict)
    status: Mapped[str] = mapped_column(String(16), default="open")
    status_note: Mapped[str | None] = mapped_column(Text, default=None)
    status_changed_at: Mapped[datetime | None] = mapped_column(DateTimeUTC(timezone=True), default=None)

    run: Mapped[Run] = relationship(back_populates="recommendations", lazy="noload")
