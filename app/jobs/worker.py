"""The worker: claims jobs from the queue and runs each through flatten -> guard -> route -> act
(``runner.py``, which also says what a job's outcomes are), then writes how it ended.

Concurrency is bounded (default 8 jobs at once, never two of one subject: the claim query sees
to that). Each claim is a lease, renewed by a heartbeat while the job runs; a process that dies
leaves leases that expire, and its jobs are claimed again.

The loop is supervised: a failed claim, heartbeat or outcome write (the database is down,
locked, or full) is logged once per outage, retried with capped backoff, and work resumes within
seconds of the database coming back. Only shutdown ends the worker; what it last managed to do
is visible through :meth:`Worker.status` (``/healthz``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
import uuid
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import TypeVar

from ..events import AnyEvent
from ..guards import BotIdentity
from ..handlers.concern import OrderedRouter
from ..handlers.context import Context
from ..settings.logs import Outage
from ..store import Job, JobEnd, Store
from .pacing import AckFirst, backoff_delay
from .runner import JobRunner, RetryPolicy, error_text
from .tasks import abandon, bounded, cancel_and_wait

log = logging.getLogger(__name__)

T = TypeVar("T")


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
    # After the grace: how long cancelled work, and then the hand-back of unfinished jobs, may
    # take before shutdown goes on without them (``Worker.stop``).
    stop_margin: float = 1.0
    # The database being unavailable: retry claims, heartbeats and outcome writes this fast (the
    # cap bounds how long work waits after the database is back).
    db_retry_base: float = 0.2
    db_retry_cap: float = 5.0
    # A subject's backlog is claimed in runs of up to this many jobs, worked in order by one slot.
    run_length: int = 64
    # The ends of quick jobs in a run are written together, at most this late (a crash before the
    # write runs them again, in order: every side effect is idempotent). A job that took longer
    # than this has its end, and those before it, written before the next job starts.
    end_delay: float = 0.05
    # While webhook requests are being received, a job waits up to this long before it starts:
    # acknowledging deliveries within GitHub's 10 s is the deadline; the queue is durable.
    ack_first_wait: float = 0.01
    # Slots one installation's jobs may hold at once (None: all but one): a flood from one
    # installation, its jobs waiting on GitHub's limits, always leaves a slot for the others.
    installation_share: int | None = None

    def share(self) -> int:
        return self.installation_share or max(1, self.concurrency - 1)

    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(self.max_attempts, self.backoff_base, self.backoff_cap)


@dataclass(frozen=True, slots=True)
class WorkerStatus:
    """What the worker can say about itself, for ``/healthz``.

    ``identity_known`` False: still learning who the bot is from GitHub (nothing is claimed
    before). ``since_claim_loop``: seconds since a claim round last completed (None: never).
    ``database_error``: the failure of the current database outage, if one is going on.
    """

    running: bool
    identity_known: bool
    since_claim_loop: float | None
    database_error: str | None


class Worker:
    """Runs queued jobs until stopped. ``identity`` must resolve before anything is dispatched."""

    def __init__(
        self,
        store: Store,
        router: OrderedRouter,
        *,
        identity: Callable[[], Awaitable[BotIdentity]],
        context_for: Callable[[AnyEvent, BotIdentity, float], Awaitable[Context]],
        options: WorkerOptions | None = None,
        worker_id: str | None = None,
        clock: Callable[[], float] = time.monotonic,
        ack_first: AckFirst | None = None,
    ) -> None:
        self.store = store
        self.ack_first = ack_first or AckFirst()
        self.options = options or WorkerOptions()
        self.worker_id = worker_id or f"{socket.gethostname()}:{uuid.uuid4().hex[:8]}"
        self._identity = identity
        self._jobs = JobRunner(router, context_for=context_for, write_done=self._write_handler_done)
        self._clock = clock
        self._wakeup = asyncio.Event()
        self._recorded = False  # a new delivery was recorded since the last claim
        self._job_ended = asyncio.Event()  # since the last claim: its subject's next may be due
        self._stopping = asyncio.Event()
        self._running: dict[int, asyncio.Task[None]] = {}
        self._main: asyncio.Task[None] | None = None
        self._known: BotIdentity | None = None
        self._last_claim_loop: float | None = None
        # One outage for all of the worker's database work: whichever of a claim, a lease renewal
        # or a job's outcome meets it first logs it, and any of them succeeding ends it.
        self._database = Outage(log, "the worker's database access", clock=clock)

    def wake(self) -> None:
        """A new job was recorded: look now instead of at the next poll."""
        self._recorded = True
        self._wakeup.set()

    def start(self) -> None:
        self._main = asyncio.create_task(self._supervise(), name=f"worker {self.worker_id}")

    def status(self) -> WorkerStatus:
        last = self._last_claim_loop
        return WorkerStatus(
            running=self._main is not None and not self._main.done(),
            identity_known=self._known is not None,
            since_claim_loop=None if last is None else self._clock() - last,
            database_error=self._database.error,
        )

    async def _supervise(self) -> None:
        """Keep :meth:`run` going: an exception it did not expect is logged and the loop restarts."""
        restarts = 0
        while not self._stopping.is_set():
            try:
                await self.run()
            except Exception:
                restarts += 1
                log.exception("worker loop failed; restarting it")
                await self._pause(restarts)
            else:
                restarts = 0

    async def _pause(self, attempt: int) -> None:
        """Back off before retrying the database, waking early for shutdown."""
        delay = backoff_delay(attempt, base=self.options.db_retry_base, cap=self.options.db_retry_cap)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), timeout=delay)

    async def run(self) -> None:
        identity = await self._wait_for_identity()
        if identity is None:
            return
        heartbeat = asyncio.create_task(self._heartbeat(), name="lease heartbeat")
        try:
            while not self._stopping.is_set():
                free = self.options.concurrency - len(self._running)
                claimed = []
                if free > 0:  # with every slot busy there is nothing to ask the database
                    try:
                        claimed = await self.store.claim(
                            worker_id=self.worker_id,
                            limit=free,
                            lease_seconds=self.options.lease_seconds,
                            share=self.options.share(),
                        )
                    except Exception as exc:  # noqa: BLE001 - a failed claim is retried, never fatal
                        self._database.failed(exc, during="claiming jobs")
                        await self._pause(self._database.failures)
                        continue
                    self._database.recovered()
                self._last_claim_loop = self._clock()
                for job in claimed:
                    task = asyncio.create_task(self._run_jobs([job], identity), name=f"job {job.id}")
                    self._running[job.id] = task
                    task.add_done_callback(self._finished)
                # Either the queue had nothing more or every slot is busy: wait for a new job,
                # a finished one, or the next poll (other processes may enqueue too).
                await self._idle()
        finally:
            # Bounded: a lease renewal stuck on a database that does not answer is left behind.
            await cancel_and_wait(heartbeat, within=self.options.stop_margin)

    async def _wait_for_identity(self) -> BotIdentity | None:
        """Nothing is dispatched before the bot knows who it is, or self-loop guards could not work."""
        if self._known is not None:
            return self._known
        identity_task = asyncio.ensure_future(self._identity())
        stop_task = asyncio.ensure_future(self._stopping.wait())
        done, _ = await asyncio.wait({identity_task, stop_task}, return_when=asyncio.FIRST_COMPLETED)
        stop_task.cancel()
        if identity_task not in done:
            await cancel_and_wait(identity_task, within=self.options.stop_margin)
            return None
        self._known = identity_task.result()
        return self._known

    def _finished(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and (exc := task.exception()) is not None:
            # Not a job's failure (that is recorded on the job): the slot's own bookkeeping broke.
            # Its jobs' leases are no longer renewed, so they run again once those expire.
            log.error("a worker slot stopped unexpectedly", exc_info=exc)
        for job_id in [job_id for job_id, running in self._running.items() if running is task]:
            del self._running[job_id]
        self._job_ended.set()
        self._wakeup.set()

    async def _idle(self) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wakeup.wait(), timeout=self.options.poll_seconds)
        if self._recorded:
            # Coalesce a burst of new deliveries into one claim: during a flood a claim per
            # delivery would compete with the webhook endpoint for the database. But a job that
            # ends frees its subject's next job: claim at once then, or a flood of one pull
            # request's deliveries would be worked one job per interval.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._job_ended.wait(), timeout=self.options.claim_interval)
        self._recorded = False
        self._job_ended.clear()
        self._wakeup.clear()

    async def _heartbeat(self) -> None:
        interval = self.options.lease_seconds / 3
        delay = interval
        while True:
            await asyncio.sleep(delay)
            delay = interval
            if not self._running:
                continue
            try:
                await self.store.extend_leases(
                    list(self._running), worker_id=self.worker_id, lease_seconds=self.options.lease_seconds
                )
            except Exception as exc:  # noqa: BLE001 - retried sooner, so leases outlive a short outage
                self._database.failed(exc, during="renewing job leases")
                delay = min(
                    interval,
                    backoff_delay(
                        self._database.failures,
                        base=self.options.db_retry_base,
                        cap=self.options.db_retry_cap,
                    ),
                )
            else:
                self._database.recovered()

    async def _persist(self, what: str, write: Callable[[], Awaitable[T]]) -> T | None:
        """Write a job's progress or outcome, retrying through a database outage.

        On shutdown a failed write is given up (None): the job's lease expires and it runs again,
        which is safe because every side effect is idempotent.
        """
        while True:
            try:
                result = await write()
            except Exception as exc:  # noqa: BLE001 - a database fault must not lose the job
                self._database.failed(exc, during=f"recording {what}")
                if self._stopping.is_set():
                    log.warning("could not record %s before shutdown; it runs again after its lease", what)
                    return None
                await self._pause(self._database.failures)
                continue
            self._database.recovered()
            return result

    async def stop(self) -> None:
        """Stop claiming, give running jobs ``shutdown_grace`` seconds, hand the rest back.

        Ends within ``shutdown_grace`` plus twice ``stop_margin`` whatever the database does: a
        claim, a job or a hand-back stuck on a database that does not answer is cancelled and,
        if it does not end even then, abandoned (its jobs run again after their leases). The
        caller's own cancellation is never swallowed."""
        self._stopping.set()
        self._wakeup.set()
        grace, margin = self.options.shutdown_grace, self.options.stop_margin
        deadline = asyncio.get_running_loop().time() + grace
        if self._main is not None:
            done, _ = await asyncio.wait({self._main}, timeout=grace)
            if not done:
                log.warning("the claim loop did not stop within %.0fs; cancelling it", grace)
                if not await cancel_and_wait(self._main, within=margin):
                    log.warning("the claim loop did not end when cancelled either; leaving it behind")
                    self._main = None  # abandoned: it claims nothing more (``_stopping`` is set)
        running = dict(self._running)
        if not running:
            return
        left = max(0.0, deadline - asyncio.get_running_loop().time())
        log.info("waiting up to %.0fs for %d running job(s)", left, len(running))
        _, pending = await asyncio.wait(set(running.values()), timeout=left)
        # A slot may have moved on to its subject's next job meanwhile: hand back what each
        # unfinished slot is running now.
        unfinished = [job_id for job_id, task in self._running.items() if task in pending]
        for task in pending:
            task.cancel()
        if pending:
            _, stuck = await asyncio.wait(pending, timeout=margin)
            for task in stuck:
                abandon(task)
        if unfinished:
            try:
                await bounded(self.store.release(unfinished, worker_id=self.worker_id), within=margin)
            except Exception as exc:  # noqa: BLE001 - shutdown goes on; the leases expire instead
                log.warning(
                    "could not hand %d unfinished job(s) back (%s); they run again after their leases",
                    len(unfinished),
                    error_text(exc),
                )
            else:
                log.info("handed %d unfinished job(s) back to the queue", len(unfinished))

    # ------------------------------------------------------------------ one job
    async def _run_jobs(self, run: list[Job], identity: BotIdentity) -> None:
        """Work ``run`` (jobs of one subject, oldest first) in this slot, then each run of the
        subject that the last write claimed, until the subject has nothing free to start.

        Ends are written in groups (``WorkerOptions.end_delay``); the write that ends a run also
        claims the next one. A retry writes the ends before it, then puts the job back and the
        rest of the run behind it. On shutdown the ends so far are written and the rest of the
        run is handed back."""
        task = asyncio.current_task()
        assert task is not None
        queue = deque(run)
        ends: list[JobEnd] = []
        oldest_end = 0.0

        def drop_rest() -> None:
            for waiting in queue:
                self._running.pop(waiting.id, None)
            queue.clear()

        while queue:
            if self._stopping.is_set():
                await self._write_ends(ends, last=False)
                await self._hand_back(list(queue))
                return
            await self.ack_first.wait(self.options.ack_first_wait)
            job = queue.popleft()
            started = self._clock()
            status, error, retry_in = await self._jobs.run(job, identity, retry=self.options.retry_policy())
            if retry_in is not None:
                await self._write_ends(ends, last=False)
                retry = partial(
                    self.store.retry_later,
                    job,
                    worker_id=self.worker_id,
                    delay=retry_in.delay,
                    error=str(error),
                    counted=retry_in.counted,
                )
                await self._persist("the job's retry", retry)
                self._running.pop(job.id, None)
                drop_rest()  # the retry put them back to waiting behind it
                return
            if not ends:
                oldest_end = self._clock()
            ends.append(JobEnd(job, status, error, ended_at=self.store.now()))
            now = self._clock()
            if (
                not queue
                or now - started >= self.options.end_delay
                or now - oldest_end >= self.options.end_delay
            ):
                following = await self._write_ends(ends, last=not queue)
                ends = []
                if following is None:  # no longer ours: another worker has the subject
                    drop_rest()
                    return
                for job_next in following:
                    self._running[job_next.id] = task
                queue.extend(following)

    async def _write_ends(self, ends: list[JobEnd], *, last: bool) -> list[Job] | None:
        """Record the ends of jobs of one run. ``last``: the run is over, so the same write claims
        the subject's next run (nothing once stopping). Returns that run, or None when a job was
        no longer ours (its lease expired and another worker took the subject over)."""
        if not ends:
            return []
        claim = last and not self._stopping.is_set()
        outcome = await self._persist(
            "the jobs' outcomes",
            lambda: self.store.finish_jobs(
                ends,
                worker_id=self.worker_id,
                claim_next_for=self.options.lease_seconds if claim else None,
                run_limit=self.options.run_length,
                run_continues=not last,
            ),
        )
        for end in ends:
            self._running.pop(end.job.id, None)
        if outcome is None:  # given up on shutdown: the leases expire and the jobs run again
            return []
        ours, following = outcome
        if not ours:
            log.warning(
                "jobs %s: a lease expired and another worker took them over", [e.job.id for e in ends]
            )
            return None
        return following

    async def _hand_back(self, jobs: list[Job]) -> None:
        """Shutdown: the unstarted rest of a run goes back to the queue."""
        if not jobs:
            return
        ids = [job.id for job in jobs]
        for job_id in ids:
            self._running.pop(job_id, None)
        try:
            await self.store.release(ids, worker_id=self.worker_id)
        except Exception as exc:  # noqa: BLE001 - shutdown goes on; the leases expire instead
            log.warning(
                "could not hand %d job(s) back (%s); they run after their leases", len(ids), error_text(exc)
            )

    async def _write_handler_done(self, job: Job, name: str) -> None:
        await self._persist(f"handler {name} as done", lambda: self.store.mark_handler_done(job, name))
