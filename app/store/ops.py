"""The ledger's and the queue's transactions, as plain functions over a sync ``Connection``.

Each runs inside a transaction its caller opened: on SQLite in the writer thread
(``sqlite_writer.py``), on PostgreSQL through ``AsyncConnection.run_sync``. One set of semantics
for both databases, checked by one test suite on both; the hot statements have a fast path per
database: the ledger insert, the claim and the finish (here on SQLite's raw ``sqlite3``, in
``postgres.py`` on asyncpg).

Heads and the PostgreSQL race (issue 9): a subject's new row is its head (``queued``) only when the
subject has no active (queued or running) row, and ``finish`` promotes the next ``waiting`` row in
the transaction that ends the head. Under READ COMMITTED a record could decide "busy" from a head
that a concurrent ``finish`` was ending, while that finish could not see the new row yet: the row
was committed ``waiting`` with no head, and its subject stalled for good. The record therefore
reads the active rows ``FOR UPDATE`` (in id order, so two records never deadlock): it waits for a
finish in flight and then sees the head ended, or the finish waits for it and then sees (and
promotes) the new row (``postgres.RECORD``). SQLite's write transactions are serial, so there is
nothing to race.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Connection, and_, func, select, update
from sqlalchemy.exc import SQLAlchemyError

from .model import IncomingDelivery, Job, QueueStats, decompress_payload, ledger_rows
from .schema import PENDING, deliveries

Outcome = bool | Exception  # per delivery: new, duplicate, or why it could not be recorded


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


def record_sqlite(conn: Connection, items: Sequence[IncomingDelivery], now: float) -> dict[str, Outcome]:
    """The same on SQLite, on the writer's raw ``sqlite3`` connection (the hot path: about a third
    of the CPU of the Core statements). The writer is the only writer, so the duplicates known
    before the insert are all of them."""
    raw = _raw(conn)
    marks = ",".join("?" * len(items))
    known = {
        r[0]
        for r in raw.execute(
            f"SELECT delivery_id FROM deliveries WHERE delivery_id IN ({marks})",
            [d.delivery_id for d in items],
        )
    }
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
# in PostgreSQL's): while one subject's backlog drains, each job costs a claim and a finish, and
# Core's statement building was most of it.
_SQLITE_RUNNABLE = (
    "(j.status = 'queued' AND j.run_after <= :now OR j.status = 'running' AND j.lease_until < :now)"
    " AND NOT EXISTS (SELECT 1 FROM deliveries k"
    "  WHERE k.subject = j.subject AND k.id < j.id AND k.status IN ('queued', 'running'))"
)
_SQLITE_CANDIDATES = f"SELECT j.id FROM deliveries j WHERE {_SQLITE_RUNNABLE} ORDER BY j.id LIMIT :limit"
# One subject's: its active rows only (the subject index), at most one of which is runnable.
_SQLITE_SUBJECT_CANDIDATE = (
    "SELECT j.id FROM deliveries j"
    f" WHERE j.subject = :subject AND j.status IN ('queued', 'running') AND {_SQLITE_RUNNABLE}"
    " ORDER BY j.id LIMIT 1"
)
_SQLITE_CLAIM = (
    "UPDATE deliveries SET status = 'running', attempts = attempts + 1, lease_until = :lease_until,"
    " worker_id = :worker_id, updated_at = :now WHERE id IN ({ids})"
    " RETURNING id, delivery_id, subject, event, payload, attempts, received_at, done_handlers"
)
_SQLITE_FINISH = (
    "UPDATE deliveries SET status = :status, lease_until = NULL, updated_at = :now,"
    " error = coalesce(:error, error) WHERE id = :id AND worker_id = :worker_id AND status = 'running'"
)
_SQLITE_PROMOTE = (
    "UPDATE deliveries SET status = 'queued', run_after = :now, updated_at = :now"
    " WHERE id = (SELECT min(id) FROM deliveries WHERE subject = :subject AND status = 'waiting')"
    " AND status = 'waiting'"
)


def _raw(conn: Connection) -> sqlite3.Connection:
    raw = conn.connection.driver_connection
    assert isinstance(raw, sqlite3.Connection)
    return raw


def claim_sqlite(
    conn: Connection,
    worker_id: str,
    limit: int,
    lease_seconds: float,
    now: float,
    subject: str | None = None,
) -> list[Job]:
    raw = _raw(conn)
    if subject is None:
        ids = [r[0] for r in raw.execute(_SQLITE_CANDIDATES, {"now": now, "limit": limit})]
    else:
        ids = [r[0] for r in raw.execute(_SQLITE_SUBJECT_CANDIDATE, {"now": now, "subject": subject})][:limit]
    if not ids:
        return []
    rows = raw.execute(
        _SQLITE_CLAIM.format(ids=",".join(str(int(i)) for i in ids)),
        {"lease_until": now + lease_seconds, "worker_id": worker_id, "now": now},
    ).fetchall()
    return claimed_jobs(rows)


def claimed_jobs(rows: Sequence[Sequence[Any]]) -> list[Job]:
    """Jobs from claimed rows (id, delivery_id, subject, event, payload, attempts, received_at,
    done_handlers), oldest first."""
    claimed = [
        Job(
            id=r[0],
            delivery_id=r[1],
            subject=r[2],
            event=r[3],
            payload=decompress_payload(r[4]),
            attempts=r[5],
            received_at=r[6],
            done_handlers=list(json.loads(r[7])),
        )
        for r in rows
    ]
    claimed.sort(key=lambda job: job.id)
    return claimed


def finish_sqlite(
    conn: Connection, job: Job, worker_id: str, status: str, error: str | None, now: float
) -> bool:
    raw = _raw(conn)
    params = {"status": status, "now": now, "error": error, "id": job.id, "worker_id": worker_id}
    if raw.execute(_SQLITE_FINISH, params).rowcount != 1:
        return False
    raw.execute(_SQLITE_PROMOTE, {"now": now, "subject": job.subject})
    return True


def finish_and_claim_next_sqlite(
    conn: Connection,
    job: Job,
    worker_id: str,
    status: str,
    error: str | None,
    lease_seconds: float,
    now: float,
) -> tuple[bool, Job | None]:
    """``finish_sqlite``, then claim the next runnable job of the same subject, in one transaction:
    while one subject's backlog drains, a job costs one hand-off to the writer instead of two."""
    if not finish_sqlite(conn, job, worker_id, status, error, now):
        return False, None
    claimed = claim_sqlite(conn, worker_id, 1, lease_seconds, now, job.subject)
    return True, claimed[0] if claimed else None


