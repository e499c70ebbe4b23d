"""The delivery ledger and the job queue: one SQL database, one code path (SQLAlchemy 2 async Core).

SQLite (WAL) by default, PostgreSQL when several processes share the work. Each delivery is one
row of ``deliveries``, which is both its ledger entry and its job: the unique ``delivery_id`` is a
permanent claim (a redelivery of the same id is recognised forever, so rows are never deleted)
and the row's queue columns say where its work stands. One row per delivery means one INSERT per
batch on the webhook's answer path, and a 202 means the row is committed.

Queue rules, so that any number of workers can share it:
- deliveries of one subject (``owner/repo#N``) are worked one at a time, in arrival (id) order.
  Only the head of a subject is ``queued``; later ones are ``waiting`` and the next is promoted
  in the transaction that ends the head. Claims therefore scan only subject heads, however long
  one subject's backlog grows, and the claim query still refuses a row with an earlier
  unfinished row of its subject (two web processes racing on one subject cannot break order);
- a claim is a lease; a row whose lease ran out (its process died) is claimable again;
- on PostgreSQL the claim uses ``FOR UPDATE SKIP LOCKED`` so workers never double-claim.

Times are epoch seconds (floats): they compare the same on both databases and cost nothing to
bind on the hot path.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import zlib
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    Float,
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
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from .config import DEFAULT_POOL_SIZE, postgres_engine_options

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
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("delivery_id", String(255), nullable=False, unique=True),
    Column("event", String(100), nullable=False),
    Column("action", String(100)),
    Column("installation_id", BigInteger),
    Column("repo", String(300)),
    Column("subject", String(400), nullable=False),
    Column("payload", LargeBinary, nullable=False),  # zlib-compressed delivery body
    Column("received_at", Float, nullable=False),
    # waiting -> queued -> running -> done | failed | skipped (running -> queued on retry or release)
    Column("status", String(20), nullable=False),
    Column("attempts", Integer, nullable=False, default=0),
    Column("run_after", Float, nullable=False),
    Column("lease_until", Float),
    Column("worker_id", String(100)),
    Column("error", Text),
    Column("done_handlers", Text, nullable=False, default="[]"),
    Column("updated_at", Float, nullable=False),
    Index("ix_deliveries_status_id", "status", "id"),
    Index("ix_deliveries_subject_status_id", "subject", "status", "id"),
)

# Payloads are kept zlib-compressed: webhook JSON shrinks about tenfold, and at level 1 the
# compression costs less CPU than writing the uncompressed pages would.
PAYLOAD_COMPRESSION = 1

ACTIVE = ("queued", "running")
PENDING = ("waiting", "queued", "running")


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


def ledger_rows(batch: Iterable[IncomingDelivery], busy: set[str], now: float) -> list[dict[str, Any]]:
    """The rows for new deliveries: the first of a subject with nothing pending is its head
    (``queued``), every other one ``waiting``. ``busy`` (subjects with pending rows) grows."""
    rows = []
    for d in batch:
        rows.append(
            {
                "delivery_id": d.delivery_id,
                "event": d.event,
                "action": d.action,
                "installation_id": d.installation_id,
                "repo": d.repo,
                "subject": d.subject,
                "payload": zlib.compress(d.payload, PAYLOAD_COMPRESSION),
                "received_at": now,
                "status": "waiting" if d.subject in busy else "queued",
                "attempts": 0,
                "run_after": now,
                "done_handlers": "[]",
                "updated_at": now,
            }
        )
        busy.add(d.subject)
    return rows


@dataclass(frozen=True, slots=True)
class QueueStats:
    """What ``/healthz`` reports about the queue (issue 9)."""

    depth: int
    oldest_due_age: float | None


@dataclass(slots=True)
class Job:
    """A claimed delivery. ``done_handlers`` lists handlers that succeeded in an earlier attempt."""

    id: int
    delivery_id: str
    subject: str
    event: str
    payload: bytes
    attempts: int
    received_at: float = 0.0
    done_handlers: list[str] = field(default_factory=list)


class Store:
    """Ledger and queue over one async engine."""

    def __init__(
        self, url: str, *, sqlite_synchronous: str = "FULL", pool_size: int = DEFAULT_POOL_SIZE
    ) -> None:
        self.url = url
        self.is_sqlite = make_url(url).get_backend_name() == "sqlite"
        # SQLite allows one writer at a time and makes the others poll (busy_timeout); inside one
        # process, queueing writers on an asyncio lock is far cheaper than that polling.
        self._writer = asyncio.Lock() if self.is_sqlite else contextlib.nullcontext()
        self._synchronous = sqlite_synchronous
        if self.is_sqlite:
            self._prepare_sqlite_path(url)
            # Every transaction here ends in commit or rollback before its connection goes back
            # (and closing a connection rolls back an open one), so the pool's extra rollback on
            # return would only cost a thread hop per transaction.
            self.engine: AsyncEngine = create_async_engine(
                url, pool_size=5, max_overflow=0, pool_reset_on_return=None
            )
            self._configure_sqlite(self.engine, sqlite_synchronous)
        else:
            pg_url, options = postgres_engine_options(url, pool_size=pool_size)  # sslmode, pool size
            self.engine = create_async_engine(pg_url, **options)

    @staticmethod
    def _prepare_sqlite_path(url: str) -> None:
        database = make_url(url).database
        if database and database != ":memory:":
            Path(database).parent.mkdir(parents=True, exist_ok=True)

    @staticmethod
    def _configure_sqlite(engine: AsyncEngine, synchronous: str) -> None:
        # pysqlite's implicit transactions start too late for concurrent writers: write
        # transactions take the write lock at BEGIN (IMMEDIATE) so two connections never deadlock
        # upgrading a read lock; reads begin DEFERRED and never block the writer (WAL).
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
            options = connection.get_execution_options()
            wanted = options.get("sqlite_synchronous")
            # Each statement is a thread hop through aiosqlite: change the setting only when needed
            # (``info`` lives as long as the DBAPI connection).
            if wanted is not None and connection.info.get("synchronous") != wanted:
                connection.exec_driver_sql(f"PRAGMA synchronous={wanted}")
                connection.info["synchronous"] = wanted
            connection.exec_driver_sql(f"BEGIN {options.get('sqlite_begin', 'DEFERRED')}")

    @contextlib.asynccontextmanager
    async def _write(self, *, durable: bool = False) -> AsyncIterator[AsyncConnection]:
        """A write transaction, serialised in-process on SQLite.

        ``durable`` transactions (the ledger: a 202 promises the row survives) are synced to disk
        at commit; queue bookkeeping is not, since SQLite's WAL makes it durable with the next
        synced commit or checkpoint, and a job that reverts after a power loss is only redone
        (its side effects are idempotent).
        """
        async with self._writer, self.engine.connect() as conn:
            if self.is_sqlite:
                conn = await conn.execution_options(
                    sqlite_begin="IMMEDIATE",
                    sqlite_synchronous=self._synchronous if durable else "NORMAL",
                )
            async with conn.begin():
                yield conn

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
        """Record deliveries (each also its job) in one transaction; return, per delivery, whether
        it was new. A delivery id seen before (in this batch or ever) is a duplicate: no row."""
        if not batch:
            return []
        now = time.time()
        unique: dict[str, IncomingDelivery] = {}
        for item in batch:
            unique.setdefault(item.delivery_id, item)
        async with self._write(durable=True) as conn:
            busy = set(
                (
                    await conn.execute(
                        select(deliveries.c.subject)
                        .where(
                            deliveries.c.subject.in_({d.subject for d in unique.values()}),
                            deliveries.c.status.in_(PENDING),
                        )
                        .distinct()
                    )
                ).scalars()
            )
            rows = ledger_rows(unique.values(), busy, now)
            inserted = set((await conn.execute(self._insert_ignoring_duplicates(), rows)).scalars())
            if len(inserted) < len(rows):
                skipped = {d.subject for d in unique.values() if d.delivery_id not in inserted}
                await self._fix_heads(conn, skipped)
        # The first occurrence of an id inside the batch is the new one; later copies are duplicates.
        seen: set[str] = set()
        answers = []
        for d in batch:
            answers.append(d.delivery_id in inserted and d.delivery_id not in seen)
            seen.add(d.delivery_id)
        return answers

    async def _fix_heads(self, conn: AsyncConnection, subjects: set[str]) -> None:
        """A duplicate skipped inside a batch may have been the one that made a later row of its
        subject ``waiting``; make sure every subject with waiting rows has a head."""
        for subject in subjects:
            head = (
                await conn.execute(
                    select(func.count()).where(
                        deliveries.c.subject == subject, deliveries.c.status.in_(ACTIVE)
                    )
                )
            ).scalar()
            if not head:
                await self._promote_next(conn, subject, time.time())

    @staticmethod
    async def _promote_next(conn: AsyncConnection, subject: str, now: float) -> None:
        next_in_line = (
            select(func.min(deliveries.c.id))
            .where(deliveries.c.subject == subject, deliveries.c.status == "waiting")
            .scalar_subquery()
        )
        await conn.execute(
            update(deliveries)
            .where(deliveries.c.id == next_in_line)
            .values(status="queued", run_after=now, updated_at=now)
        )

    async def delivery(self, delivery_id: str) -> dict[str, Any] | None:
        async with self.engine.connect() as conn:
            found = await conn.execute(select(deliveries).where(deliveries.c.delivery_id == delivery_id))
            row = found.first()
        return dict(row._mapping) if row else None

    # ------------------------------------------------------------------ queue
    async def claim(self, *, worker_id: str, limit: int, lease_seconds: float) -> list[Job]:
        """Claim up to ``limit`` runnable jobs, at most one per subject, oldest first."""
        if limit <= 0:
            return []
        now = time.time()
        j, k = deliveries.alias("j"), deliveries.alias("k")
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
        async with self._write() as conn:
            ids = [row[0] for row in await conn.execute(candidates)]
            if not ids:
                return []
            rows = await conn.execute(
                update(deliveries)
                .where(deliveries.c.id.in_(ids))
                .values(
                    status="running",
                    attempts=deliveries.c.attempts + 1,
                    lease_until=now + lease_seconds,
                    worker_id=worker_id,
                    updated_at=now,
                )
                .returning(
                    deliveries.c.id,
                    deliveries.c.delivery_id,
                    deliveries.c.subject,
                    deliveries.c.event,
                    deliveries.c.payload,
                    deliveries.c.attempts,
                    deliveries.c.received_at,
                    deliveries.c.done_handlers,
                )
            )
            claimed = [
                Job(
                    id=r.id,
                    delivery_id=r.delivery_id,
                    subject=r.subject,
                    event=r.event,
                    payload=zlib.decompress(r.payload),
                    attempts=r.attempts,
                    received_at=r.received_at,
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
        now = time.time()
        async with self._write() as conn:
            await conn.execute(
                update(deliveries)
                .where(
                    deliveries.c.id.in_(list(job_ids)),
                    deliveries.c.worker_id == worker_id,
                    deliveries.c.status == "running",
                )
                .values(lease_until=now + lease_seconds, updated_at=now)
            )

    async def mark_handler_done(self, job: Job, handler: str) -> None:
        """Remember a handler that succeeded, so a retry of the job does not run it again."""
        job.done_handlers.append(handler)
        async with self._write() as conn:
            await conn.execute(
                update(deliveries)
                .where(deliveries.c.id == job.id)
                .values(done_handlers=json.dumps(job.done_handlers), updated_at=time.time())
            )

    async def finish(self, job: Job, *, worker_id: str, status: str, error: str | None = None) -> bool:
        """End a job as done, failed or skipped, and promote the next waiting one of its subject.

        Returns False when the job is no longer ours (its lease expired and another worker took it).
        """
        now = time.time()
        async with self._write() as conn:
            result = await conn.execute(
                update(deliveries)
                .where(
                    deliveries.c.id == job.id,
                    deliveries.c.worker_id == worker_id,
                    deliveries.c.status == "running",
                )
                # A success keeps the last transient error: it explains the extra attempts.
                .values(
                    status=status, lease_until=None, updated_at=now, **({"error": error} if error else {})
                )
            )
            if bool(result.rowcount != 1):
                return False
            await self._promote_next(conn, job.subject, now)
        return True

    async def retry_later(self, job: Job, *, worker_id: str, delay: float, error: str) -> bool:
        """Put a job back in the queue to run after ``delay`` seconds; later jobs of its subject wait."""
        now = time.time()
        async with self._write() as conn:
            result = await conn.execute(
                update(deliveries)
                .where(
                    deliveries.c.id == job.id,
                    deliveries.c.worker_id == worker_id,
                    deliveries.c.status == "running",
                )
                .values(
                    status="queued",
                    error=error,
                    run_after=now + delay,
                    lease_until=None,
                    worker_id=None,
                    updated_at=now,
                )
            )
        return bool(result.rowcount == 1)

    async def release(self, job_ids: Sequence[int], *, worker_id: str) -> None:
        """Give running jobs back without counting the attempt (graceful shutdown)."""
        if not job_ids:
            return
        now = time.time()
        async with self._write() as conn:
            await conn.execute(
                update(deliveries)
                .where(
                    deliveries.c.id.in_(list(job_ids)),
                    deliveries.c.worker_id == worker_id,
                    deliveries.c.status == "running",
                )
                .values(
                    status="queued",
                    attempts=deliveries.c.attempts - 1,
                    lease_until=None,
                    worker_id=None,
                    run_after=now,
                    updated_at=now,
                )
            )

    async def job(self, job_id: int) -> dict[str, Any] | None:
        async with self.engine.connect() as conn:
            row = (await conn.execute(select(deliveries).where(deliveries.c.id == job_id))).first()
        return dict(row._mapping) if row else None

    async def jobs_by_status(self) -> dict[str, int]:
        async with self.engine.connect() as conn:
            rows = await conn.execute(select(deliveries.c.status, func.count()).group_by(deliveries.c.status))
            return {status: count for status, count in rows}

    async def all_jobs(self) -> list[dict[str, Any]]:
        async with self.engine.connect() as conn:
            rows = await conn.execute(select(deliveries).order_by(deliveries.c.id))
            return [dict(r._mapping) for r in rows]

    # --- health (issue 9) ---
    async def write_probe(self) -> None:
        """Commit a tiny real write (the schema version row, rewritten as it is): raises when the
        database cannot take a write (unreachable, locked past the busy timeout, disk full)."""
        async with self._write(durable=True) as conn:
            await conn.execute(update(schema_version).values(version=schema_version.c.version))

    async def queue_stats(self, now: float | None = None) -> QueueStats:
        """Pending work: rows waiting, queued or running, and how long the oldest due row waits."""
        now = time.time() if now is None else now
        async with self.engine.connect() as conn:
            depth = (
                await conn.execute(select(func.count()).where(deliveries.c.status.in_(PENDING)))
            ).scalar_one()
            oldest = (
                await conn.execute(
                    select(func.min(deliveries.c.run_after)).where(
                        deliveries.c.status == "queued", deliveries.c.run_after <= now
                    )
                )
            ).scalar()
        return QueueStats(depth=int(depth), oldest_due_age=None if oldest is None else now - float(oldest))


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
