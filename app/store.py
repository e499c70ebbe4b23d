"""The delivery ledger and the job queue: one SQL database, one code path (SQLAlchemy 2 async Core).

SQLite (WAL) by default, PostgreSQL when several processes share the work. The ledger row is a
permanent claim on a delivery id: a redelivery of the same id is recognised forever, so nothing
here ever prunes ``deliveries``. A delivery and its job are written in one transaction, so a 202
means both are durable.

Queue rules, enforced by the claim query itself so that any number of workers can share it:
- jobs of one subject (``owner/repo#N``) run one at a time, in arrival (id) order: a job is
  claimable only when no earlier job of its subject is still queued or running;
- a claim is a lease; a job whose lease ran out (its process died) is claimable again;
- on PostgreSQL the claim uses ``FOR UPDATE SKIP LOCKED`` so workers never double-claim.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    and_,
    event,
    func,
    insert,
    literal,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1

metadata = MetaData()

schema_version = Table(
    "schema_version",
    metadata,
    Column("version", Integer, nullable=False),
)

deliveries = Table(
    "deliveries",
    metadata,
    Column("delivery_id", String(255), primary_key=True),
    Column("event", String(100), nullable=False),
    Column("action", String(100)),
    Column("installation_id", BigInteger),
    Column("repo", String(300)),
    Column("received_at", DateTime, nullable=False),
    # received -> done | failed | skipped; mirrors the job's outcome for operators.
    Column("status", String(20), nullable=False),
)

jobs = Table(
    "jobs",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("delivery_id", String(255), nullable=False, unique=True),
    Column("subject", String(400), nullable=False),
    Column("event", String(100), nullable=False),
    Column("payload", LargeBinary, nullable=False),
    # queued -> running -> done | failed | skipped (running -> queued again on retry or release)
    Column("status", String(20), nullable=False),
    Column("attempts", Integer, nullable=False, default=0),
    Column("run_after", DateTime, nullable=False),
    Column("lease_until", DateTime),
    Column("worker_id", String(100)),
    Column("error", Text),
    Column("done_handlers", Text, nullable=False, default="[]"),
    Column("created_at", DateTime, nullable=False),
    Column("updated_at", DateTime, nullable=False),
    Index("ix_jobs_status_id", "status", "id"),
    Index("ix_jobs_subject_id", "subject", "id"),
)

ACTIVE = ("queued", "running")


def utcnow() -> datetime:
    """Naive UTC: both SQLite and PostgreSQL store and compare it the same way."""
    return datetime.now(UTC).replace(tzinfo=None)


@dataclass(frozen=True, slots=True)
class IncomingDelivery:
    """What the webhook endpoint learned from a verified delivery, before any model is built."""

    delivery_id: str
    event: str
    action: str | None
    installation_id: int | None
    repo: str | None
    subject: str
    payload: bytes


@dataclass(slots=True)
class Job:
    """A claimed job. ``done_handlers`` lists handlers that already succeeded in an earlier attempt."""

    id: int
    delivery_id: str
    subject: str
    event: str
    payload: bytes
    attempts: int
    done_handlers: list[str] = field(default_factory=list)


class Store:
    """Ledger and queue over one async engine."""

    def __init__(self, url: str, *, sqlite_synchronous: str = "FULL") -> None:
        self.url = url
        self.is_sqlite = make_url(url).get_backend_name() == "sqlite"
        if self.is_sqlite:
            self._prepare_sqlite_path(url)
            self.engine: AsyncEngine = create_async_engine(url, pool_size=5, max_overflow=0)
            self._configure_sqlite(self.engine, sqlite_synchronous)
        else:
            self.engine = create_async_engine(url, pool_size=10, max_overflow=5, pool_pre_ping=True)

    @staticmethod
    def _prepare_sqlite_path(url: str) -> None:
        database = make_url(url).database
        if database and database != ":memory:":
            from pathlib import Path

            Path(database).parent.mkdir(parents=True, exist_ok=True)

    @staticmethod
    def _configure_sqlite(engine: AsyncEngine, synchronous: str) -> None:
        # pysqlite's implicit transactions start too late for concurrent writers; take the write
        # lock at BEGIN (IMMEDIATE) so two connections never deadlock upgrading a read lock.
        @event.listens_for(engine.sync_engine, "connect")
        def _on_connect(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.isolation_level = None
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute(f"PRAGMA synchronous={synchronous}")
            cursor.execute("PRAGMA busy_timeout=10000")
            cursor.close()

        @event.listens_for(engine.sync_engine, "begin")
        def _on_begin(connection: Any) -> None:
            connection.exec_driver_sql("BEGIN IMMEDIATE")

    # ------------------------------------------------------------------ schema
    async def create_schema(self) -> None:
        """Create tables if missing and record the schema version (idempotent, safe to race)."""
        async with self.engine.begin() as conn:
            if not self.is_sqlite:
                # Several processes may start at once; serialise the DDL on PostgreSQL.
                await conn.execute(text("SELECT pg_advisory_xact_lock(727274)"))
            await conn.run_sync(metadata.create_all)
            current = (await conn.execute(select(func.max(schema_version.c.version)))).scalar()
            if current is None:
                await conn.execute(insert(schema_version).values(version=SCHEMA_VERSION))
            elif current > SCHEMA_VERSION:
                raise RuntimeError(
                    f"database schema version {current} is newer than this code ({SCHEMA_VERSION}); "
                    "upgrade revbot before pointing it at this database"
                )

    async def close(self) -> None:
        await self.engine.dispose()

    async def ping(self) -> bool:
        try:
            async with self.engine.connect() as conn:
                await conn.execute(select(literal(1)))
        except (SQLAlchemyError, OSError, TimeoutError) as exc:
            log.warning("database ping failed: %s", type(exc).__name__)
            return False
        return True

    # ------------------------------------------------------------------ ledger
    def _insert_ignoring_duplicates(self) -> Any:
        dialect_insert = sqlite_insert if self.is_sqlite else pg_insert
        return (
            dialect_insert(deliveries)
            .on_conflict_do_nothing(index_elements=["delivery_id"])
            .returning(deliveries.c.delivery_id)
        )

    async def record_deliveries(self, batch: Sequence[IncomingDelivery]) -> list[bool]:
        """Write ledger rows and their jobs in one transaction; return, per delivery, whether it was new.

        A delivery id seen before (in this batch or ever) is a duplicate: no row, no job.
        """
        if not batch:
            return []
        now = utcnow()
        unique: dict[str, IncomingDelivery] = {}
        for item in batch:
            unique.setdefault(item.delivery_id, item)
        async with self.engine.begin() as conn:
            result = await conn.execute(
                self._insert_ignoring_duplicates(),
                [
                    {
                        "delivery_id": d.delivery_id,
                        "event": d.event,
                        "action": d.action,
                        "installation_id": d.installation_id,
                        "repo": d.repo,
                        "received_at": now,
                        "status": "received",
                    }
                    for d in unique.values()
                ],
            )
            inserted = {row[0] for row in result}
            if inserted:
                await conn.execute(
                    insert(jobs),
                    [
                        {
                            "delivery_id": d.delivery_id,
                            "subject": d.subject,
                            "event": d.event,
                            "payload": d.payload,
                            "status": "queued",
                            "attempts": 0,
                            "run_after": now,
                            "done_handlers": "[]",
                            "created_at": now,
                            "updated_at": now,
                        }
                        for d in unique.values()
                        if d.delivery_id in inserted
                    ],
                )
        # The first occurrence of an id inside the batch is the new one; later copies are duplicates.
        seen: set[str] = set()
        answers = []
        for d in batch:
            answers.append(d.delivery_id in inserted and d.delivery_id not in seen)
            seen.add(d.delivery_id)
        return answers

    async def delivery(self, delivery_id: str) -> dict[str, Any] | None:
        async with self.engine.connect() as conn:
            row = (
                await conn.execute(select(deliveries).where(deliveries.c.delivery_id == delivery_id))
            ).first()
        return dict(row._mapping) if row else None

    # ------------------------------------------------------------------ queue
    async def claim(self, *, worker_id: str, limit: int, lease_seconds: float) -> list[Job]:
        """Claim up to ``limit`` runnable jobs, at most one per subject, oldest first."""
        if limit <= 0:
            return []
        now = utcnow()
        j, k = jobs.alias("j"), jobs.alias("k")
        earlier_unfinished = (
            select(literal(1))
            .where(k.c.subject == j.c.subject, k.c.id < j.c.id, k.c.status.in_(ACTIVE))
            .exists()
        )
        runnable = or_(
            and_(j.c.status == "queued", j.c.run_after <= now),
            and_(j.c.status == "running", j.c.lease_until < now),
        )
        candidates = (
            select(j.c.id)
            .where(runnable, ~earlier_unfinished)
            .order_by(j.c.id)
            .limit(limit)
            .with_for_update(skip_locked=True, of=j)
        )
        async with self.engine.begin() as conn:
            ids = [row[0] for row in await conn.execute(candidates)]
            if not ids:
                return []
            rows = await conn.execute(
                update(jobs)
                .where(jobs.c.id.in_(ids))
                .values(
                    status="running",
                    attempts=jobs.c.attempts + 1,
                    lease_until=now + timedelta(seconds=lease_seconds),
                    worker_id=worker_id,
                    updated_at=now,
                )
                .returning(
                    jobs.c.id,
                    jobs.c.delivery_id,
                    jobs.c.subject,
                    jobs.c.event,
                    jobs.c.payload,
                    jobs.c.attempts,
                    jobs.c.done_handlers,
                )
            )
            claimed = [
                Job(
                    id=r.id,
                    delivery_id=r.delivery_id,
                    subject=r.subject,
                    event=r.event,
                    payload=bytes(r.payload),
                    attempts=r.attempts,
                    done_handlers=list(json.loads(r.done_handlers)),
                )
                for r in rows
            ]
        claimed.sort(key=lambda job: job.id)
        return claimed

    async def extend_leases(self, job_ids: Sequence[int], *, worker_id: str, lease_seconds: float) -> None:
        """Heartbeat: keep running jobs ours while they work."""
        if not job_ids:
            return
        now = utcnow()
        async with self.engine.begin() as conn:
            await conn.execute(
                update(jobs)
                .where(
                    jobs.c.id.in_(list(job_ids)), jobs.c.worker_id == worker_id, jobs.c.status == "running"
                )
                .values(lease_until=now + timedelta(seconds=lease_seconds), updated_at=now)
            )

    async def mark_handler_done(self, job: Job, handler: str) -> None:
        """Remember a handler that succeeded, so a retry of the job does not run it again."""
        job.done_handlers.append(handler)
        async with self.engine.begin() as conn:
            await conn.execute(
                update(jobs)
                .where(jobs.c.id == job.id)
                .values(done_handlers=json.dumps(job.done_handlers), updated_at=utcnow())
            )

    async def finish(self, job: Job, *, worker_id: str, status: str, error: str | None = None) -> bool:
        """End a job as done, failed or skipped; the ledger row takes the same status.

        Returns False when the job is no longer ours (its lease expired and another worker took it).
        """
        now = utcnow()
        async with self.engine.begin() as conn:
            result = await conn.execute(
                update(jobs)
                .where(jobs.c.id == job.id, jobs.c.worker_id == worker_id, jobs.c.status == "running")
                .values(status=status, error=error, lease_until=None, updated_at=now)
            )
            if result.rowcount != 1:
                return False
            await conn.execute(
                update(deliveries).where(deliveries.c.delivery_id == job.delivery_id).values(status=status)
            )
        return True

    async def retry_later(self, job: Job, *, worker_id: str, delay: float, error: str) -> bool:
        """Put a job back in the queue to run after ``delay`` seconds; later jobs of its subject wait."""
        now = utcnow()
        async with self.engine.begin() as conn:
            result = await conn.execute(
                update(jobs)
                .where(jobs.c.id == job.id, jobs.c.worker_id == worker_id, jobs.c.status == "running")
                .values(
                    status="queued",
                    error=error,
                    run_after=now + timedelta(seconds=delay),
                    lease_until=None,
                    worker_id=None,
                    updated_at=now,
                )
            )
        return result.rowcount == 1

    async def release(self, job_ids: Sequence[int], *, worker_id: str) -> None:
        """Give running jobs back without counting the attempt (graceful shutdown)."""
        if not job_ids:
            return
        now = utcnow()
        async with self.engine.begin() as conn:
            await conn.execute(
                update(jobs)
                .where(
                    jobs.c.id.in_(list(job_ids)), jobs.c.worker_id == worker_id, jobs.c.status == "running"
                )
                .values(
                    status="queued",
                    attempts=jobs.c.attempts - 1,
                    lease_until=None,
                    worker_id=None,
                    run_after=now,
                    updated_at=now,
                )
            )

    async def job(self, job_id: int) -> dict[str, Any] | None:
        async with self.engine.connect() as conn:
            row = (await conn.execute(select(jobs).where(jobs.c.id == job_id))).first()
        return dict(row._mapping) if row else None

    async def jobs_by_status(self) -> dict[str, int]:
        async with self.engine.connect() as conn:
            rows = await conn.execute(select(jobs.c.status, func.count()).group_by(jobs.c.status))
            return {status: count for status, count in rows}

    async def all_jobs(self) -> list[dict[str, Any]]:
        async with self.engine.connect() as conn:
            rows = await conn.execute(select(jobs).order_by(jobs.c.id))
            return [dict(r._mapping) for r in rows]


class Ledger:
    """Group commit in front of :meth:`Store.record_deliveries`.

    Each webhook request waits for its own row to be committed, but concurrent requests share
    one transaction: while one batch commits, the next accumulates. Durability per answer, at the
    cost of one commit per batch rather than per delivery.
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
        while self._pending or not self._closing:
            if not self._pending:
                await self._wakeup.wait()
                self._wakeup.clear()
                continue
            await self._flush()

    async def _flush(self) -> None:
        batch = self._pending[: self._max_batch]
        del self._pending[: self._max_batch]
        try:
            answers = await self._store.record_deliveries([delivery for delivery, _ in batch])
        except Exception as exc:  # noqa: BLE001 - each waiting request receives the failure as its answer
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, future), is_new in zip(batch, answers, strict=True):
            if not future.done():
                future.set_result(is_new)
