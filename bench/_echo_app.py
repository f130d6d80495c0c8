"""The reference for bench/ingest.py: a bare Litestar endpoint that only decodes the body."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Litestar, post
from litestar.params import RawBody


@post("/echo", status_code=200)
async def echo(body: RawBody) -> dict[str, Any]:
    doc = msgspec.json.decode(bytes(body))
    return {"ok": True, "keys": len(doc)}


app = Litestar(route_handlers=[echo], request_max_body_size=50_000_000)
