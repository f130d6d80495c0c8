"""Issue #18 item 3: the CLI's client honours Retry-After on 429 and 503, in seconds or as an HTTP
date, so a throttled or briefly unavailable server is waited for rather than given up on."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest

from advisor.client.http import AdvisorClient


def _client(responses: list[httpx.Response]) -> tuple[AdvisorClient, list[float]]:
    queue = iter(responses)
    sleeps: list[float] = []
    http = httpx.Client(transport=httpx.MockTransport(lambda r: next(queue)), base_url="http://advisor.test")
    return AdvisorClient(http, retries=3, backoff=0.01, sleep=sleeps.append), sleeps


@pytest.mark.parametrize("status", [429, 503])
def test_retry_after_seconds_is_waited_for(status: int) -> None:
    client, sleeps = _client([httpx.Response(status, headers={"Retry-After": "9"}), httpx.Response(200, json=[])])
    assert client.rules() == []
    assert sleeps == [9.0]


def test_retry_after_as_an_http_date_is_waited_for() -> None:
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    client, sleeps = _client([httpx.Response(429, headers={"Retry-After": when}), httpx.Response(200, json=[])])
    assert client.rules() == []
    assert len(sleeps) == 1
    assert 28.0 <= sleeps[0] <= 30.0


def test_retry_after_is_capped_at_a_minute() -> None:
    client, sleeps = _client([httpx.Response(503, headers={"Retry-After": "3600"}), httpx.Response(200, json=[])])
    assert client.rules() == []
    assert sleeps == [60.0]
