"""``WEBHOOK_PROXY_URL``: receive webhooks on a laptop through a smee.io-style channel.

The channel is a server-sent-events stream; each ``message`` event's data is a JSON object
holding the delivery's HTTP headers (lower-case keys) and its ``body``. Each one is replayed into
the bot's own webhook endpoint with the original headers, so the signature is checked and the
delivery id dedups exactly as if GitHub had posted it. The body is replayed byte for byte when
the channel carries it raw (``rawBody``, or base64 ``bodyB``); smee.io carries the parsed JSON,
re-serialised compactly here as GitHub and smee-client do. A dropped stream is reconnected with
capped exponential backoff.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
from collections.abc import AsyncIterable, AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp

from ..jobs.pacing import backoff_delay
from ..settings.config import Settings

log = logging.getLogger(__name__)

NOT_HEADERS = frozenset({"body", "rawbody", "bodyb", "query", "timestamp"})
# Hop-by-hop and transport headers of the relay's own request: never replayed.
DROPPED_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "connection",
        "accept-encoding",
        "transfer-encoding",
        "keep-alive",
        "te",
        "x-forwarded-for",
        "x-forwarded-proto",
        "x-forwarded-host",
        "x-forwarded-port",
        "x-request-id",
    }
)


@dataclass(frozen=True, slots=True)
class SseEvent:
    event: str
    data: str
    id: str | None


async def sse_events(lines: AsyncIterable[bytes]) -> AsyncIterator[SseEvent]:
    """Parse a server-sent-events stream (the WHATWG format: ``field: value`` lines, a blank line
    ends an event, ``:`` lines are comments)."""
    event, last_id = "message", None
    data: list[str] = []
    async for raw in lines:
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if not line:
            if data:
                yield SseEvent(event, "\n".join(data), last_id)
            event, data = "message", []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            event = value
        elif name == "data":
            data.append(value)
        elif name == "id":
            last_id = value


def replay_request(message: dict[str, Any]) -> tuple[dict[str, str], bytes]:
    """The headers and body to post for one channel message."""
    headers = {
        str(k): str(v)
        for k, v in message.items()
        if str(k).lower() not in NOT_HEADERS
        and str(k).lower() not in DROPPED_HEADERS
        and isinstance(v, str | int)
    }
    if isinstance(message.get("rawBody"), str):
        body = message["rawBody"].encode()
    elif isinstance(message.get("bodyB"), str):
        body = base64.b64decode(message["bodyB"])
    else:
        body = json.dumps(message.get("body"), separators=(",", ":"), ensure_ascii=False).encode()
    return headers, body


class WebhookProxy:
    def __init__(
        self,
        source: str,
        target: str,
        *,
        backoff_base: float = 1.0,
        backoff_cap: float = 60.0,
        on_replayed: Callable[[str, int], None] = lambda _delivery, _status: None,
    ) -> None:
        self.source = source
        self.target = target
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.on_replayed = on_replayed
        self._task: asyncio.Task[None] | None = None
        self._last_id: str | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="webhook proxy")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        failures = 0
        # No total timeout: the stream stays open for hours; a silent dead connection is caught
        # by the read timeout (smee.io sends a ping every 30 s or so).
        timeout = aiohttp.ClientTimeout(total=None, connect=15, sock_read=120)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            while True:
                try:
                    connected = await self._listen(session)
                except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
                    connected = False
                    log.warning("webhook proxy: %s: %s", type(exc).__name__, exc)
                except Exception:  # anything else: logged (log.exception), and the proxy reconnects
                    connected = False
                    log.exception("webhook proxy: unexpected error; reconnecting")
                failures = 0 if connected else failures + 1
                delay = backoff_delay(max(1, failures), base=self.backoff_base, cap=self.backoff_cap)
                log.info("webhook proxy: reconnecting to %s in %.1fs", self.source, delay)
                await asyncio.sleep(delay)

    async def _listen(self, session: aiohttp.ClientSession) -> bool:
        """Read the channel until it ends; True if it was open (the next try starts from scratch)."""
        headers = {"Accept": "text/event-stream"}
        if self._last_id is not None:
            headers["Last-Event-ID"] = self._last_id
        async with session.get(self.source, headers=headers) as response:
            if response.status != 200:
                log.warning("webhook proxy: %s answered %d", self.source, response.status)
                return False
            log.info("webhook proxy: forwarding %s to %s", self.source, self.target)
            async for event in sse_events(response.content):
                if event.id is not None:
                    self._last_id = event.id
                if event.event == "message":
                    await self._replay(session, event.data)
        return True

    async def _replay(self, session: aiohttp.ClientSession, data: str) -> None:
        try:
            message = json.loads(data)
        except ValueError:
            log.warning("webhook proxy: a message that is not JSON was dropped")
            return
        if not isinstance(message, dict):
            return
        headers, body = replay_request(message)
        delivery = next((v for k, v in headers.items() if k.lower() == "x-github-delivery"), "?")
        try:
            async with session.post(self.target, data=body, headers=headers) as answer:
                status = answer.status
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.warning("webhook proxy: delivery %s not replayed (%s)", delivery, type(exc).__name__)
            status = 0
        else:
            log.info("webhook proxy: delivery %s replayed, the bot answered %d", delivery, status)
        self.on_replayed(delivery, status)


def start_proxy(settings: Settings, *, host: str, port: int) -> WebhookProxy | None:
    """With ``WEBHOOK_PROXY_URL`` set, forward the channel into this process's own endpoint."""
    if not settings.webhook_proxy_url:
        return None
    local = "127.0.0.1" if host in ("", "0.0.0.0", "::") else host
    if ":" in local:
        local = f"[{local}]"  # an IPv6 address in a URL
    proxy = WebhookProxy(settings.webhook_proxy_url, f"http://{local}:{port}{settings.webhook_path}")
    proxy.start()
    return proxy
