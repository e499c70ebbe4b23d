"""``Store``: the ledger and the queue over a storage backend; ``Ledger``: group commit for the
webhook endpoint.

The backend (``backend.Backend``, chosen once from the URL by ``connect.open_backend``) runs the
hot writes its own fastest way: on SQLite every write goes to the one writer thread
(``sqlite.py``, ``sqlite_writer.py``); on PostgreSQL the ledger insert, the claim and the finish
go to asyncpg directly (``postgres.py``) and each other queue write is one transaction on the
async engine's pool (``ops.py`` holds the transactions both share). Reads (``delivery``, ``job``,
``jobs_by_status``, ``pending_by_status``, ``all_jobs``, ``queue_stats``) go through
``backend.read()``, which on SQLite means their own connections, never blocked by the writer (WAL).

Other modules' own tables (``metadata``), off the hot path, go through the backend too: read
with ``store.backend.read()``; write with ``store.begin()`` (``backend.begin()``), which on SQLite
takes the write lock at BEGIN and waits (``busy_timeout``) while the writer commits.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from functools import partial
from typing import Any, TypeVar

from sqlalchemy import Connection, func, literal, select, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection

from ..settings.config import DEFAULT_POOL_SIZE
from . import ops, schema
from .backend import Backend
from .connect import open_backend
from .model import IncomingDelivery, Job, JobEnd, QueueStats
from .schema import JobStatus, deliveries, schema_version

log = logging.getLogger(__name__)

T = TypeVar("T")

NO_SHARE_BOUND = 2**31 - 1  # ``claim`` without a per-installation bound


class Store:
    """Ledger and queue. ``clock`` (epoch seconds) decides leases and due times; tests pass a fake."""

    def __init__(
        self,
        url: str,
        *,
        sqlite_synchronous: str = "FULL",
        clock: Callable[[], float] = time.time,
        pool_size: int = DEFAULT_POOL_SIZE,
    ) -> None:
        self.url = url
        self._clock = clock
        self.backend: Backend = open_backend(url, sqlite_synchronous=sqlite_synchronous, pool_size=pool_size)
        self.ledger_in_flight = self.backend.ledger_in_flight  # see ``Ledger``

    def now(self) -> float:
        """The store's clock (epoch seconds): what leases, due times and ``updated_at`` use."""
        return self._clock()

    async def _write(self, fn: Callable[[Connection], T], *, durable: bool = False) -> T:
        """Run one transaction function (``ops.py``) the backend's way. ``durable``: the
        ledger's (synced before the answer)."""
        return await self.backend.write(fn, durable=durable)

    @contextlib.asynccontextmanager
    async def begin(self) -> AsyncIterator[AsyncConnection]:
        """A write transaction for tables outside the hot path (see the module doc)."""
        async with self.backend.begin() as conn:
            yield conn

    # ------------------------------------------------------------------ schema
    async def create_schema(self) -> None:
        """Create or upgrade the schema (see ``schema.py``); safe when several processes race."""
        async with self.begin() as conn:
            await self.backend.lock_for_upgrade(conn)
            applied = await conn.run_sync(schema.upgrade)
        if applied:
            log.info("database schema at version %d (applied %s)", schema.SCHEMA_VERSION, applied)

    async def close(self) -> None:
        await self.backend.close()

    async def ping(self) -> bool:
        try:
            async with self.backend.read() as conn:
                await conn.execute(select(literal(1)))
        except (SQLAlchemyError, OSError, TimeoutError) as exc:
            log.warning("database ping failed: %s", type(exc).__name__)
            return False
        return True

    # ------------------------------------------------------------------ ledger
    async def record_deliveries(self, batch: Sequence[IncomingDelivery]) -> list[bool]:
        """Record deliveries (each also its job) in one transaction; return, per delivery, whether
        it was new. A delivery id seen before (in this batch or ever) is a duplicate: no row.
        Raises the first failure if any delivery could not be recorded (the others are)."""
        answers = await self.record_each(batch)
        for answer in answers:
            if isinstance(answer, Exception):
                raise answer
        return [bool(a) for a in answers]

    async def record_each(self, batch: Sequence[IncomingDelivery]) -> list[bool | Exception]:
        """Like ``record_deliveries``, but a delivery that cannot be recorded (a value the database
        refuses) gets its exception as its answer while the rest of the batch commits.

        A delivery whose body digest was recorded before under another id (in this batch or
        ever) is a duplicate too: a captured body replayed with a new ``X-GitHub-Delivery``.
        GitHub's own redeliveries keep their id, and no two of its deliveries carry the same body
        (each names its own event: ids, shas, timestamps), so the digest only ever matches a
        replay."""
        if not batch:
            return []
        unique: dict[str, IncomingDelivery] = {}
        digests: set[bytes] = set()
        for item in batch:
            if item.delivery_id in unique or item.body_digest in digests:
                continue
            unique[item.delivery_id] = item
            if item.body_digest is not None:
                digests.add(item.body_digest)
        items = list(unique.values())
        outcomes = await self.backend.record(items, self._clock())
        # The first occurrence of an id inside the batch is the new one; later copies are duplicates.
        seen: set[str] = set()
        answers: list[bool | Exception] = []
        for d in batch:
            first = d.delivery_id not in seen and unique.get(d.delivery_id) is d
            answers.append(outcomes[d.delivery_id] if first else False)
            seen.add(d.delivery_id)
        return answers

    async def delivery(self, delivery_id: str) -> dict[str, Any] | None:
        async with self.backend.read() as conn:
            found = await conn.execute(select(deliveries).where(deliveries.c.delivery_id == delivery_id))
            row = found.first()
        return dict(row._mapping) if row else None

    # ------------------------------------------------------------------ queue
    async def claim(
        self, *, worker_id: str, limit: int, lease_seconds: float, share: int | None = None
    ) -> list[Job]:
        """Claim up to ``limit`` runnable jobs, at most one per subject, in fair turns between
        installations (``ops.FAIR_TURNS``); ``share``: at most this many of one installation's
        jobs running under ``worker_id`` (None: no bound)."""
        if limit <= 0:
            return []
        return await self.backend.claim(
            worker_id=worker_id,
            limit=limit,
            lease_seconds=lease_seconds,
            now=self._clock(),
            share=NO_SHARE_BOUND if share is None else share,
        )

    async def extend_leases(self, job_ids: Sequence[int], *, worker_id: str, lease_seconds: float) -> None:
        """Heartbeat: keep running jobs ours while they work."""
        if job_ids:
            await self._write(
                partial(
                    ops.extend_leases,
                    job_ids=list(job_ids),
                    worker_id=worker_id,
                    lease_seconds=lease_seconds,
                    now=self._clock(),
                )
            )

    async def mark_handler_done(self, job: Job, handler: str) -> None:
        """Remember a handler that succeeded, so a retry of the job does not run it again."""
        job.done_handlers.append(handler)
        await self._write(
            partial(
                ops.mark_handler_done, job_id=job.id, done_handlers=list(job.done_handlers), now=self._clock()
            )
        )

    async def finish(self, job: Job, *, worker_id: str, status: JobStatus, error: str | None = None) -> bool:
        """End a job as done, failed or skipped, and make the next waiting one of its subject its
        head. Returns False when the job is no longer ours (its lease expired and another worker
        took it)."""
        ours, _ = await self.finish_jobs([JobEnd(job, status, error)], worker_id=worker_id)
        return ours

    async def finish_jobs(
        self,
        ends: Sequence[JobEnd],
        *,
        worker_id: str,
        claim_next_for: float | None = None,
        run_limit: int = 1,
        run_continues: bool = False,
    ) -> tuple[bool, list[Job]]:
        """Write the ends of jobs of one subject in one transaction (a worker's run, oldest first).

        With ``claim_next_for`` (a lease in seconds), the same transaction claims the subject's
        next run for ``worker_id``: up to ``run_limit`` rows that are free to start, oldest first
        (``model.run_of``), which the worker then works in order. While one pull request's backlog
        drains, that makes a write per run instead of a finish and a claim per job. Without it,
        the subject's next waiting row becomes its head for any worker, unless ``run_continues``
        (the worker still holds the rest of the run: nothing to promote).

        Returns (whether every job was still ours, the claimed run). When a job was not, nothing
        is claimed: its lease expired and another worker has the subject now.
        """
        if not ends:
            return True, []
        if len({end.job.subject for end in ends}) != 1:
            raise ValueError("finish_jobs takes the jobs of one subject")
        return await self.backend.finish(
            ends,
            worker_id=worker_id,
            now=self._clock(),
            claim_next_for=claim_next_for,
            run_limit=run_limit,
            run_continues=run_continues,
        )

    async def retry_later(
        self, job: Job, *, worker_id: str, delay: float, error: str, counted: bool = True
    ) -> bool:
        """Put a job back in the queue to run after ``delay`` seconds; later jobs of its subject
        (the rest of its run too) wait behind it. ``counted`` False: the attempt is given back
        (waiting out a rate limit is no failure)."""
        now = self._clock()
        return await self._write(
            partial(
                ops.retry_later,
                job=job,
                worker_id=worker_id,
                run_after=now + delay,
                error=error,
                now=now,
                counted=counted,
            )
        )

    async def release(self, job_ids: Sequence[int], *, worker_id: str) -> None:
        """Give running jobs back without counting the attempt (graceful shutdown); each subject's
        oldest is its head again."""
        if job_ids:
            await self._write(
                partial(ops.release, job_ids=list(job_ids), worker_id=worker_id, now=self._clock())
            )

    async def schedule(self, item: IncomingDelivery, *, run_after: float) -> bool:
        """Record a job the bot gives itself, due at ``run_after`` (epoch seconds on the store's
        clock): a durable timer. Its delivery id is the caller's deterministic key, so asking
        again for the same key records nothing (returns False)."""
        return await self._write(partial(ops.schedule, item=item, run_after=run_after, now=self._clock()))

    async def job(self, job_id: int) -> dict[str, Any] | None:
        async with self.backend.read() as conn:
            row = (await conn.execute(select(deliveries).where(deliveries.c.id == job_id))).first()
        return dict(row._mapping) if row else None

    async def jobs_by_status(self) -> dict[str, int]:
        async with self.backend.read() as conn:
            rows = await conn.execute(select(deliveries.c.status, func.count()).group_by(deliveries.c.status))
            return {status: count for status, count in rows}

    async def pending_by_status(self) -> dict[JobStatus, int]:
        """Unfinished jobs by status, every one of ``PENDING`` (an index range: finished rows,
        which stay forever, are never counted)."""
        async with self.backend.read() as conn:
            return await conn.run_sync(ops.pending_by_status)

    async def all_jobs(self) -> list[dict[str, Any]]:
        async with self.backend.read() as conn:
            rows = await conn.execute(select(deliveries).order_by(deliveries.c.id))
            return [dict(r._mapping) for r in rows]

    # ------------------------------------------------------------------ health
    async def write_probe(self) -> None:
        """Commit a tiny real write through the same path as the ledger (raises on failure): a
        full disk or a lost write lock shows here, where a ``SELECT 1`` would still answer."""
        await self._write(_probe, durable=True)

    async def queue_stats(self, now: float | None = None) -> QueueStats:
        """Queue depth and the age of the oldest due job, for health and metrics."""
        async with self.backend.read() as conn:
            return await conn.run_sync(ops.queue_stats, self._clock() if now is None else now)


