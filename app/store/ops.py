"""The ledger's and the queue's transactions, as plain functions over a sync ``Connection``.

Each runs inside a transaction its caller opened: on SQLite in the writer thread
(``sqlite_writer.py``), on PostgreSQL through ``AsyncConnection.run_sync``. One set of semantics
for both databases, checked by one test suite on both; the hot statements have a fast path per
database: the ledger insert, the claim and the finish (here on SQLite's raw ``sqlite3``, in
``postgres.py`` on asyncpg).

Heads and the PostgreSQL race (issue 9): a subject's new row is its head (``queued``) only when the
subject has no active (queued or running) row, and the write that ends a subject's active rows
promotes (or claims) the next ``waiting`` row. Under READ COMMITTED a record could decide "busy"
from a head that a concurrent finish was ending, while that finish could not see the new row yet:
the row was committed ``waiting`` with no head, and its subject stalled for good. The record
therefore locks each subject's oldest active row ``FOR SHARE``: every write that ends a subject's
active rows updates that row too, so it waits for the record and then sees (and promotes) the new
row, or the record waits for it and then sees the row ended. Records do not wait for each other
(shared locks), and only one row per subject is locked however long a worker's run
(``postgres.RECORD``). A record that saw a head end while the finish promoted another row leaves
two heads; the claim never takes a row with an earlier active one, and the promotion, which does
not look for active rows, keeps every waiting row in front of the later head. SQLite's write
transactions are serial, so there is nothing to race.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Connection, and_, func, select, text, update
from sqlalchemy.exc import SQLAlchemyError

from .model import IncomingDelivery, Job, JobEnd, QueueStats, decompress_payload, ledger_rows, run_of
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
# in PostgreSQL's): while one subject's backlog drains these run for every job, and Core's
# statement building was most of their cost.
_SQLITE_RUNNABLE = (
    "(j.status = 'queued' AND j.run_after <= :now OR j.status = 'running' AND j.lease_until < :now)"
    " AND NOT EXISTS (SELECT 1 FROM deliveries k"
    "  WHERE k.subject = j.subject AND k.id < j.id AND k.status IN ('queued', 'running'))"
)
_SQLITE_CANDIDATES = f"SELECT j.id FROM deliveries j WHERE {_SQLITE_RUNNABLE} ORDER BY j.id LIMIT :limit"
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


def claim_sqlite(conn: Connection, worker_id: str, limit: int, lease_seconds: float, now: float) -> list[Job]:
    """Up to ``limit`` subject heads that are due (or whose lease expired), oldest first."""
    raw = _raw(conn)
    ids = [r[0] for r in raw.execute(_SQLITE_CANDIDATES, {"now": now, "limit": limit})]
    return _claim_ids(raw, ids, worker_id, lease_seconds, now)


def claim_run_sqlite(
    conn: Connection, subject: str, worker_id: str, limit: int, lease_seconds: float, now: float
) -> list[Job]:
    """Claim the subject's next run (``model.run_of``), at most ``limit`` rows."""
    raw = _raw(conn)
    pending = raw.execute(_SQLITE_PENDING, {"subject": subject, "limit": limit}).fetchall()
    return _claim_ids(raw, run_of(pending, now), worker_id, lease_seconds, now)


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


def finish_params(ends: Sequence[JobEnd], worker_id: str, now: float) -> list[dict[str, Any]]:
    return [
        {
            "status": end.status,
            "now": now if end.ended_at is None else end.ended_at,
            "error": end.error,
            "done_handlers": json.dumps(end.job.done_handlers),
            "id": end.job.id,
            "worker_id": worker_id,
        }
        for end in ends
    ]


def finish_sqlite(
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
    return True, claim_run_sqlite(conn, subject, worker_id, run_limit, claim_next_for, now)


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


def retry_later(conn: Connection, job: Job, worker_id: str, run_after: float, error: str, now: float) -> bool:
    """The job goes back to the queue as its subject's head, due at ``run_after``; the rest of
    its run goes back to ``waiting`` behind it, as if never claimed."""
    result = conn.execute(
        update(deliveries)
        .where(_running([job.id], worker_id))
        .values(
            status="queued",
            error=error,
            run_after=run_after,
            lease_until=None,
            worker_id=None,
            updated_at=now,
        )
    )
    if result.rowcount != 1:
        return False
    conn.execute(
        update(deliveries)
        .where(
            deliveries.c.subject == job.subject,
            deliveries.c.id > job.id,
            deliveries.c.worker_id == worker_id,
            deliveries.c.status == "running",
        )
        .values(
            status="waiting",
            attempts=deliveries.c.attempts - 1,
            lease_until=None,
            worker_id=None,
            updated_at=now,
        )
    )
    return True


def release(conn: Connection, job_ids: Sequence[int], worker_id: str, now: float) -> None:
    """Hand running jobs back without counting the attempt: of each subject's, the oldest is its
    head again (``queued``) and the rest of its run ``waiting`` behind it."""
    released = select(deliveries.c.id, deliveries.c.subject).where(_running(job_ids, worker_id))
    heads = {row.subject: row.id for row in conn.execute(released.order_by(deliveries.c.id.desc()))}
    if not heads:
        return
    back = dict(
        attempts=deliveries.c.attempts - 1, lease_until=None, worker_id=None, run_after=now, updated_at=now
    )
    conn.execute(
        update(deliveries)
        .where(_running(job_ids, worker_id), deliveries.c.id.in_(list(heads.values())))
        .values(status="queued", **back)
    )
    conn.execute(update(deliveries).where(_running(job_ids, worker_id)).values(status="waiting", **back))


def queue_stats(conn: Connection, now: float) -> QueueStats:
    depth = conn.execute(select(func.count()).where(deliveries.c.status.in_(PENDING))).scalar_one()
    oldest = conn.execute(
        select(func.min(deliveries.c.run_after)).where(
            deliveries.c.status == "queued", deliveries.c.run_after <= now
        )
    ).scalar()
    return QueueStats(depth=int(depth), oldest_due_age=None if oldest is None else max(0.0, now - oldest))


# A job the bot gives itself (a delayed re-evaluation): one row with its own run_after, under a
# deterministic delivery id so that asking twice records it once. Its head rule and its lock are
# the ledger's (the module doc): the subject's oldest active row, locked FOR SHARE on PostgreSQL.
_HEAD = (
    "SELECT id FROM deliveries WHERE subject = :subject AND status IN ('queued', 'running')"
    " ORDER BY id LIMIT 1"
)
_SCHEDULE = "INSERT INTO deliveries ({columns}) VALUES ({values}) ON CONFLICT (delivery_id) DO NOTHING"


def schedule(conn: Connection, item: IncomingDelivery, run_after: float, now: float) -> bool:
    """Record ``item`` to run at ``run_after``; False when its id was recorded before."""
    lock = " FOR SHARE" if conn.dialect.name == "postgresql" else ""
    busy = conn.execute(text(_HEAD + lock), {"subject": item.subject}).first() is not None
    (row,) = ledger_rows([item], {item.subject} if busy else set(), now)
    row["run_after"] = max(run_after, now)
    statement = _SCHEDULE.format(columns=", ".join(row), values=", ".join(f":{c}" for c in row))
    return bool(conn.execute(text(statement), row).rowcount)
