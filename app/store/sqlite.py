"""SQLite: every write through one writer thread with group commit (``sqlite_writer.py``), the
hot statements in SQLite's SQL on that thread's raw ``sqlite3`` connection, reads on their own
connections (WAL: never blocked by the writer).

The ledger insert, the claim and the end of a run are raw ``sqlite3`` statements, not SQLAlchemy
Core: while one subject's backlog drains they run for every job, and Core's statement building
was most of their cost (about a third of the CPU of the Core statements). The writer is the only
writer of the process, so what a transaction reads before it writes stays true until it commits:
nothing races (``ops.py`` on PostgreSQL's race).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, Table, event
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from .backend import Outcome, root_cause
from .files import prepare_private_database
from .model import IncomingDelivery, Job, JobEnd, ledger_rows, run_of
from .ops import FAIR_TURNS, claimed_jobs, finish_params
from .schema import PENDING
from .sqlite_writer import SqliteWriter, configure_connection

T = TypeVar("T")


class SqliteBackend:
    ledger_in_flight = 1  # the writer thread already groups whatever waits

    def __init__(self, url: str, *, sqlite_synchronous: str = "FULL") -> None:
        database = make_url(url).database or ":memory:"
        if database == ":memory:":
            # The writer and the readers are separate connections: they must share a file.
            raise ValueError("SQLite needs a database file (sqlite:///path), not an in-memory database")
        self._database = database
        prepare_private_database(database)  # 0700 directory, 0600 files
        self.writer = SqliteWriter(database, durable_synchronous=sqlite_synchronous)
        self.engine: AsyncEngine = _engine(url, sqlite_synchronous)

    def describe(self) -> str:
        return f"SQLite {self._database}"

    async def record(self, items: Sequence[IncomingDelivery], now: float) -> dict[str, Outcome]:
        # The writer retries a refused batch row by row inside its transaction (savepoints).
        return await self.writer.submit(partial(record_rows, items=items, now=now), durable=True)

    async def claim(
        self, *, worker_id: str, limit: int, lease_seconds: float, now: float, share: int
    ) -> list[Job]:
        return await self.writer.submit(
            partial(
                claim_heads,
                worker_id=worker_id,
                limit=limit,
                lease_seconds=lease_seconds,
                now=now,
                share=share,
            )
        )

    async def finish(
        self,
        ends: Sequence[JobEnd],
        *,
        worker_id: str,
        now: float,
        claim_next_for: float | None,
        run_limit: int,
        run_continues: bool,
    ) -> tuple[bool, list[Job]]:
        return await self.writer.submit(
            partial(
                finish_run,
                ends=list(ends),
                worker_id=worker_id,
                now=now,
                claim_next_for=claim_next_for,
                run_limit=run_limit,
                run_continues=run_continues,
            )
        )

    async def write(self, fn: Callable[[Connection], T], *, durable: bool = False) -> T:
        return await self.writer.submit(fn, durable=durable)

    def read(self) -> contextlib.AbstractAsyncContextManager[AsyncConnection]:
        return self.engine.connect()

    @contextlib.asynccontextmanager
    async def begin(self) -> AsyncIterator[AsyncConnection]:
        # Takes the write lock at BEGIN and waits (busy_timeout) while the writer commits.
        async with self.engine.connect() as conn:
            conn = await conn.execution_options(sqlite_begin="IMMEDIATE")
            async with conn.begin():
                yield conn

    async def lock_for_upgrade(self, conn: AsyncConnection) -> None:
        """Nothing more: ``begin()`` already holds the database's one write lock."""

    @contextlib.asynccontextmanager
    async def exclusive(self, key: int) -> AsyncIterator[bool]:
        # A SQLite file has one serving process (``python -m app worker`` does no housekeeping).
        yield True

    def upsert(self, table: Table) -> Any:
        return sqlite_insert(table)

    def not_reachable_yet(self, exc: BaseException) -> bool:
        return not_reachable_yet(exc)

    async def close(self) -> None:
        await self.writer.close()
        await self.engine.dispose()


def not_reachable_yet(exc: BaseException) -> bool:
    """A file locked by another process; anything else (a directory that cannot be created, a
    file that cannot be opened) will not pass by waiting."""
    cause = root_cause(exc)
    return isinstance(cause, sqlite3.OperationalError) and "locked" in str(cause)


def read_only_engine(url: str) -> AsyncEngine:
    database = make_url(url).database or ""
    if not Path(database).is_file():
        raise FileNotFoundError(database)
    # mode=ro: opening must never create or change the file
    return create_async_engine(f"sqlite+aiosqlite:///file:{Path(database).resolve()}?mode=ro&uri=true")


