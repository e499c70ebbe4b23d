"""SQLite's one writer: a thread with its own stdlib ``sqlite3`` connection, fed by a queue.

SQLite lets one connection write at a time; anything else polls for the lock. So every write of
the process (ledger inserts, claims, heartbeats, finishes, retries, promotions) is a small
function handed to this thread. Each round it takes whatever is waiting and commits it in at most
two transactions (group commit): the queue bookkeeping first, unsynced, then the ledger inserts,
synced (one fsync for all of them), so that a claim never waits for the ledger's fsync. Each
function runs inside its own savepoint so that one failing function rolls back alone, and each
caller's future resolves only after its COMMIT returned. WAL checkpoints run beside the writer,
from their own thread and connection (``_Checkpointer``).

Durability: a transaction holding a ledger insert commits at ``synchronous=FULL`` by default (the
WAL is fsynced before the 202 goes out: the row survives a crash of the process, of the OS and a
power loss); a transaction of queue bookkeeping alone commits at ``NORMAL`` (it survives a process
crash; after a power loss a job may revert to an earlier state and run again, which its
idempotent side effects allow). Other processes on the same file (``python -m app worker``, an
operator's ``sqlite3``) wait on ``busy_timeout`` for the write lock, as this thread does for theirs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.pool import StaticPool

log = logging.getLogger(__name__)

T = TypeVar("T")

BUSY_TIMEOUT_MS = 10_000
MAX_GROUP = 256  # functions per transaction: bounds how long one commit holds the lock
CHECKPOINT_PAUSE = 0.01  # seconds between two checkpoints while writes keep coming
BACKSTOP_CHECKPOINT_PAGES = 20_000  # about 80 MB of WAL: the writer checkpoints itself past this
RESTART_PAGES = 4_000  # about 16 MB of WAL: the checkpointer makes the WAL start over (_Checkpointer)
RESTART_WAIT_MS = 20
RESTART_BACKOFF = 1.0  # seconds without a RESTART after one that a reader kept from finishing


def configure_connection(dbapi: sqlite3.Connection, synchronous: str) -> None:
    """WAL and the lock wait, for every connection this process opens on the file."""
    dbapi.isolation_level = None  # transactions are begun explicitly (BEGIN IMMEDIATE for writes)
    dbapi.execute("PRAGMA journal_mode=WAL")
    dbapi.execute(f"PRAGMA synchronous={synchronous}")
    dbapi.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")


@dataclass(slots=True)
class _Op(Generic[T]):
    fn: Callable[[Connection], T]
    durable: bool
    future: asyncio.Future[T]
    loop: asyncio.AbstractEventLoop


_STOP = object()


class SqliteWriter:
    def __init__(self, database: str, *, durable_synchronous: str = "FULL") -> None:
        self._database = database
        self._durable = durable_synchronous
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._lock = threading.Lock()

    def submit(self, fn: Callable[[Connection], T], *, durable: bool = False) -> asyncio.Future[T]:
        """Run ``fn`` in the next group transaction; the future resolves after its commit."""
        if self._closed:
            raise RuntimeError("the store is closed")
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="sqlite-writer", daemon=True)
                    self._thread.start()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._queue.put(_Op(fn, durable, future, loop))
        return future

    async def close(self) -> None:
        """Commit what was submitted, then stop the thread."""
        self._closed = True
        if self._thread is not None:
            self._queue.put(_STOP)
            await asyncio.to_thread(self._thread.join)
            self._thread = None

    # ------------------------------------------------------------------ the thread
    def _engine(self) -> Engine:
        engine = create_engine(f"sqlite+pysqlite:///{self._database}", poolclass=StaticPool)

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi: sqlite3.Connection, _record: Any) -> None:
            configure_connection(dbapi, "NORMAL")
            # Checkpoints run beside the writer (``_Checkpointer``); this is only a backstop.
            dbapi.execute(f"PRAGMA wal_autocheckpoint={BACKSTOP_CHECKPOINT_PAGES}")

        return engine

    def _run(self) -> None:
        self._conn: Connection | None = None
        self._synchronous = "NORMAL"
        engine = self._engine()
        checkpointer = _Checkpointer(self._database)
        stopping = False
        while not stopping:
            first = self._queue.get()
            if first is _STOP:
                break
            group: list[_Op[Any]] = [first]
            while len(group) < MAX_GROUP:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is _STOP:
                    stopping = True
                    break
                group.append(item)
            # Queue bookkeeping first, in its own unsynced commit, so that a claim or a finish
            # never waits for the ledger's fsync (the next synced commit makes it durable too).
            bookkeeping = [op for op in group if not op.durable]
            ledger = [op for op in group if op.durable]
            if bookkeeping:
                self._commit(engine, bookkeeping, "NORMAL")
            if ledger:
                self._commit(engine, ledger, self._durable)
            checkpointer.due()
        checkpointer.stop()
        if self._conn is not None:
            self._conn.close()
        engine.dispose()

    def _commit(self, engine: Engine, group: list[_Op[Any]], synchronous: str) -> None:
        try:
            if self._conn is None:
                self._conn = engine.connect()
                self._synchronous = "NORMAL"
            raw = self._conn.connection.driver_connection
            assert isinstance(raw, sqlite3.Connection)
            if synchronous != self._synchronous:
                raw.execute(f"PRAGMA synchronous={synchronous}")
                self._synchronous = synchronous
            outcomes = self._transaction(self._conn, raw, group)
        except Exception as exc:  # noqa: BLE001 - the group failed as a whole: every caller gets why
            log.warning("sqlite write transaction failed: %s: %s", type(exc).__name__, exc)
            outcomes = [(False, exc)] * len(group)
            self._rollback()
        self._settle(group, outcomes)

    def _rollback(self) -> None:
        if self._conn is None:
            return
        try:
            self._conn.rollback()
            raw = self._conn.connection.driver_connection
            if isinstance(raw, sqlite3.Connection) and raw.in_transaction:
                raw.rollback()
        except Exception:  # noqa: BLE001 - a broken connection is replaced on the next group
            self._conn.invalidate()
            self._conn.close()
            self._conn = None

    @staticmethod
    def _transaction(
        conn: Connection, raw: sqlite3.Connection, group: list[_Op[Any]]
    ) -> list[tuple[bool, Any]]:
        outcomes: list[tuple[bool, Any]] = []
        savepoints = len(group) > 1
        raw.execute("BEGIN IMMEDIATE")
        for op in group:
            if savepoints:
                raw.execute("SAVEPOINT op")
            try:
                result = op.fn(conn)
            except Exception as exc:  # handed to that caller; the others go on
                if savepoints:
                    raw.execute("ROLLBACK TO op")
                    raw.execute("RELEASE op")
                    outcomes.append((False, exc))
                    continue
                raise
            if savepoints:
                raw.execute("RELEASE op")
            outcomes.append((True, result))
        conn.commit()  # ends SQLAlchemy's view of the transaction (COMMIT if it began one)
        if raw.in_transaction:
            raw.commit()
        return outcomes

    @staticmethod
    def _settle(group: list[_Op[Any]], outcomes: list[tuple[bool, Any]]) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], bool, Any]]] = {}
        for op, (ok, value) in zip(group, outcomes, strict=True):
            by_loop.setdefault(op.loop, []).append((op.future, ok, value))
        for loop, items in by_loop.items():
            # RuntimeError: the caller's loop is gone (it was shut down), nobody is waiting.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_resolve, items)


def _resolve(items: list[tuple[asyncio.Future[Any], bool, Any]]) -> None:
    for future, ok, value in items:
        if future.done():
            continue
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)


class _Checkpointer:
    """Copies the WAL back into the database file from its own thread and connection.

    SQLite runs an automatic checkpoint inside the commit that crosses 1000 WAL pages, with an
    fsync of the database file, and every write queued behind that commit waits for it. A
    ``PASSIVE`` checkpoint from another connection does the same work without blocking the
    writer. But the WAL starts over only at a write that finds it wholly copied back, which a
    writer that never pauses never does: it grew to the writer's backstop (80 MB), whose
    checkpoint inside a commit stalled every answer for 80-150 ms. So once the WAL passes
    ``RESTART_PAGES``, a ``RESTART`` checkpoint copies the few pages the last ``PASSIVE`` one left
    and makes the next write start the WAL over; it holds the write lock for that copy only, and
    gives up after ``RESTART_WAIT_MS`` if a reader is still on the WAL (then not again before
    ``RESTART_BACKOFF``: a long read must not turn into a writer stalled by every other attempt).
    """

    def __init__(self, database: str) -> None:
        self._database = database
        self._due = threading.Event()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sqlite-checkpointer", daemon=True)
        self._thread.start()

    def due(self) -> None:
        self._due.set()

    def stop(self) -> None:
        self._stopping.set()
        self._due.set()
        self._thread.join()

    def _run(self) -> None:
        db = sqlite3.connect(self._database, isolation_level=None, check_same_thread=False)
        try:
            configure_connection(db, "FULL")
            db.execute(f"PRAGMA busy_timeout={RESTART_WAIT_MS}")  # only RESTART ever waits
            restart_after = 0.0
            while True:
                self._due.wait()
                self._due.clear()
                if self._stopping.is_set():
                    break
                try:
                    _busy, wal_pages, _copied = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                    if wal_pages >= RESTART_PAGES and time.monotonic() >= restart_after:
                        busy, _, _ = db.execute("PRAGMA wal_checkpoint(RESTART)").fetchone()
                        # A reader kept it from finishing: it held the write lock for the wait,
                        # so not again before a pause.
                        restart_after = time.monotonic() + (RESTART_BACKOFF if busy else 0.0)
                except sqlite3.Error as exc:
                    log.warning("sqlite checkpoint failed: %s", exc)
                # Small and often: a checkpoint copies what the last 10 ms wrote, pages still in
                # the cache, in a few milliseconds. Every 250 ms each took 30-50 ms, in which this
                # thread shared the core with the event loop (measured under 5,000 deliveries/s:
                # p99 of the answers 29-53 ms, against 15-25 ms now). Stopping ends the pause.
                if self._stopping.wait(CHECKPOINT_PAUSE):
                    break
        finally:
            db.close()