def _running(job_ids: Sequence[int], worker_id: str) -> Any:
    return and_(
        deliveries.c.id.in_(list(job_ids)),
        deliveries.c.worker_id == worker_id,
        deliveries.c.status == "running",
    )


def extend_leases(
    conn: Connection, job_ids: Sequence[int], worker_id: str, lease_seconds: float, now: float
) -> None:
    conn.execute(
        update(deliveries)
        .where(_running(job_ids, worker_id))
        .values(lease_until=now + lease_seconds, updated_at=now)
    )


def mark_handler_done(conn: Connection, job_id: int, done_handlers: list[str], now: float) -> None:
    conn.execute(
        update(deliveries)
        .where(deliveries.c.id == job_id)
        .values(done_handlers=json.dumps(done_handlers), updated_at=now)
    )


def retry_later(
    conn: Connection, job_id: int, worker_id: str, run_after: float, error: str, now: float
) -> bool:
    result = conn.execute(
        update(deliveries)
        .where(_running([job_id], worker_id))
        .values(
            status="queued",
            error=error,
            run_after=run_after,
            lease_until=None,
            worker_id=None,
            updated_at=now,
        )
    )
    return bool(result.rowcount == 1)


def release(conn: Connection, job_ids: Sequence[int], worker_id: str, now: float) -> None:
    conn.execute(
        update(deliveries)
        .where(_running(job_ids, worker_id))
        .values(
            status="queued",
            attempts=deliveries.c.attempts - 1,
            lease_until=None,
            worker_id=None,
            run_after=now,
            updated_at=now,
        )
    )


def queue_stats(conn: Connection, now: float) -> QueueStats:
    depth = conn.execute(select(func.count()).where(deliveries.c.status.in_(PENDING))).scalar_one()
    oldest = conn.execute(
        select(func.min(deliveries.c.run_after)).where(
            deliveries.c.status == "queued", deliveries.c.run_after <= now
        )
    ).scalar()
    return QueueStats(depth=int(depth), oldest_due_age=None if oldest is None else max(0.0, now - oldest))