def _probe(conn: Connection) -> None:
    # Rewrites the version rows with themselves: a real page write, no change of content.
    conn.execute(update(schema_version).values(version=schema_version.c.version))


class Ledger:
    """Group commit in front of :meth:`Store.record_each`.

    Each webhook request waits for its own row to be committed, but concurrent requests share
    one transaction: while a batch commits, the next accumulates. Durability per answer, at the
    cost of one commit per batch rather than per delivery. A delivery the database refuses fails
    alone; a failed commit fails its whole batch.

    Up to the store's ``ledger_in_flight`` batches commit at once: on SQLite one, since its writer
    thread already groups whatever waits; on PostgreSQL a few, since a batch spends most of its
    time waiting for the server's fsync, which the server shares between concurrent commits.
    (Two deliveries of one pull request a few milliseconds apart may then get ids in either
    order; GitHub does not order its deliveries either.)
    """

    def __init__(self, store: Store, *, max_batch: int = 512) -> None:
        self._store = store
        self._max_batch = max_batch
        self._pending: list[tuple[IncomingDelivery, asyncio.Future[bool]]] = []
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closing = False

    def start(self) -> None:
        self._closing = False
        self._task = asyncio.create_task(self._run(), name="ledger-writer")

    async def stop(self) -> None:
        """Commit what is pending, then stop (never cancels a commit in flight)."""
        if self._task is None:
            return
        self._closing = True
        self._wakeup.set()
        await self._task
        self._task = None

    async def record(self, delivery: IncomingDelivery) -> bool:
        """Durably record a delivery and its job; True if new, False for a duplicate id."""
        if self._task is None or self._closing:
            raise RuntimeError("ledger writer is not running")
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._pending.append((delivery, future))
        self._wakeup.set()
        return await future

    async def _run(self) -> None:
        slots = asyncio.Semaphore(self._store.ledger_in_flight)
        flushing: set[asyncio.Task[None]] = set()
        while self._pending or not self._closing:
            if not self._pending:
                await self._wakeup.wait()
                self._wakeup.clear()
                continue
            await slots.acquire()  # meanwhile more requests join the next batch
            batch = self._pending[: self._max_batch]
            del self._pending[: self._max_batch]
            task = asyncio.create_task(self._flush(batch, slots))
            flushing.add(task)
            task.add_done_callback(flushing.discard)
        if flushing:
            await asyncio.wait(flushing)

    async def _flush(
        self, batch: list[tuple[IncomingDelivery, asyncio.Future[bool]]], slots: asyncio.Semaphore
    ) -> None:
        try:
            answers = await self._store.record_each([delivery for delivery, _ in batch])
        except Exception as exc:  # noqa: BLE001 - each waiting request receives the failure as its answer
            answers = [exc] * len(batch)
        finally:
            slots.release()
        for (_, future), answer in zip(batch, answers, strict=True):
            if future.done():
                continue
            if isinstance(answer, Exception):
                future.set_exception(answer)
            else:
                future.set_result(answer)
