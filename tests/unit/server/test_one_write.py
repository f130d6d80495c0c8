"""advisor's uvicorn protocol sends a response with a Content-Length in one transport write (one
``send()``), head and body together; streamed (chunked) responses and interim ``100 Continue``
answers are not held back, and a held head still leaves before the connection closes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import uvicorn
from uvicorn.server import ServerState

from advisor.server.timeouts import HeaderTimeoutProtocol, OneWriteTransport


class _Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: Any) -> None:
        self.writes.append(bytes(data))

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 50000), "sockname": ("127.0.0.1", 8000)}.get(name, default)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


async def _fixed(scope: Any, receive: Any, send: Any) -> None:
    await receive()
    body = b'{"ok":true}'
    await send(
        {"type": "http.response.start", "status": 201, "headers": [(b"content-length", str(len(body)).encode())]}
    )
    await send({"type": "http.response.body", "body": body})


async def _streamed(scope: Any, receive: Any, send: Any) -> None:
    await receive()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"a", "more_body": True})
    await send({"type": "http.response.body", "body": b"b"})


async def _serve(app: Any, request: bytes) -> _Transport:
    config = uvicorn.Config(app=app, lifespan="off", log_level="warning")
    config.load()
    protocol = HeaderTimeoutProtocol(config=config, server_state=ServerState(), app_state={})
    transport = _Transport()
    protocol.connection_made(transport)
    protocol.data_received(request)
    for _ in range(50):
        await asyncio.sleep(0)
        if not protocol.tasks:
            break
    protocol.connection_lost(None)
    return transport


async def test_a_response_with_a_length_is_one_write() -> None:
    transport = await _serve(_fixed, b"POST /x HTTP/1.1\r\nhost: t\r\ncontent-length: 2\r\n\r\n{}")
    assert len(transport.writes) == 1
    head, _, body = transport.writes[0].partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 201 ")
    assert b"content-length: 11" in head
    assert body == b'{"ok":true}'


async def test_a_streamed_response_is_not_held_back() -> None:
    transport = await _serve(_streamed, b"GET /x HTTP/1.1\r\nhost: t\r\n\r\n")
    assert transport.writes[0].startswith(b"HTTP/1.1 200 ")
    assert transport.writes[0].endswith(b"\r\n\r\n")  # the head alone, at once
    assert b"".join(transport.writes[1:]) == b"1\r\na\r\n1\r\nb\r\n0\r\n\r\n"


@pytest.mark.parametrize(
    ("first", "held"),
    [
        (b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n", True),
        (b"HTTP/1.1 100 Continue\r\n\r\n", False),
        (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n", False),
        (b"HTTP/1.1 400 Bad Request\r\ncontent-length: 3\r\n\r\nbad", False),
    ],
)
def test_only_a_complete_head_with_a_length_waits(first: bytes, held: bool) -> None:
    transport = _Transport()
    one = OneWriteTransport(transport)
    one.write(first)
    assert transport.writes == ([] if held else [first])
    one.close()  # a held head leaves before the connection closes
    assert transport.writes == [first]
    assert transport.closed
