"""The worker: claims jobs from the queue and runs each through flatten -> guard -> route -> act.

Concurrency is bounded (default 8 jobs at once, never two of one subject: the claim query sees
to that). Each claim is a lease, renewed by a heartbeat while the job runs; a process that dies
leaves leases that expire, and its jobs are claimed again. Outcomes:

- done: every handler ran (or none applied);
- skipped: nothing to do that could ever succeed (no installation, the App lost access);
- retried: a transient failure (5xx, timeout, connection error, rate limit) -> queued again
  after capped exponential backoff with jitter, or after GitHub's ``Retry-After``;
- failed: a permanent error, or the last attempt failed; the error text is kept on the job.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import orjson
from gidgethub import routing

from .events import AnyEvent, FlattenError, PullRequestScoped, flatten
from .github import NoAccess, transient_delay
from .guards import BotIdentity
from .logs import log_context
from .metrics import JOB_DURATION, JOB_LATENCY
from .routing import Context, handler_name, run_handlers, select_handlers
from .store import Job, Store

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    concurrency: int = 8
    lease_seconds: float = 120.0
    poll_seconds: float = 1.0
    claim_interval: float = 0.02
    max_attempts: int = 6
    backoff_base: float = 2.0
    backoff_cap: float = 300.0
    shutdown_grace: float = 20.0


@dataclass(slots=True)
class JobReport:
    """What a job's outcome line says besides the outcome, filled in while it runs."""

    repo: str | None = None
    pr_number: int | None = None
    handlers: list[str] = field(default_factory=list)


def backoff_delay(
    attempt: int, *, base: float, cap: float, rand: Callable[[], float] = random.random
) -> float:
    """Capped exponential backoff with "equal jitter": half fixed, half random, never above cap."""
    ceiling = min(cap, base * 2.0 ** max(0, attempt - 1))
    return ceiling / 2 + rand() * ceiling / 2


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:2000]


