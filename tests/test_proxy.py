"""``WEBHOOK_PROXY_URL``: a smee.io-style channel (server-sent events) replayed into the bot's own
endpoint with the original headers and body, reconnecting when the stream drops. The channel is a
local SSE server here; the bot is real."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import os
import signal
import sqlite3
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from app.intake.proxy import SseEvent, WebhookProxy, replay_request, sse_events
from tests.harness import SECRET, BotHarness, free_port

ROOT = Path(__file__).resolve().parents[1]


def sign(body: bytes, secret: str = SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def message(
    delivery_id: str, payload: dict[str, Any], *, raw: bytes | None = None, secret: str = SECRET
) -> str:
    """What smee.io broadcasts for one delivery: the headers (lower case) and the body."""
    body = raw if raw is not None else json.dumps(payload, separators=(",", ":")).encode()
    data: dict[str, Any] = {
        "host": "smee.io",
        "content-length": str(len(body)),
        "x-github-event": "pull_request",
        "x-github-delivery": delivery_id,
        "x-hub-signature-256": sign(body, secret),
        "content-type": "application/json",
        "body": payload,
        "query": {},
        "timestamp": 1700000000000,
    }
    if raw is not None:
        data["rawBody"] = raw.decode()
    return json.dumps(data)


class Channel:
    """An SSE server; each connection plays the next script (a list of SSE chunks), then ends."""

    def __init__(self, scripts: list[list[str]], *, hold_last: bool = False) -> None:
        self.scripts = scripts
        self.hold_last = hold_last
        self.connections: list[dict[str, str]] = []
        self.connected = asyncio.Event()
        self.port = free_port()
        self._runner: web.AppRunner | None = None
        self._release = asyncio.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/channel"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        index = len(self.connections)
        self.connections.append(dict(request.headers))
        self.connected.set()
        if index >= len(self.scripts):
            return web.Response(status=503)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for chunk in self.scripts[index]:
            await response.write(chunk.encode())
        if self.hold_last and index == len(self.scripts) - 1:
            await self._release.wait()
        return response

    async def __aenter__(self) -> Channel:
        app = web.Application()
        app.router.add_get("/channel", self.handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
        return self

    async def __aexit__(self, *_: object) -> None:
        self._release.set()
        assert self._runner is not None
        await self._runner.cleanup()

    async def wait_for_connections(self, count: int) -> None:
        while len(self.connections) < count:
            self.connected.clear()
            await self.connected.wait()


async def lines(*chunks: bytes) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


@pytest.mark.parametrize(
    ("stream", "events"),
    [
        ([b"event: ready\n", b"data: {}\n", b"\n"], [SseEvent("ready", "{}", None)]),
        ([b": keep-alive\n", b"\n", b"data:x\n", b"data: y\r\n", b"\n"], [SseEvent("message", "x\ny", None)]),
        (
            [b"id: 7\n", b"data: a\n", b"\n", b"data: b\n", b"\n"],
            [SseEvent("message", "a", "7"), SseEvent("message", "b", "7")],
        ),
        ([b"event: ping\n", b"\n", b"data: c\n"], []),  # no data, then an event never ended
    ],
)
async def test_server_sent_events_are_parsed(stream: list[bytes], events: list[SseEvent]) -> None:
    assert [e async for e in sse_events(lines(*stream))] == events


def test_the_replay_keeps_headers_and_the_raw_body() -> None:
    raw = b'{ "action": "opened",\n  "number": 1 }'
    headers, body = replay_request(json.loads(message("d", {"action": "opened", "number": 1}, raw=raw)))
    assert body == raw
    assert headers["x-hub-signature-256"] == sign(raw) and headers["x-github-delivery"] == "d"
    assert not {"host", "content-length", "body", "query", "timestamp", "rawBody"} & set(headers)
    headers, body = replay_request({"bodyB": base64.b64encode(b"\x00raw").decode(), "x-github-event": "push"})
    assert body == b"\x00raw" and headers == {"x-github-event": "push"}
    _, body = replay_request({"body": {"é": [1, 2]}})
    assert body == '{"é":[1,2]}'.encode()


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[BotHarness]:
    harness = BotHarness(tmp_path, run_worker=False)
    await harness.start()
    yield harness
    await harness.stop()


@pytest.mark.e2e
@pytest.mark.slow
async def test_channel_deliveries_reach_the_bot_signed_and_deduplicated_across_reconnects(
    bot: BotHarness,
) -> None:
    payload = {"action": "opened", "number": 1, "installation": {"id": 77}}
    pretty = json.dumps(payload, indent=2).encode()  # replayed byte for byte, so the signature holds
    first = [
        "event: ready\ndata: {}\n\n",
        f"id: 1\ndata: {message('d1', payload)}\n\n",
        f"id: 2\ndata: {message('d1', payload)}\n\n",
    ]
    second = [
        f"id: 3\ndata: {message('d2', payload, raw=pretty)}\n\n",
        f"id: 4\ndata: {message('forged', payload, secret='wrong')}\n\n",
        "data: not json\n\n",
    ]
    replayed: asyncio.Queue[tuple[str, int]] = asyncio.Queue()
    async with Channel([first, second], hold_last=True) as channel:
        proxy = WebhookProxy(
            channel.url,
            bot.webhook_url,
            backoff_base=0.01,
            backoff_cap=0.02,
            on_replayed=lambda delivery, status: replayed.put_nowait((delivery, status)),
        )
        proxy.start()
        try:
            got = [await replayed.get() for _ in range(4)]
        finally:
            await proxy.stop()
    assert got == [("d1", 202), ("d1", 200), ("d2", 202), ("forged", 401)]
    assert len(channel.connections) == 2
    assert channel.connections[0]["Accept"] == "text/event-stream"
    assert channel.connections[1]["Last-Event-ID"] == "2"  # resumes after what it already replayed
    rows = {r["delivery_id"] for r in await bot.store.all_jobs()}
    assert rows == {"d1", "d2"}


@pytest.mark.e2e
@pytest.mark.slow
async def test_a_channel_that_refuses_is_retried_with_backoff(bot: BotHarness) -> None:
    replayed: asyncio.Queue[tuple[str, int]] = asyncio.Queue()
    payload = {"action": "opened", "number": 2, "installation": {"id": 77}}
    async with Channel([], hold_last=False) as refusing:
        proxy = WebhookProxy(refusing.url, bot.webhook_url, backoff_base=0.01, backoff_cap=0.02)
        proxy.start()
        await refusing.wait_for_connections(3)  # 503, 503, 503: it keeps trying
        await proxy.stop()
    async with Channel([[f"data: {message('late', payload)}\n\n"]], hold_last=True) as channel:
        proxy = WebhookProxy(
            channel.url, bot.webhook_url, on_replayed=lambda d, s: replayed.put_nowait((d, s))
        )
        proxy.start()
        assert await replayed.get() == ("late", 202)
        await proxy.stop()


@pytest.mark.slow
async def test_serve_forwards_the_channel_when_webhook_proxy_url_is_set(
    tmp_path: Path, private_key_pem: str
) -> None:
    """The wiring in ``serve``: a second connection to the channel proves the first one's message
    was replayed (the proxy reads on only after the bot answered) and the stream's end noticed."""
    payload = {"action": "opened", "number": 3, "installation": {"id": 1}}
    database = tmp_path / "serve.sqlite3"
    async with Channel([[f"data: {message('via-proxy', payload, secret='s3cret')}\n\n"], []]) as channel:
        env = {
            **os.environ,
            "APP_ID": "1",
            "PRIVATE_KEY": private_key_pem,
            "WEBHOOK_SECRET": "s3cret",
            "GITHUB_API_URL": f"http://127.0.0.1:{free_port()}",
            "DATABASE_URL": f"sqlite:///{database}",
            "HOST": "127.0.0.1",
            "PORT": str(free_port()),
            "WEBHOOK_PROXY_URL": channel.url,
        }
        server = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "app", "serve", env=env, cwd=ROOT, stderr=asyncio.subprocess.DEVNULL
        )
        try:
            await asyncio.wait_for(channel.wait_for_connections(2), timeout=60)
        finally:
            server.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(server.wait(), timeout=30) == 0
    with sqlite3.connect(database) as db:
        rows = db.execute("SELECT delivery_id, event FROM deliveries").fetchall()
    assert rows == [("via-proxy", "pull_request")]
