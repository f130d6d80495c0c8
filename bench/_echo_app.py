"""The reference for bench/ingest.py: a bare Litestar endpoint that only decodes the body.

It decodes the body into advisor's own canonical-run Struct (typed, with its field checks), as the
issue's measure defines it; a bulk body (a JSON array) into a list of them.
"""

from __future__ import annotations

import msgspec
from litestar import Litestar, post
from litestar.params import RawBody

from advisor.canonical import CanonicalRun

__all__ = ["app"]

_RUN = msgspec.json.Decoder(CanonicalRun)
_RUNS = msgspec.json.Decoder(list[CanonicalRun])


@post("/echo", status_code=200)
async def echo(body: RawBody) -> dict[str, object]:
    run = _RUN.decode(bytes(body))
    return {"ok": True, "deployment": run.deployment}


@post("/echo/bulk", status_code=200)
async def echo_bulk(body: RawBody) -> dict[str, object]:
    return {"ok": True, "runs": len(_RUNS.decode(bytes(body)))}


app = Litestar(route_handlers=[echo, echo_bulk], request_max_body_size=200_000_000)
