"""API tokens: create, list, revoke, verify. Only a token's SHA-256 is stored; the token itself is
shown once, by ``advisor tokens create``."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from datetime import UTC, datetime, timedelta

from advanced_alchemy.repository import SQLAlchemyAsyncRepository
from advanced_alchemy.service import SQLAlchemyAsyncRepositoryService
from sqlalchemy import or_, select, update

from advisor.db.models import ApiToken
from advisor.domain.auth.schemas import ROLES, Role, TokenOut
from advisor.errors import InvalidInput, NotFound

__all__ = ["TOKEN_PREFIX", "ApiTokenService", "hash_token", "new_token"]

#: Marks advisor tokens in logs and secret scanners; the rest is 32 random bytes, URL-safe base64.
TOKEN_PREFIX = "adv_"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,199}$")


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """The stored form: SHA-256, hex. Tokens are random, so no salt or slow hash is needed."""
    return hashlib.sha256(token.encode()).hexdigest()


def _now() -> datetime:
    return datetime.now(UTC)


def status_of(token: ApiToken, now: datetime) -> str:
    if token.revoked_at is not None:
        return "revoked"
    if token.expires_at is not None and token.expires_at <= now:
        return "expired"
    return "active"


class ApiTokenService(SQLAlchemyAsyncRepositoryService[ApiToken]):
    """API tokens and their roles."""

    class Repo(SQLAlchemyAsyncRepository[ApiToken]):
        model_type = ApiToken

    repository_type = Repo

    @staticmethod
    def to_out(token: ApiToken, now: datetime | None = None) -> TokenOut:
        return TokenOut(
            id=token.id,
            name=token.name,
            role=token.role,
            status=status_of(token, now or _now()),  # type: ignore[arg-type]
            created_at=token.created_at,
            last_used_at=token.last_used_at,
            expires_at=token.expires_at,
            revoked_at=token.revoked_at,
        )

    async def create_token(self, name: str, role: Role, *, expires_days: int | None = None) -> tuple[TokenOut, str]:
        """A new token; returns its stored view and the token, which is not kept anywhere."""
        if not _NAME.match(name):
            raise InvalidInput(
                "a token name is 1-200 characters: letters, digits and . _ : @ / - (e.g. ci-runner)", field="name"
            )
        if role not in ROLES:
            raise InvalidInput(f"role must be one of {', '.join(ROLES)}", field="role")
        if expires_days is not None and expires_days < 1:
            raise InvalidInput("expires_days must be at least 1", field="expires_days")
        now = _now()
        for existing in await self.get_many(ApiToken.name == name):
            if status_of(existing, now) == "active":
                raise InvalidInput(f"an active token named {name!r} exists (id {existing.id}); revoke it first")
        token = new_token()
        row = await self.create(
            ApiToken(
                name=name,
                token_hash=hash_token(token),
                role=role,
                expires_at=now + timedelta(days=expires_days) if expires_days else None,
            ),
            auto_commit=True,
        )
        return self.to_out(row, now), token

    async def tokens(self) -> list[TokenOut]:
        now = _now()
        rows = await self.get_many(order_by=[(ApiToken.id, False)])
        return [self.to_out(row, now) for row in rows]

    async def revoke(self, name_or_id: str) -> TokenOut:
        """Revoke by id (all digits) or by name (the active token of that name)."""
        now = _now()
        if name_or_id.isdigit():
            row = await self.get_one_or_none(ApiToken.id == int(name_or_id))
            candidates = [row] if row is not None else []
        else:
            candidates = [t for t in await self.get_many(ApiToken.name == name_or_id) if status_of(t, now) != "revoked"]
        if not candidates:
            raise NotFound(f"no token {name_or_id!r} to revoke (see advisor tokens list)")
        row = candidates[0]
        if row.revoked_at is not None:
            raise InvalidInput(f"token {row.id} ({row.name!r}) was already revoked at {row.revoked_at:%Y-%m-%d %H:%M}")
        row.revoked_at = now
        row = await self.update(row, auto_commit=True)
        return self.to_out(row, now)

    async def find_active(self, digest: str, now: datetime | None = None) -> ApiToken | None:
        """The unrevoked, unexpired token with this hash, or None."""
        row = (await self.repository.session.execute(select(ApiToken).where(ApiToken.token_hash == digest))).scalar()
        # The lookup is by an index on the hash; this compare only guards against a lookup surprise.
        if row is None or not hmac.compare_digest(row.token_hash, digest):
            return None
        return row if status_of(row, now or _now()) == "active" else None

    async def touch(self, token_id: int, *, at: datetime, min_interval: timedelta) -> None:
        """Set ``last_used_at``, unless another worker did within ``min_interval``."""
        session = self.repository.session
        await session.execute(
            update(ApiToken)
            .where(ApiToken.id == token_id)
            .where(or_(ApiToken.last_used_at.is_(None), ApiToken.last_used_at < at - min_interval))
            .values(last_used_at=at)
            .execution_options(synchronize_session=False)
        )
        await session.commit()
