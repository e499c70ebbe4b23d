"""The listening socket, bounded against hostile or broken clients.

aiohttp alone holds an idle connection for an hour, waits forever for headers sent a byte a
second, and accepts connections until the process runs out of file descriptors (then nobody,
GitHub included, gets in). Here every connection is bounded:

- ``header_timeout``: from a request's first byte to the end of its headers;
- ``keepalive_timeout``: a connection with no request for this long is closed;
- ``max_connections``: at the bound, a new connection evicts the connection that has been idle
  (or stuck before its headers) the longest; if every connection is busy with a request, the
  new one is answered ``503`` with ``Retry-After`` and closed. Slow clients therefore cannot
  lock a legitimate delivery out;
- a malformed request is one WARNING line and a ``400`` that does not echo what was sent.

The body's own deadline and the memory budget for bodies are the endpoint's
(``app/web/endpoint.py``, ``app/web/budget.py``).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

log = logging.getLogger(__name__)

REPORT_EVERY_SECONDS = 60.0
REFUSAL = (
    b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nConnection: close\r\n"
    b"Content-Type: text/plain\r\nContent-Length: 32\r\n\r\ntoo many connections, try again\n"
)


@dataclass(frozen=True, slots=True)
class HttpLimits:
    max_connections: int = 512
    header_timeout: float = 10.0
    keepalive_timeout: float = 75.0
    backlog: int = 128


class ConnectionGuard:
    """The open connections of one listening socket, and what was done to bound them."""

    def __init__(self, limits: HttpLimits, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self._open: dict[GuardedConnection, None] = {}
        self._clock = clock
        # What happened, for logs now and metrics later.
        self.counts = {"evicted": 0, "refused": 0, "header_timeout": 0, "malformed": 0}
        self._reported: dict[str, float] = {}

    def note(self, what: str, level: int, message: str, *args: object) -> None:
        """Count an event; log it the first time and then at most once a minute with the total,
        so a flood of slow or surplus connections cannot flood the log too."""
        self.counts[what] += 1
        now = self._clock()
        last = self._reported.get(what)
        if last is None or now - last >= REPORT_EVERY_SECONDS:
            self._reported[what] = now
            log.log(level, message + " (%d so far)", *args, self.counts[what])

    @property
    def open_connections(self) -> int:
        return len(self._open)

    @property
    def busy_connections(self) -> int:
        return sum(c.in_request for c in self._open)

    def admit(self, connection: GuardedConnection) -> bool:
        if len(self._open) >= self.limits.max_connections:
            idle = [c for c in self._open if not c.in_request]
            if not idle:
                self.note(
                    "refused", logging.WARNING, "refused a connection: all %d are busy", len(self._open)
                )
                return False
            victim = min(idle, key=lambda c: c.idle_since)
            self.forget(victim)
            victim.force_close()
            self.note("evicted", logging.INFO, "closed the longest-idle connection to admit a new one")
        self._open[connection] = None
        return True

    def forget(self, connection: GuardedConnection) -> None:
        self._open.pop(connection, None)


class GuardedConnection(RequestHandler):
    """aiohttp's HTTP/1.1 protocol with a header deadline, a place in the guard and short errors."""

    def __init__(
        self, manager: web.Server, *, guard: ConnectionGuard, loop: asyncio.AbstractEventLoop, **kwargs: Any
    ) -> None:
        super().__init__(manager, loop=loop, keepalive_timeout=guard.limits.keepalive_timeout, **kwargs)
        self._guard = guard
        self._loop_ = loop
        self._refused = False
        self._header_deadline: asyncio.TimerHandle | None = None
        self.in_request = False
        self.idle_since = loop.time()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if not self._guard.admit(self):
            self._refused = True
            assert isinstance(transport, asyncio.Transport)
            transport.write(REFUSAL)
            transport.close()
            return
        super().connection_made(transport)

    def connection_lost(self, exc: BaseException | None) -> None:
        if self._refused:
            return
        self._guard.forget(self)
        self._cancel_header_deadline()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if data and not self.in_request and self._header_deadline is None:
            self._header_deadline = self._loop_.call_later(
                self._guard.limits.header_timeout, self._headers_late
            )
        super().data_received(data)

    def eof_received(self) -> None:
        if not self._refused:
            super().eof_received()

    def request_started(self) -> None:
        self._cancel_header_deadline()
        self.in_request = True

    def request_finished(self) -> None:
        self.in_request = False
        self.idle_since = self._loop_.time()

    def _cancel_header_deadline(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_late(self) -> None:
        self._header_deadline = None
        if not self.in_request:
            timeout = self._guard.limits.header_timeout
            self._guard.note(
                "header_timeout", logging.INFO, "closed a connection: no headers within %gs", timeout
            )
            self.force_close()

    def handle_error(
        self,
        request: Any,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        """A request aiohttp could not parse: one WARNING line (the reason escaped and cut short,
        no traceback) and a plain answer that does not echo what the client sent."""
        if status == HTTPStatus.INTERNAL_SERVER_ERROR:
            return super().handle_error(request, status, exc, message)
        self._guard.counts["malformed"] += 1
        # The parser's first line says what is wrong; the lines after it quote the bytes sent.
        said = getattr(exc, "message", None) or message or (str(exc) if exc is not None else "")
        reason = ascii(str(said).strip().split("\n")[0].rstrip(":"))[:200]
        log.warning("malformed HTTP request from %s answered %d: %s", request.remote, status, reason)
        if request.writer.output_size > 0:
            raise ConnectionError("response already started; cannot answer the malformed request")
        response = web.Response(status=status, text=f"{status} {HTTPStatus(status).phrase}\n")
        response.force_close()
        return response


def connection_of(request: web.BaseRequest) -> GuardedConnection | None:
    protocol = request.protocol
    return protocol if isinstance(protocol, GuardedConnection) else None


def bind(host: str, port: int, *, backlog: int) -> socket.socket:
    """Bind and listen now, serve later: a port in use is known before anything else starts, and
    connections made meanwhile wait in the backlog. Raises OSError."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(backlog)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


class GuardedSite(web.BaseSite):
    """A TCP site whose connections are :class:`GuardedConnection` under one :class:`ConnectionGuard`
    (on ``sock`` when given, already bound by :func:`bind`)."""

    def __init__(
        self,
        runner: web.BaseRunner,
        host: str,
        port: int,
        *,
        limits: HttpLimits,
        sock: socket.socket | None = None,
    ) -> None:
        super().__init__(runner, backlog=limits.backlog)
        self._host = host
        self._port = port
        self._sock = sock
        self.guard = ConnectionGuard(limits)
        self.bound_port: int | None = None

    @property
    def name(self) -> str:
        return f"http://{self._host}:{self.bound_port or self._port}"

    async def start(self) -> None:
        await super().start()
        loop = asyncio.get_running_loop()
        server = self._runner.server
        assert server is not None

        def connection() -> GuardedConnection:
            return GuardedConnection(server, guard=self.guard, loop=loop, access_log=None)

        if self._sock is not None:
            self._server = await loop.create_server(connection, sock=self._sock)
        else:
            self._server = await loop.create_server(
                connection, self._host, self._port, backlog=self._backlog, reuse_address=True
            )
        self.bound_port = int(self._server.sockets[0].getsockname()[1])
