"""The guard's role derivation and header parsing, without a server."""

from __future__ import annotations

import pytest

from advisor.domain.auth import required_role, role_allows
from advisor.domain.auth.guards import bearer_token


@pytest.mark.parametrize(
    ("method", "path", "opt", "expected"),
    [
        ("GET", "/api/v1/runs", {}, "read"),
        ("HEAD", "/api/v1/runs/{run_id:int}", {}, "read"),
        ("OPTIONS", "/api/v1/runs", {}, "read"),
        ("get", "/api/v1/rules", {}, "read"),
        ("POST", "/api/v1/runs", {}, "submit"),
        ("POST", "/api/v1/runs/bulk", {}, "submit"),
        ("PATCH", "/api/v1/recommendations/{rec_id:int}", {}, "submit"),
        ("PUT", "/api/v1/deployments/{name:str}", {}, "submit"),
        ("DELETE", "/api/v1/anything", {}, "submit"),
        ("POST", "/api/v1/advise", {"role": "read"}, "read"),
        ("POST", "/api/v1/predict", {"role": "read"}, "read"),
        ("POST", "/api/v1/models/fit", {"role": "admin"}, "admin"),
        ("POST", "/api/v1/catalog/{kind:str}", {"role": "admin"}, "admin"),
        ("GET", "/api/v1", {}, "read"),
        # outside /api/v1: open, unless the handler asks for a role
        ("GET", "/health", {}, None),
        ("GET", "/metrics", {}, None),
        ("GET", "/schema/openapi.json", {}, None),
        ("POST", "/api/v10/runs", {}, None),
        ("GET", "/internal", {"role": "admin"}, "admin"),
        ("GET", "/api/v1/runs", {"other": 1}, "read"),
    ],
)
def test_required_role(method: str, path: str, opt: dict[str, str], expected: str | None) -> None:
    assert required_role(method, path, opt) == expected


def test_an_unknown_declared_role_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="'root' is not one of read, submit, admin"):
        required_role("GET", "/api/v1/runs", {"role": "root"})


@pytest.mark.parametrize(
    ("held", "needed", "allowed"),
    [
        ("read", "read", True),
        ("read", "submit", False),
        ("submit", "read", True),
        ("submit", "admin", False),
        ("admin", "submit", True),
        ("admin", "admin", True),
        ("superuser", "read", False),
    ],
)
def test_roles_are_ordered(held: str, needed: str, allowed: bool) -> None:
    assert role_allows(held, needed) is allowed


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer adv_abc", "adv_abc"),
        ("bearer   adv_abc  ", "adv_abc"),
        ("BEARER adv_abc", "adv_abc"),
        ("Basic dXNlcjpwYXNz", None),
        ("Bearer", None),
        ("Bearer   ", None),
        ("adv_abc", None),
        ("", None),
        (None, None),
    ],
)
def test_bearer_token(header: str | None, token: str | None) -> None:
    assert bearer_token(header) == token
