"""Signing and delivering webhooks, one at a time and in order, like GitHub's hookshot.

Every delivery goes through one queue and one sender task, so deliveries arrive in the order
their causes happened. A write's webhooks are queued only after the HTTP answer to that write
was sent (the server hands them over then), so the bot never hears about its own write before
it heard the answer. ``settle()`` waits until nothing is queued or in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

log = logging.getLogger(__name__)

USER_AGENT = "GitHub-Hookshot/fake"
DELIVERY_TIMEOUT = 30.0


def signature_256(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def signature_1(secret: str, body: bytes) -> str:
    return "sha1=" + hmac.new(secret.encode(), body, hashlib.sha1).hexdigest()


@dataclass
class Outgoing:
    event: str
    payload: dict[str, Any]
    delivery_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    done: asyncio.Future[int] | None = None


@dataclass
class Attempt:
    """One try at delivering: what was sent and what came back (``status`` 0: no HTTP answer)."""

    item: Outgoing
    url: str | None
    request_headers: dict[str, str]
    status: int = 0
    error: str | None = None  # GitHub's words when no HTTP answer came ("failed to connect")
    duration: float = 0.0
    response_headers: dict[str, str] = field(default_factory=dict)
    response_body: str | None = None


class Dispatcher:
    """The delivery queue. ``record`` is called with every attempt."""

    def __init__(
        self,
        *,
        secret: str,
        url: Callable[[], str | None],
        app_id: int,
        record: Callable[[Attempt], None],
    ) -> None:
        self._secret = secret
        self._url = url
        self._app_id = app_id
        self._record = record
        self._queue: list[Outgoing] = []
        self._wakeup: asyncio.Event | None = None
        self._idle: asyncio.Event | None = None
        self._outstanding = 0
        self._task: asyncio.Task[None] | None = None
        self._session: aiohttp.ClientSession | None = None
        self.errors: list[str] = []

    def use_secret(self, secret: str) -> None:
        """Sign from now on with ``secret`` (the App's webhook secret was changed)."""
        self._secret = secret

    # ---------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        """Start delivering (idempotent: the webhook side may start before the API does)."""
        if self._task is not None:
            return
        self._wakeup = asyncio.Event()
        self._idle = asyncio.Event()
        if self._outstanding == 0:
            self._idle.set()
        if self._queue:
            self._wakeup.set()
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=DELIVERY_TIMEOUT))
        self._task = asyncio.create_task(self._run(), name="fake-github-webhooks")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._session is not None:
            await self._session.close()
            self._session = None
        for item in self._queue:
            if item.done is not None and not item.done.done():
                item.done.cancel()
        self._queue.clear()
        self._outstanding = 0

    # ---------------------------------------------------------------- queueing
    def reserve(self, count: int = 1) -> None:
        """Count deliveries that are promised but not queued yet (a write still answering)."""
        self._outstanding += count
        if self._idle is not None:
            self._idle.clear()

    def release(self, count: int = 1) -> None:
        self._outstanding -= count
        self._maybe_idle()

    def enqueue(self, item: Outgoing, *, reserved: bool = False) -> None:
        if not reserved:
            self.reserve()
        self._queue.append(item)
        if self._wakeup is not None:
            self._wakeup.set()

    async def deliver(self, item: Outgoing) -> int:
        """Queue ``item`` behind everything already queued and wait for the bot's answer."""
        if self._task is None:
            raise RuntimeError("start() the fake before delivering webhooks")
        item.done = asyncio.get_running_loop().create_future()
        self.enqueue(item)
        return await item.done

    async def settle(self, timeout: float) -> None:  # noqa: ASYNC109 - mirrors FakeGitHub.settle
        if self._idle is None:
            return
        async with asyncio.timeout(timeout):
            while True:
                await self._idle.wait()
                # Give anything the last delivery set off (an answer being written) a chance to queue.
                for _ in range(3):
                    await asyncio.sleep(0)
                if self._outstanding == 0:
                    return

    def _maybe_idle(self) -> None:
        if self._outstanding <= 0 and self._idle is not None:
            self._outstanding = 0
            self._idle.set()

    # ---------------------------------------------------------------- sending
    async def _run(self) -> None:
        assert self._wakeup is not None
        while True:
            if not self._queue:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            item = self._queue.pop(0)
            body = json.dumps(item.payload, separators=(",", ":")).encode()
            attempt = Attempt(item, self._url(), self._headers(item, body))
            started = time.monotonic()
            try:
                await self._post(attempt, body)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - a failed delivery is recorded, like GitHub's log
                self.errors.append(f"{item.event} {item.delivery_id}: {exc!r}")
                log.warning("webhook delivery %s failed: %r", item.delivery_id, exc)
                attempt.status = 0
                attempt.error = "timed out" if isinstance(exc, TimeoutError) else "failed to connect"
            attempt.duration = time.monotonic() - started
            self._record(attempt)
            if item.done is not None and not item.done.done():
                item.done.set_result(attempt.status)
            self.release()

    async def _post(self, attempt: Attempt, body: bytes) -> None:
        if attempt.url is None or self._session is None:
            return
        async with self._session.post(attempt.url, data=body, headers=attempt.request_headers) as response:
            attempt.response_body = (await response.read()).decode("utf-8", "replace")
            attempt.response_headers = dict(response.headers)
            attempt.status = response.status

    def _headers(self, item: Outgoing, body: bytes) -> dict[str, str]:
        installation = item.payload.get("installation")
        headers = {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            "X-GitHub-Event": item.event,
            "X-GitHub-Delivery": item.delivery_id,
            "X-GitHub-Hook-ID": "1",
            "X-GitHub-Hook-Installation-Target-Type": "integration",
            "X-GitHub-Hook-Installation-Target-ID": str(self._app_id),
            "X-Hub-Signature": signature_1(self._secret, body),
            "X-Hub-Signature-256": signature_256(self._secret, body),
        }
        if not isinstance(installation, dict):
            headers.pop("X-GitHub-Hook-Installation-Target-Type")
        return headers
