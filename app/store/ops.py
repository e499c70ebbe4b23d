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
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, and_, func, select, text, update

from .model import IncomingDelivery, Job, JobEnd, QueueStats, decompress_payload, ledger_rows
from .schema import PENDING, JobStatus, deliveries

# The claim's fair turns between installations: each runnable row's turn is its rank among its
# installation's runnable rows (oldest first) plus that installation's jobs running now (live
# leases, every worker), and the claim takes the lowest turns first, the oldest row between
# equals. So it is round robin weighted by current use: an installation with nothing running
# goes before one that holds workers, whatever the flood behind that one, and a flood's jobs
# still start oldest first. Chosen over a stored per-installation tally ("recent use") because
# the table itself is the state: every process on the database sees the same turns, nothing
# decays or needs writing, and a restart forgets nothing. Per-PR order is untouched: only a
# subject's head is runnable. ``share`` bounds one installation's jobs running under this worker
# (its own slots), so a slot stays free for the others while one installation's jobs wait on
# GitHub's limits. Columns: (id, turn).
FAIR_TURNS = """
SELECT r.id, r.place + coalesce(b.running, 0) AS turn FROM (
    SELECT id, tenant, row_number() OVER (PARTITION BY tenant ORDER BY id) AS place
    FROM ({runnable}) AS runnable
) AS r LEFT JOIN (
    SELECT coalesce(installation_id, 0) AS tenant, count(*) AS running,
           sum(CASE WHEN worker_id = {worker} THEN 1 ELSE 0 END) AS here
    FROM deliveries WHERE status = 'running' AND lease_until >= {now}
    GROUP BY coalesce(installation_id, 0)
) AS b ON b.tenant = r.tenant
WHERE r.place + coalesce(b.here, 0) <= {share}
"""


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


def _running(job_ids: Sequence[int], worker_id: str) -> Any:
    return and_(
        deliveries.c.id.in_(list(job_ids)),
        deliveries.c.worker_id == worker_id,
        deliveries.c.status == JobStatus.RUNNING,
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
    conn: Connection, job: Job, worker_id: str, run_after: float, error: str, now: float, counted: bool = True
) -> bool:
    """The job goes back to the queue as its subject's head, due at ``run_after``, with the
    handlers it has done; the rest of its run goes back to ``waiting`` behind it, as if never
    claimed. ``counted`` False: the attempt is given back, as ``release`` does."""
    result = conn.execute(
        update(deliveries)
        .where(_running([job.id], worker_id))
        .values(
            attempts=deliveries.c.attempts - (0 if counted else 1),
            status=JobStatus.QUEUED,
            error=error,
            done_handlers=json.dumps(job.done_handlers),
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
            deliveries.c.status == JobStatus.RUNNING,
        )
        .values(
            status=JobStatus.WAITING,
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
        .values(status=JobStatus.QUEUED, **back)
    )
    conn.execute(
        update(deliveries).where(_running(job_ids, worker_id)).values(status=JobStatus.WAITING, **back)
    )


def pending_by_status(conn: Connection) -> dict[JobStatus, int]:
    by_status = (
        select(deliveries.c.status, func.count())
        .where(deliveries.c.status.in_(PENDING))
        .group_by(deliveries.c.status)
    )
    counts = {JobStatus(status): int(count) for status, count in conn.execute(by_status)}
    return {status: counts.get(status, 0) for status in PENDING}


def queue_stats(conn: Connection, now: float) -> QueueStats:
    depth = conn.execute(select(func.count()).where(deliveries.c.status.in_(PENDING))).scalar_one()
    oldest = conn.execute(
        select(func.min(deliveries.c.run_after)).where(
            deliveries.c.status == JobStatus.QUEUED, deliveries.c.run_after <= now
        )
    ).scalar()
    return QueueStats(depth=int(depth), oldest_due_age=None if oldest is None else max(0.0, now - oldest))


# A job the bot gives itself (a delayed re-evaluation): one row with its own run_after, under a
# deterministic delivery id so that asking twice records it once. Its head rule and its lock are
# the ledger's (the module doc): the subject's oldest active row, locked FOR SHARE on PostgreSQL.
_SCHEDULE = "INSERT INTO deliveries ({columns}) VALUES ({values}) ON CONFLICT (delivery_id) DO NOTHING"


def schedule(conn: Connection, item: IncomingDelivery, run_after: float, now: float) -> bool:
    """Record ``item`` to run at ``run_after``; False when its id was recorded before."""
    d = deliveries.c
    head = (
        select(d.id)
        .where(d.subject == item.subject, d.status.in_((JobStatus.QUEUED, JobStatus.RUNNING)))
        .order_by(d.id)
        .limit(1)
        .with_for_update(read=True)  # FOR SHARE on PostgreSQL; SQLite has one writer and no locks
    )
    busy = conn.execute(head).first() is not None
    (row,) = ledger_rows([item], {item.subject} if busy else set(), now)
    row["run_after"] = max(run_after, now)
    statement = _SCHEDULE.format(columns=", ".join(row), values=", ".join(f":{c}" for c in row))
    return bool(conn.execute(text(statement), row).rowcount)