def _engine(url: str, synchronous: str) -> AsyncEngine:
    """The reading engine (and ``begin()``'s): every transaction ends in commit or rollback
    before its connection goes back, so the pool's extra rollback on return would only cost a
    thread hop."""
    engine = create_async_engine(url, pool_size=5, max_overflow=0, pool_reset_on_return=None)

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi: Any, _record: Any) -> None:
        configure_connection(dbapi, synchronous)

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(connection: Any) -> None:
        # pysqlite begins too late for concurrent writers: a write transaction takes the lock at
        # BEGIN (IMMEDIATE) so two connections never deadlock upgrading a read lock.
        mode = connection.get_execution_options().get("sqlite_begin", "DEFERRED")
        connection.exec_driver_sql(f"BEGIN {mode}")

    return engine


# ------------------------------------------------------------------ the transactions (writer thread)
def _one_by_one(
    items: Sequence[IncomingDelivery],
    busy: set[str],
    now: float,
    insert_one: Callable[[dict[str, Any]], bool],
) -> dict[str, Outcome]:
    """After a batch insert failed: each row on its own, so only a faulty row fails. A row that
    failed never becomes anyone's head, so the next row of its subject takes that place."""
    outcomes: dict[str, Outcome] = {}
    for item in items:
        [row] = ledger_rows([item], set(busy), now)
        try:
            inserted = insert_one(row)
        except (SQLAlchemyError, sqlite3.Error, ValueError, OverflowError) as exc:
            outcomes[item.delivery_id] = exc
            continue
        outcomes[item.delivery_id] = inserted
        if inserted:
            busy.add(item.subject)
    return outcomes


_LEDGER_COLUMNS = tuple(ledger_rows([IncomingDelivery("", "", None, None, None, "", b"")], set(), 0.0)[0])
_SQLITE_INSERT = (
    f"INSERT INTO deliveries ({', '.join(_LEDGER_COLUMNS)})"
    f" VALUES ({', '.join(':' + c for c in _LEDGER_COLUMNS)})"
)


def record_rows(conn: Connection, items: Sequence[IncomingDelivery], now: float) -> dict[str, Outcome]:
    """The ledger insert on the writer's raw ``sqlite3`` connection (the hot path: about a third
    of the CPU of the Core statements). The writer is the only writer, so the duplicates known
    before the insert are all of them."""
    raw = _raw(conn)
    marks = ",".join("?" * len(items))
    digests = [d.body_digest for d in items if d.body_digest is not None]
    seen = raw.execute(
        f"SELECT delivery_id, body_digest FROM deliveries WHERE delivery_id IN ({marks})"
        f" OR body_digest IN ({','.join('?' * len(digests))})",
        [*(d.delivery_id for d in items), *digests],
    ).fetchall()
    seen_ids, seen_digests = {r[0] for r in seen}, {r[1] for r in seen if r[1] is not None}
    # A digest recorded under another id: a replayed body (``Store.record_each``).
    known = {d.delivery_id for d in items if d.delivery_id in seen_ids or d.body_digest in seen_digests}
    new = [d for d in items if d.delivery_id not in known]
    subjects = list({d.subject for d in new})
    busy = {
        r[0]
        for r in raw.execute(
            f"SELECT DISTINCT subject FROM deliveries WHERE subject IN ({','.join('?' * len(subjects))})"
            " AND status IN ('queued', 'running')",
            subjects,
        )
    }
    outcomes: dict[str, Outcome] = {d.delivery_id: False for d in items if d.delivery_id in known}
    raw.execute("SAVEPOINT ledger_batch")
    try:
        raw.executemany(_SQLITE_INSERT, ledger_rows(new, set(busy), now))
    except (sqlite3.Error, ValueError, OverflowError):
        raw.execute("ROLLBACK TO ledger_batch")
        raw.execute("RELEASE ledger_batch")

        def insert_one(row: dict[str, Any]) -> bool:
            raw.execute("SAVEPOINT ledger_row")
            try:
                raw.execute(_SQLITE_INSERT, row)
            except BaseException:
                raw.execute("ROLLBACK TO ledger_row")
                raise
            finally:
                raw.execute("RELEASE ledger_row")
            return True

        return outcomes | _one_by_one(new, busy, now, insert_one)
    raw.execute("RELEASE ledger_batch")
    return outcomes | {d.delivery_id: True for d in new}