class Worker:
    """Runs queued jobs until stopped. ``identity`` must resolve before anything is dispatched."""

    def __init__(
        self,
        store: Store,
        router: routing.Router,
        *,
        identity: Callable[[], Awaitable[BotIdentity]],
        context_for: Callable[[AnyEvent, BotIdentity, float], Awaitable[Context]],
        options: WorkerOptions | None = None,
        worker_id: str | None = None,
    ) -> None:
        self.store = store
        self.router = router
        self.options = options or WorkerOptions()
        self.worker_id = worker_id or f"{socket.gethostname()}:{uuid.uuid4().hex[:8]}"
        self._identity = identity
        self._context_for = context_for
        self._wakeup = asyncio.Event()
        self._recorded = False
        self._stopping = asyncio.Event()
        self._running: dict[int, asyncio.Task[None]] = {}
        self._main: asyncio.Task[None] | None = None

    def wake(self) -> None:
        """A new job was recorded: look now instead of at the next poll."""
        self._recorded = True
        self._wakeup.set()

    def start(self) -> None:
        self._main = asyncio.create_task(self.run(), name=f"worker {self.worker_id}")

    async def run(self) -> None:
        identity = await self._wait_for_identity()
        if identity is None:
            return
        heartbeat = asyncio.create_task(self._heartbeat(), name="lease heartbeat")
        try:
            while not self._stopping.is_set():
                free = self.options.concurrency - len(self._running)
                claimed = await self.store.claim(
                    worker_id=self.worker_id, limit=free, lease_seconds=self.options.lease_seconds
                )
                for job in claimed:
                    task = asyncio.create_task(self._run_job(job, identity), name=f"job {job.id}")
                    self._running[job.id] = task
                    task.add_done_callback(functools.partial(self._finished, job.id))
                # Either the queue had nothing more or every slot is busy: wait for a new job,
                # a finished one, or the next poll (other processes may enqueue too).
                await self._idle()
        finally:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat

    async def _wait_for_identity(self) -> BotIdentity | None:
        """Nothing is dispatched before the bot knows who it is, or self-loop guards could not work."""
        identity_task = asyncio.ensure_future(self._identity())
        stop_task = asyncio.ensure_future(self._stopping.wait())
        done, _ = await asyncio.wait({identity_task, stop_task}, return_when=asyncio.FIRST_COMPLETED)
        stop_task.cancel()
        if identity_task not in done:
            identity_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await identity_task
            return None
        return identity_task.result()

    def _finished(self, job_id: int, _task: asyncio.Task[None]) -> None:
        self._running.pop(job_id, None)
        self._wakeup.set()

    async def _idle(self) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wakeup.wait(), timeout=self.options.poll_seconds)
        if self._recorded:
            # Coalesce a burst of new deliveries into one claim: during a flood a claim per
            # delivery would compete with the webhook endpoint for the database. A finished job
            # frees its subject's next job at once.
            self._recorded = False
            await asyncio.sleep(self.options.claim_interval)
        self._wakeup.clear()

    async def _heartbeat(self) -> None:
        interval = self.options.lease_seconds / 3
        while True:
            await asyncio.sleep(interval)
            if self._running:
                await self.store.extend_leases(
                    list(self._running), worker_id=self.worker_id, lease_seconds=self.options.lease_seconds
                )

    async def stop(self) -> None:
        """Stop claiming, give running jobs ``shutdown_grace`` seconds, hand the rest back."""
        self._stopping.set()
        self._wakeup.set()
        if self._main is not None:
            await self._main
        running = dict(self._running)
        if running:
            log.info("waiting up to %.0fs for %d running job(s)", self.options.shutdown_grace, len(running))
            _, pending = await asyncio.wait(running.values(), timeout=self.options.shutdown_grace)
            for task in pending:
                task.cancel()
            unfinished = [job_id for job_id, task in running.items() if task in pending]
            if pending:
                await asyncio.wait(pending)
            await self.store.release(unfinished, worker_id=self.worker_id)
            if unfinished:
                log.info("handed %d unfinished job(s) back to the queue", len(unfinished))

    # ------------------------------------------------------------------ one job
    async def _run_job(self, job: Job, identity: BotIdentity) -> None:
        started = time.monotonic()
        report = JobReport()
        with log_context(job_id=job.id, delivery_id=job.delivery_id, event=job.event):
            try:
                status, error = await self._process(job, identity, report)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the job boundary: any failure is recorded, never lost
                with log_context(repo=report.repo, pr_number=report.pr_number):
                    status, error = await self._after_failure(job, exc), None
            else:
                await self.store.finish(job, worker_id=self.worker_id, status=status, error=error)
            duration = time.monotonic() - started
            JOB_DURATION.labels(outcome=status).observe(duration)
            if status != "retried":
                JOB_LATENCY.labels(outcome=status).observe(max(0.0, time.time() - job.received_at))
            with log_context(repo=report.repo, pr_number=report.pr_number):
                log.info(
                    "job %s in %.2fs (handlers: %s)%s",
                    status,
                    duration,
                    ", ".join(report.handlers) or "none",
                    f": {error}" if error else "",
                )

    async def _process(self, job: Job, identity: BotIdentity, report: JobReport) -> tuple[str, str | None]:
        try:
            payload = orjson.loads(job.payload)
            event = flatten(job.event, payload, delivery_id=job.delivery_id, identity=identity)
        except (ValueError, FlattenError) as exc:
            return "failed", _error_text(exc)
        pr_number = (
            event.pr_number if isinstance(event, PullRequestScoped) else getattr(event, "pr_number", None)
        )
        report.repo, report.pr_number = event.repo, pr_number
        with log_context(repo=event.repo, pr_number=pr_number):
            handlers = select_handlers(self.router, event, payload)
            report.handlers = [handler_name(h) for h in handlers]
            if not handlers:
                reason = "own event" if event.is_own_app else "no handler"
                log.debug("nothing to run (%s)", reason)
                return "done", None
            if event.installation_id is None:
                return "skipped", "delivery has no installation (not sent to an App)"
            try:
                context = await self._context_for(event, identity, job.received_at)
                await run_handlers(
                    handlers,
                    event,
                    context,
                    already_done=job.done_handlers,
                    on_done=lambda name: self.store.mark_handler_done(job, name),
                )
            except NoAccess as exc:
                return "skipped", _error_text(exc)
        return "done", None

    async def _after_failure(self, job: Job, exc: Exception) -> str:
        """Fail the job or put it back in the queue; returns which ("failed" or "retried")."""
        hint = transient_delay(exc)
        error = _error_text(exc)
        if hint is None or job.attempts >= self.options.max_attempts:
            log.error("job failed after %d attempt(s): %s", job.attempts, error, exc_info=hint is None)
            await self.store.finish(job, worker_id=self.worker_id, status="failed", error=error)
            return "failed"
        delay = max(
            hint, backoff_delay(job.attempts, base=self.options.backoff_base, cap=self.options.backoff_cap)
        )
        log.warning("attempt %d failed (%s); retrying in %.2fs", job.attempts, error, delay)
        await self.store.retry_later(job, worker_id=self.worker_id, delay=delay, error=error)
        return "retried"
