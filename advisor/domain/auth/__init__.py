"""Bearer-token auth (``ADVISOR_AUTH_MODE=token``): roles, the token service and the app-level guard."""

from advisor.domain.auth.guards import FailedAuthLimiter, TokenAuthPlugin, required_role
from advisor.domain.auth.schemas import ROLES, Role, TokenOut, role_allows
from advisor.domain.auth.services import ApiTokenService, hash_token, new_token

__all__ = [
    "ROLES",
    "ApiTokenService",
    "FailedAuthLimiter",
    "Role",
    "TokenAuthPlugin",
    "TokenOut",
    "hash_token",
    "new_token",
    "required_role",
    "role_allows",
]
