"""The listening socket against hostile or broken clients, over real TCP connections.

Nothing here asserts how fast anything happens: a test waits (with a generous deadline) for the
server to close a connection or answer, and the bounds are set small so that waiting is short.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from aiohttp import web

from app.runtime import StartupError, listen
from app.store import Ledger, Store
from app.web import create_app
from app.web.endpoint import WebhookConfig
from app.web.listener import ConnectionGuard, GuardedSite, HttpLimits
from tests.conftest import until

SECRET = b"listener secret"
PATH = "/api/github/webhooks"
DEADLINE = 30.0


class Server:
    def __init__(self, site: GuardedSite, store: Store) -> None:
        self.site = site
        self.store = store

    @property
    def port(self) -> int:
        assert self.site.bound_port is not None
        return self.site.bound_port

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection("127.0.0.1", self.port)

    async def deliver(self, delivery_id: str) -> bytes:
        """A legitimate, signed delivery on a fresh connection; the server's whole answer."""
        body = json.dumps({"action": "opened", "installation": {"id": 1}}).encode()
        signature = "sha256=" + hmac.new(SECRET, body, hashlib.sha256).hexdigest()
        request = (
            f"POST {PATH} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-GitHub-Event: pull_request\r\n"
            f"X-GitHub-Delivery: {delivery_id}\r\nX-Hub-Signature-256: {signature}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        reader, writer = await self.connect()
        writer.write(request)
        answer = await asyncio.wait_for(reader.read(), DEADLINE)
        writer.close()
        return answer


@pytest.fixture
async def serve(tmp_path: Path) -> AsyncIterator[Callable[..., Awaitable[Server]]]:
    holder: list[tuple[web.AppRunner, Store]] = []

    async def start(**limits: float) -> Server:
        store = Store(f"sqlite+aiosqlite:///{tmp_path / 'listener.sqlite3'}")
        await store.create_schema()
        app = create_app(config=WebhookConfig(secret=SECRET, path=PATH), store=store, ledger=Ledger(store))
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        holder.append((runner, store))
        site = await listen(runner, host="127.0.0.1", port=0, limits=HttpLimits(**limits))  # type: ignore[arg-type]
        return Server(site, store)

    yield start
    for runner, store in holder:
        await runner.cleanup()
        await store.close()


async def closed_by_server(reader: asyncio.StreamReader) -> bytes:
    """What the server sent before closing the connection (waits for the close)."""
    return await asyncio.wait_for(reader.read(), DEADLINE)


@pytest.mark.slow
async def test_a_malformed_request_is_one_warning_and_a_400_that_echoes_nothing(
    serve: Callable[..., Awaitable[Server]], caplog: pytest.LogCaptureFixture
) -> None:
    server = await serve()
    reader, writer = await server.connect()
    writer.write(b"POST / HTTP/1.1\r\nHost: x\r\nX-Evil: \x01secret-bytes\x7f\r\n\r\n")
    with caplog.at_level(logging.DEBUG):
        answer = await closed_by_server(reader)
    writer.close()
    assert re.match(rb"HTTP/1\.[01] 400 Bad Request\r\n", answer)
    assert answer.endswith(b"\r\n\r\n400 Bad Request\n")
    assert b"secret-bytes" not in answer and b"X-Evil" not in answer
    noted = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(noted) == 1
    assert noted[0].levelno == logging.WARNING and noted[0].exc_info is None
    assert noted[0].getMessage() == (
        "malformed HTTP request from 127.0.0.1 answered 400: 'Invalid header value char'"
    )


@pytest.mark.slow
async def test_headers_sent_too_slowly_are_cut_off(serve: Callable[..., Awaitable[Server]]) -> None:
    server = await serve(header_timeout=0.3)
    reader, writer = await server.connect()
    writer.write(b"POST / HTTP/1.1\r\nHo")  # and nothing more, as a slowloris would
    assert await closed_by_server(reader) == b""
    writer.close()
    assert server.site.guard.counts["header_timeout"] == 1


@pytest.mark.slow
async def test_an_idle_connection_is_closed_after_the_keepalive_timeout(
    serve: Callable[..., Awaitable[Server]],
) -> None:
    server = await serve(keepalive_timeout=0.3)
    reader, writer = await server.connect()
    assert await closed_by_server(reader) == b""
    writer.close()


async def test_slow_clients_at_the_connection_bound_do_not_lock_out_a_delivery(
    serve: Callable[..., Awaitable[Server]],
) -> None:
    """Every slot is taken by idle connections and headers trickling in; long timeouts keep them
    all open. The delivery still gets its 202: the connection idle the longest gives way."""
    server = await serve(max_connections=6, header_timeout=600, keepalive_timeout=600)
    slow = [await server.connect() for _ in range(6)]
    for n, (_, writer) in enumerate(slow):
        if n % 2:
            writer.write(b"POST / HTTP/1.1\r\nHost: x\r\n")  # headers never finished
            await writer.drain()
    await until(lambda: server.site.guard.open_connections == 6, "six connections open")
    answer = await server.deliver("through-the-crowd")
    assert answer.startswith(b"HTTP/1.1 202")
    assert (await server.store.delivery("through-the-crowd")) is not None
    assert server.site.guard.counts["evicted"] == 1
    assert await closed_by_server(slow[0][0]) == b""  # the oldest idle one
    for _, writer in slow:
        writer.close()


async def test_when_every_connection_is_busy_a_new_one_gets_503_and_retry_after(
    serve: Callable[..., Awaitable[Server]],
) -> None:
    server = await serve(max_connections=2, header_timeout=600, keepalive_timeout=600)
    busy = []
    for n in range(2):
        # Signed headers promising a body that does not come: each is a request in progress.
        reader, writer = await server.connect()
        writer.write(
            f"POST {PATH} HTTP/1.1\r\nHost: x\r\nX-Hub-Signature-256: sha256={'0' * 64}\r\n"
            f"X-GitHub-Event: push\r\nX-GitHub-Delivery: busy-{n}\r\nContent-Length: 100\r\n\r\n".encode()
        )
        busy.append((reader, writer))
    await until(lambda: server.site.guard.busy_connections == 2, "two connections busy")
    answer = await server.deliver("refused")
    assert answer.startswith(b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\n")
    assert server.site.guard.counts["refused"] == 1
    for _, writer in busy:
        writer.close()


async def test_a_port_in_use_is_a_startup_error_naming_it(serve: Callable[..., Awaitable[Server]]) -> None:
    server = await serve()
    with pytest.raises(
        StartupError, match=f"cannot listen on 127.0.0.1:{server.port}: address already in use"
    ):
        await serve_again(server.port)


async def serve_again(port: int) -> None:
    app = web.Application()
    runner = web.AppRunner(app)
    await runner.setup()
    try:
        await listen(runner, host="127.0.0.1", port=port, limits=HttpLimits())
    finally:
        await runner.cleanup()


async def test_a_client_hanging_up_mid_body_is_one_warning_without_traceback(
    serve: Callable[..., Awaitable[Server]], caplog: pytest.LogCaptureFixture
) -> None:
    server = await serve()
    caplog.set_level(logging.DEBUG)
    _, writer = await server.connect()
    writer.write(
        f"POST {PATH} HTTP/1.1\r\nHost: x\r\nX-Hub-Signature-256: sha256={'0' * 64}\r\n"
        'Content-Length: 100\r\n\r\n{"action":'.encode()
    )
    await writer.drain()
    await until(lambda: server.site.guard.busy_connections == 1, "one connection busy")
    writer.close()
    await until(lambda: server.site.guard.open_connections == 0, "every connection closed")
    await until(lambda: any(r.name == "app.web.endpoint" for r in caplog.records), "an endpoint log line")
    noted = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [(r.levelno, r.getMessage(), r.exc_info) for r in noted] == [
        (logging.WARNING, "delivery refused: connection closed before the body was complete (400)", None)
    ]


async def test_a_malformed_chunked_body_is_400(serve: Callable[..., Awaitable[Server]]) -> None:
    server = await serve()
    reader, writer = await server.connect()
    writer.write(
        f"POST {PATH} HTTP/1.1\r\nHost: x\r\nX-Hub-Signature-256: sha256={'0' * 64}\r\n"
        "Transfer-Encoding: chunked\r\n\r\nzz\r\nnot a chunk\r\n".encode()
    )
    answer = await closed_by_server(reader)
    writer.close()
    assert re.match(rb"HTTP/1\.[01] 400 ", answer)
    assert b"not a chunk" not in answer


def test_floods_are_counted_every_time_and_logged_once_a_minute(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    guard = ConnectionGuard(HttpLimits(), clock=lambda: now[0])
    caplog.set_level(logging.INFO)
    for _ in range(100):
        now[0] += 1.0
        guard.note("header_timeout", logging.INFO, "closed a connection: no headers within %gs", 10.0)
    assert guard.counts["header_timeout"] == 100
    assert [r.getMessage() for r in caplog.records] == [
        "closed a connection: no headers within 10s (1 so far)",
        "closed a connection: no headers within 10s (61 so far)",
    ]
