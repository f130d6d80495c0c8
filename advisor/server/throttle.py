"""Throttling: a per-token request rate (Litestar's rate-limit middleware, keyed by the token's
hash, or by the client address for calls without one), answered 429 with ``Retry-After``.

The stricter limit on unknown or invalid tokens per client address lives in the token guard
(:mod:`advisor.domain.auth.guards`), which is where a token is found to be invalid.
"""

from __future__ import annotations

import hashlib
from typing import Any

from litestar import Request
from litestar.middleware.rate_limit import CacheObject, RateLimitConfig, RateLimitMiddleware, get_remote_address

__all__ = ["RetryAfterRateLimitMiddleware", "rate_limit_config", "throttle_identifier"]


def throttle_identifier(request: Request[Any, Any, Any]) -> str:
    """The token (as a hash prefix: the token itself is never kept), else the client address."""
    authorization = request.headers.get("authorization")
    if authorization:
        return "token:" + hashlib.sha256(authorization.encode("utf-8", "replace")).hexdigest()[:32]
    return "addr:" + get_remote_address(request)


class RetryAfterRateLimitMiddleware(RateLimitMiddleware):
    """Litestar's middleware, plus ``Retry-After`` (RFC 9110) beside its draft RateLimit headers:
    the header clients, the advisor CLI included, actually honour."""

    def create_response_headers(self, cache_object: CacheObject) -> dict[str, str]:
        headers = super().create_response_headers(cache_object)
        if len(cache_object.history) >= self.max_requests:
            headers["Retry-After"] = str(max(1, int(headers[self.config.rate_limit_reset_header_key])))
        return headers


def rate_limit_config(per_second: int) -> RateLimitConfig:
    """``per_second`` requests per token (or address) and worker; /health and /metrics are exempt
    (probes and scrapers must see an overloaded server)."""
    return RateLimitConfig(
        rate_limit=("second", per_second),
        identifier_for_request=throttle_identifier,
        middleware_class=RetryAfterRateLimitMiddleware,
        exclude=["^/health", "^/metrics"],
        # RateLimit-* headers on every response; Retry-After added on the refusal.
        set_rate_limit_headers=True,
        store="rate_limit",
    )