# The claim and the finish in SQLite's SQL on the writer's raw connection (``postgres.py`` has them
# in PostgreSQL's): while one subject's backlog drains these run for every job, and Core's
# statement building was most of their cost.
_SQLITE_RUNNABLE = (
    "(j.status = 'queued' AND j.run_after <= :now OR j.status = 'running' AND j.lease_until < :now)"
    " AND NOT EXISTS (SELECT 1 FROM deliveries k"
    "  WHERE k.subject = j.subject AND k.id < j.id AND k.status IN ('queued', 'running'))"
)
# Fair between installations (``ops.FAIR_TURNS`` says how and why).
_SQLITE_CANDIDATES = (
    FAIR_TURNS.format(
        runnable="SELECT j.id, coalesce(j.installation_id, 0) AS tenant FROM deliveries j"
        f" WHERE {_SQLITE_RUNNABLE}",
        now=":now",
        worker=":worker_id",
        share=":share",
    )
    + " ORDER BY turn, id LIMIT :limit"
)
_SQLITE_CLAIM = (
    "UPDATE deliveries SET status = 'running', attempts = attempts + 1, lease_until = :lease_until,"
    " worker_id = :worker_id, updated_at = :now WHERE id IN ({ids})"
    " RETURNING id, delivery_id, subject, event, payload, attempts, received_at, done_handlers"
)
# A subject's oldest unfinished rows, each status through its own range of the (subject, status,
# id) index, so that no finished row is read however long the subject's history.
_SQLITE_PENDING = (
    " UNION ALL ".join(
        f"SELECT * FROM (SELECT id, status, run_after, lease_until FROM deliveries"
        f" WHERE subject = :subject AND status = '{status}' ORDER BY status, id LIMIT :limit)"
        for status in PENDING
    )
    + " ORDER BY id LIMIT :limit"
)
_SQLITE_FINISH = (
    "UPDATE deliveries SET status = :status, lease_until = NULL, updated_at = :now,"
    " error = coalesce(:error, error), done_handlers = :done_handlers"
    " WHERE id = :id AND worker_id = :worker_id AND status = 'running'"
)
# The subject's next row becomes its head (``postgres.PROMOTE`` says why unconditionally).
_SQLITE_PROMOTE = (
    "UPDATE deliveries SET status = 'queued', run_after = :now, updated_at = :now"
    " WHERE id = (SELECT min(id) FROM deliveries WHERE subject = :subject AND status = 'waiting')"
    " AND status = 'waiting'"
)


def _raw(conn: Connection) -> sqlite3.Connection:
    raw = conn.connection.driver_connection
    assert isinstance(raw, sqlite3.Connection)
    return raw


def _claim_ids(
    raw: sqlite3.Connection, ids: Sequence[int], worker_id: str, lease_seconds: float, now: float
) -> list[Job]:
    if not ids:
        return []
    rows = raw.execute(
        _SQLITE_CLAIM.format(ids=",".join(str(int(i)) for i in ids)),
        {"lease_until": now + lease_seconds, "worker_id": worker_id, "now": now},
    ).fetchall()
    return claimed_jobs(rows)


def claim_heads(
    conn: Connection, worker_id: str, limit: int, lease_seconds: float, now: float, share: int
) -> list[Job]:
    """Up to ``limit`` subject heads that are due (or whose lease expired), in fair turns between
    installations (``ops.FAIR_TURNS``), at most ``share`` running here per installation."""
    raw = _raw(conn)
    params = {"now": now, "limit": limit, "worker_id": worker_id, "share": share}
    ids = [r[0] for r in raw.execute(_SQLITE_CANDIDATES, params)]
    return _claim_ids(raw, ids, worker_id, lease_seconds, now)


def claim_run(
    conn: Connection, subject: str, worker_id: str, limit: int, lease_seconds: float, now: float
) -> list[Job]:
    """Claim the subject's next run (``model.run_of``), at most ``limit`` rows."""
    raw = _raw(conn)
    pending = raw.execute(_SQLITE_PENDING, {"subject": subject, "limit": limit}).fetchall()
    return _claim_ids(raw, run_of(pending, now), worker_id, lease_seconds, now)


def finish_run(
    conn: Connection,
    ends: Sequence[JobEnd],
    worker_id: str,
    now: float,
    claim_next_for: float | None,
    run_limit: int,
    run_continues: bool = False,
) -> tuple[bool, list[Job]]:
    """Write the ends of jobs of one subject (one run, oldest first). Then either claim the
    subject's next run for ``worker_id`` (``claim_next_for``: its lease), or give the subject its
    next head. Returns whether every job was still ours (if not, nothing is claimed: another
    worker took the subject over) and the claimed run."""
    raw = _raw(conn)
    subject = ends[0].job.subject
    if raw.executemany(_SQLITE_FINISH, finish_params(ends, worker_id, now)).rowcount != len(ends):
        return False, []
    if claim_next_for is None:
        if not run_continues:
            raw.execute(_SQLITE_PROMOTE, {"now": now, "subject": subject})
        return True, []
    return True, claim_run(conn, subject, worker_id, run_limit, claim_next_for, now)
