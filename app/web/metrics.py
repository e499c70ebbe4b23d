"""``GET /metrics``: the process's registry (``app/metrics.py``) in Prometheus' text format, with
the queue's gauges read from the database when scraped, so every process (web or worker)
reports the shared queue as it is now.
"""

from __future__ import annotations

import hmac
import logging
import time
from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ..metrics import QUEUE_DEPTH, QUEUE_JOBS, QUEUE_OLDEST_DUE, REGISTRY
from ..store import JobStatus, Store

log = logging.getLogger(__name__)

CLOSED = "metrics are closed: set METRICS_TOKEN (or METRICS_PUBLIC=1 to serve them to anyone)"


async def observe_queue(store: Store, *, now: float | None = None) -> None:
    """Set the queue gauges from the database. Only unfinished rows are counted (an index range):
    finished rows stay forever and counting them at every scrape would grow without bound; the
    job counters say how jobs ended."""
    moment = time.time() if now is None else now
    counts = await store.pending_by_status()
    oldest_due_age = (await store.queue_stats(moment)).oldest_due_age
    for status, count in counts.items():
        QUEUE_JOBS.labels(status=status).set(count)
    QUEUE_DEPTH.set(counts[JobStatus.QUEUED] + counts[JobStatus.WAITING])
    QUEUE_OLDEST_DUE.set(oldest_due_age or 0.0)


def metrics_view(
    store: Store, *, token: str | None, public: bool = False
) -> Callable[[web.Request], Awaitable[web.Response]]:
    """``GET /metrics`` in Prometheus' text format: with ``token``, only for ``Bearer <token>``;
    without one, to anyone only when the operator opened them (``public``), else 403. They name
    installations and say how busy the bot is, and the server listens on every interface."""
    expected = f"Bearer {token}".encode() if token else None

    async def handle(request: web.Request) -> web.Response:
        if expected is not None:
            given = request.headers.get("Authorization", "").encode()
            if not hmac.compare_digest(given, expected):
                return web.json_response(
                    {"error": "bearer token required"}, status=401, headers={"WWW-Authenticate": "Bearer"}
                )
        elif not public:
            return web.json_response({"error": CLOSED}, status=403)
        try:
            await observe_queue(store)
        except Exception as exc:  # noqa: BLE001 - the other metrics still matter without the database
            log.warning("metrics: cannot read the queue (%s)", type(exc).__name__)
            QUEUE_JOBS.clear()
        body = generate_latest(REGISTRY)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    return handle
