"""``/healthz`` tells the truth: 503 with the reasons when the database cannot take a write, the
worker has not completed a claim round for too long, or the oldest due job has waited too long.

Anyone may ask whether the bot is well and why not (a load balancer, a platform's health check):
the status and the reasons are public, and the reasons carry no upstream text. The details
(the database's error, the queue, the worker, the App slug, the model and the recovery sweep)
say what the deployment is and what its dependencies answered, so they are shown only with
``Authorization: Bearer <METRICS_TOKEN>`` (and never without a token configured).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hmac
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from ..jobs.worker import WorkerStatus
from ..settings.logs import describe_failure
from ..store import QueueStats, Store

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class HealthConfig:
    worker_stall_seconds: float = 60.0  # no completed claim round for longer: unhealthy
    queue_delay_seconds: float = 600.0  # a due job waiting longer: unhealthy
    probe_timeout: float = 5.0  # a write (or the queue query) not done by then: unhealthy


def health_problems(
    *,
    database_error: str | None,
    worker: WorkerStatus | None,
    queue: QueueStats | None,
    config: HealthConfig,
) -> list[str]:
    """Why the process is unhealthy (empty: healthy). ``worker`` is None when none runs here."""
    problems = []
    if database_error is not None:
        problems.append("database cannot take a write")
    if worker is not None:
        if not worker.running:
            problems.append("worker is not running")
        elif worker.identity_known and (
            worker.since_claim_loop is None or worker.since_claim_loop > config.worker_stall_seconds
        ):
            # Before the bot knows who it is (GitHub unreachable) nothing is claimed on purpose;
            # the queue's delay below tells whether that leaves work waiting.
            since = "never" if worker.since_claim_loop is None else f"{worker.since_claim_loop:.0f}s ago"
            problems.append(
                f"worker has not completed a claim round for over {config.worker_stall_seconds:g}s "
                f"(last: {since})"
            )
    if (
        queue is not None
        and queue.oldest_due_age is not None
        and queue.oldest_due_age > config.queue_delay_seconds
    ):
        problems.append(
            f"oldest due job has waited {queue.oldest_due_age:.0f}s (bound {config.queue_delay_seconds:g}s)"
        )
    return problems


class SharedProbe:
    """One database check at a time, shared by concurrent ``/healthz`` requests, re-used for
    ``reuse_for`` seconds after it ends (so probing ``/healthz`` in a loop cannot turn into a
    stream of committed writes), and bounded in time without cancelling the database call (a
    cancelled driver call can spoil a connection)."""

    def __init__(
        self, check: Callable[[], Coroutine[Any, Any, Any]], timeout: float, *, reuse_for: float = 1.0
    ) -> None:
        self._check = check
        self._timeout = timeout
        self._reuse_for = reuse_for
        self._task: asyncio.Task[Any] | None = None
        self._ended_at = 0.0

    def _ended(self, _task: asyncio.Task[Any]) -> None:
        self._ended_at = asyncio.get_running_loop().time()

    async def __call__(self) -> Any:
        now = asyncio.get_running_loop().time()
        if self._task is None or (self._task.done() and now - self._ended_at >= self._reuse_for):
            self._task = asyncio.create_task(self._check(), name="health probe")
            self._task.add_done_callback(self._ended)
        try:
            return await asyncio.wait_for(asyncio.shield(self._task), self._timeout)
        except TimeoutError:
            raise TimeoutError(f"no answer within {self._timeout:g}s") from None

    async def close(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


def shows_details(authorization: str | None, token: str | None) -> bool:
    """Whether a request may see the details: only with the configured token, compared in
    constant time; never when no token is configured."""
    if not token:
        return False
    return hmac.compare_digest((authorization or "").encode(), f"Bearer {token}".encode())


class HealthView:
    """``GET /healthz``, bound to its probes (shared and bounded, see ``SharedProbe``)."""

    def __init__(
        self,
        store: Store,
        *,
        config: HealthConfig,
        worker_status: Callable[[], WorkerStatus | None],
        extra: Callable[[], dict[str, Any]],
        token: str | None,
    ) -> None:
        self.config = config
        self.write_probe = SharedProbe(store.write_probe, config.probe_timeout)
        self.queue_probe = SharedProbe(store.queue_stats, config.probe_timeout)
        self.worker_status = worker_status
        self.extra = extra
        self.token = token
        self.unhealthy = False  # at the last probe

    async def handle(self, request: web.Request) -> web.Response:
        database_error: str | None = None
        queue: QueueStats | None = None
        try:
            await self.write_probe()
            queue = await self.queue_probe()
        except Exception as exc:  # noqa: BLE001 - any failure is the answer
            database_error = describe_failure(exc)
        worker = self.worker_status()
        problems = health_problems(
            database_error=database_error, worker=worker, queue=queue, config=self.config
        )
        body: dict[str, Any] = {"status": "unavailable" if problems else "ok"}
        if problems:
            body["reasons"] = problems
        if shows_details(request.headers.get("Authorization"), self.token):
            body |= {
                "database": database_error or "ok",
                "queue": dataclasses.asdict(queue) if queue else None,
                "worker": dataclasses.asdict(worker) if worker else None,
                **self.extra(),
            }
        # Logged when the verdict changes, not at every probe of a load balancer.
        unhealthy = bool(problems)
        if unhealthy != self.unhealthy:
            self.unhealthy = unhealthy
            if unhealthy:
                detail = f" ({database_error})" if database_error else ""
                log.warning("unhealthy: %s%s", "; ".join(problems), detail)
            else:
                log.info("healthy again")
        return web.json_response(body, status=503 if problems else 200)

    async def close(self) -> None:
        await self.write_probe.close()
        await self.queue_probe.close()
