from __future__ import annotations

from advanced_alchemy.base import IdentityAuditBase
from sqlalchemy import Integer, LargeBinary, String
from sqlalchemy.orm import Mapped, mapped_column


class RawPayload(IdentityAuditBase):
    """The exact bytes a run was derived from, zlib-compressed, deduplicated by SHA-256.

    Kept forever so that a better parser can re-derive the run (``advisor runs reparse``).
    """

    __tablename__ = "raw_payload"

    sha256: Mapped[str] = mapped_column(String(64), unique=True)
    content_type: Mapped[str | None] = mapped_column(String(200), default=None)
    file_name: Mapped[str | None] = mapped_column(String(500), default=None)
    format: Mapped[str | None] = mapped_column(String(64), default=None)
    size: Mapped[int] = mapped_column(Integer)
    encoding: Mapped[str] = mapped_column(String(16), default="zlib")
    data: Mapped[bytes] = mapped_column(LargeBinary)
