"""One job of the worker: flatten -> guard -> route -> act, and what came of it.

- done: every handler ran (or none applied);
- skipped: nothing to do that could ever succeed (no installation, the App lost access);
- retried: a transient failure (5xx, timeout, connection error, rate limit) -> queued again
  after capped exponential backoff with jitter, or after GitHub's ``Retry-After``;
- failed: a permanent error, or the last attempt failed; the error text is kept on the job
  (redacted like the logs: an upstream error body may echo a token).

The worker (``worker.py``) claims the jobs, runs them here one at a time per slot, and writes
what ``JobRunner.run`` returns.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import orjson

from .. import tenancy
from ..events import AnyEvent, FlattenError, flatten
from ..github.client import RetryLater
from ..github.errors import NoAccess, transient_delay
from ..guards import BotIdentity, sent_by_bot_or_decoy
from ..handlers.concern import OrderedRouter
from ..handlers.context import Context
from ..metrics import JOB_DURATION, JOB_LATENCY, child
from ..settings.logs import log_context, redact
from ..store import Job, JobStatus
from .pacing import backoff_delay
from .routing import handler_name, run_handlers, select_handlers

# A job's lines are the worker's (operators and tests filter the worker's logger by its name).
log = logging.getLogger("app.jobs.worker")

RETRIED = "retried"  # a job's outcome (logs, metrics) when it goes back to the queue for later


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a failed job is retried (``WorkerOptions``): up to ``max_attempts`` attempts, after a
    capped exponential backoff."""

    max_attempts: int
    backoff_base: float
    backoff_cap: float


@dataclass(frozen=True, slots=True)
class Retry:
    """A job going back to the queue: after ``delay`` seconds; ``counted``: as a failed attempt."""

    delay: float
    counted: bool = True


@dataclass(slots=True)
class JobReport:
    """What a job's outcome line says besides the outcome, filled in while it runs."""

    repo: str | None = None
    pr_number: int | None = None
    handlers: list[str] = field(default_factory=list)


def error_text(exc: BaseException) -> str:
    """The error kept on a job: its type and message, masked like the logs, bounded."""
    return redact(f"{type(exc).__name__}: {exc}")[:2000]


class JobRunner:
    """Runs one job through the handlers ``router`` selects. ``context_for`` builds a handler's
    context (the installation's client); ``write_done`` records a handler as done at once."""

    def __init__(
        self,
        router: OrderedRouter,
        *,
        context_for: Callable[[AnyEvent, BotIdentity, float], Awaitable[Context]],
        write_done: Callable[[Job, str], Awaitable[None]],
    ) -> None:
        self._router = router
        self._context_for = context_for
        self._write_done = write_done

    async def run(
        self, job: Job, identity: BotIdentity, *, retry: RetryPolicy
    ) -> tuple[JobStatus, str | None, Retry | None]:
        """Run one job; returns its status and error and, when it is to be retried (status
        ``queued`` again), after how long (the caller writes the outcome)."""
        started = time.monotonic()
        report = JobReport()
        retry_in: Retry | None = None
        with log_context(job_id=job.id, delivery_id=job.delivery_id, event=job.event):
            try:
                status, error = await self._process(job, identity, report)
            except asyncio.CancelledError:
                raise
            except RetryLater as exc:
                # GitHub's rate limits (a refusal's wait, or the bot's own pacing) always end, so
                # waiting for them is no failed attempt.
                status, error, retry_in = JobStatus.QUEUED, error_text(exc), Retry(exc.delay, counted=False)
                with log_context(repo=report.repo, pr_number=report.pr_number):
                    log.info("waiting %.1fs for GitHub's rate limits (%s)", exc.delay, error)
            except Exception as exc:  # noqa: BLE001 - the job boundary: any failure is recorded, never lost
                with log_context(repo=report.repo, pr_number=report.pr_number):
                    retry_in, error = _after_failure(job, exc, retry)
                status = JobStatus.FAILED if retry_in is None else JobStatus.QUEUED
            duration = time.monotonic() - started
            outcome = RETRIED if retry_in is not None else str(status)  # the metrics' and log's word
            child(JOB_DURATION, outcome).observe(duration)
            if retry_in is None:
                child(JOB_LATENCY, outcome).observe(max(0.0, time.time() - job.received_at))
            with log_context(repo=report.repo, pr_number=report.pr_number):
                log.info(
                    "job %s in %.2fs (handlers: %s)%s",
                    outcome,
                    duration,
                    ", ".join(report.handlers) or "none",
                    f": {error}" if error and retry_in is None else "",
                )
        return status, error, retry_in

    async def _process(
        self, job: Job, identity: BotIdentity, report: JobReport
    ) -> tuple[JobStatus, str | None]:
        try:
            payload = orjson.loads(job.payload)
            event = flatten(job.event, payload, delivery_id=job.delivery_id)
        except (ValueError, FlattenError) as exc:
            return JobStatus.FAILED, error_text(exc)
        report.repo, report.pr_number = event.repo, event.pr_number
        tenancy.installation.set(event.installation_id)  # this slot's task: whose turn it uses
        with log_context(repo=event.repo, pr_number=event.pr_number):
            handlers = select_handlers(self._router, event, payload, identity)
            report.handlers = [handler_name(h) for h in handlers]
            if not handlers:
                reason = "own event" if sent_by_bot_or_decoy(event.sender_login, identity) else "no handler"
                log.debug("nothing to run (%s)", reason)
                return JobStatus.DONE, None
            if event.installation_id is None:
                return JobStatus.SKIPPED, "delivery has no installation (not sent to an App)"
            try:
                ctx = await self._context_for(event, identity, job.received_at)
                last = handler_name(handlers[-1])
                sent = ctx.gh.requests

                async def done(name: str) -> None:
                    nonlocal sent
                    talked, sent = ctx.gh.requests != sent, ctx.gh.requests
                    await self._handler_done(job, name, now=talked and name != last)

                await run_handlers(handlers, event, ctx, already_done=job.done_handlers, on_done=done)
            except NoAccess as exc:
                return JobStatus.SKIPPED, error_text(exc)
        return JobStatus.DONE, None

    async def _handler_done(self, job: Job, name: str, *, now: bool) -> None:
        """Remember a handler that succeeded, so that a retry of its job skips it. Written ``now``
        for a handler that talked to GitHub and is not the last: a crash must not make the job do
        that work again. The others' are written with the job's end or its retry (a handler that
        sent GitHub nothing is cheaper to run again, after a crash, than a write per job)."""
        if not now:
            job.done_handlers.append(name)
            return
        await self._write_done(job, name)


def _after_failure(job: Job, exc: Exception, retry: RetryPolicy) -> tuple[Retry | None, str]:
    """Whether a failed job is retried: after how long (None: it fails for good), and the error
    kept on it."""
    hint = transient_delay(exc)
    error = error_text(exc)
    if hint is None or job.attempts >= retry.max_attempts:
        log.error("job failed after %d attempt(s): %s", job.attempts, error, exc_info=hint is None)
        return None, error
    delay = max(hint, backoff_delay(job.attempts, base=retry.backoff_base, cap=retry.backoff_cap))
    log.warning("attempt %d failed (%s); retrying in %.2fs", job.attempts, error, delay)
    return Retry(delay), error
