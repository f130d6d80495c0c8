"""${message}

Revision ID: ${up_revision}
Revises: ${down_revision | comma,n}
Create Date: ${create_date}
"""

from __future__ import annotations

import sqlalchemy as sa
from advanced_alchemy.types import GUID, ORA_JSONB, DateTimeUTC, JsonB
from alembic import op
from sqlalchemy import Text  # noqa: F401  (autogenerate renders JSONB(astext_type=Text()))
${imports if imports else ""}

sa.GUID = GUID  # type: ignore[attr-defined]
sa.DateTimeUTC = DateTimeUTC  # type: ignore[attr-defined]
sa.JsonB = JsonB  # type: ignore[attr-defined]
sa.ORA_JSONB = ORA_JSONB  # type: ignore[attr-defined]

revision = ${repr(up_revision)}
down_revision = ${repr(down_revision)}
branch_labels = ${repr(branch_labels)}
depends_on = ${repr(depends_on)}


def upgrade() -> None:
    ${upgrades if upgrades else "pass"}


def downgrade() -> None:
    ${downgrades if downgrades else "pass"}
