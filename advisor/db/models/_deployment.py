from __future__ import annotations

from typing import TYPE_CHECKING, Any

from advanced_alchemy.base import IdentityAuditBase
from advanced_alchemy.types import JsonB
from sqlalchemy import String, Text
from sqlalchemy.orm import Mapped, mapped_column, relationship

if TYPE_CHECKING:
    from advisor.db.models._run import Run


class Deployment(IdentityAuditBase):
    """A served model endpoint that runs are measured against (e.g. ``chat-prod``)."""

    __tablename__ = "deployment"

    name: Mapped[str] = mapped_column(String(200), unique=True, index=True)
    team: Mapped[str | None] = mapped_column(String(200), default=None)
    runtime: Mapped[str | None] = mapped_column(String(32), default=None)
    description: Mapped[str | None] = mapped_column(Text, default=None)
    #: Service-level objectives, e.g. {"ttft_p99_ms": 800, "itl_p99_ms": 60, "decode_tok_s_min": 30}.
    slo: Mapped[dict[str, Any]] = mapped_column(JsonB, default=dict)

    runs: Mapped[list[Run]] = relationship(back_populates="deployment", lazy="noload", viewonly=True)
