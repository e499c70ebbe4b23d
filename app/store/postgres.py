"""PostgreSQL's hot writes on asyncpg directly: the ledger insert (one prepared statement per
batch), and the queue's claim and the end of a run (prepared statements, no pre-ping on checkout).

Chosen because they measured faster than the same transactions in SQLAlchemy Core (which every
other PostgreSQL write uses): ``bench/pg_ledger_paths.py`` runs both ledger paths; while one pull
request's backlog drains, each run costs one end-and-claim, and SQLAlchemy's pre-ping, statement
handling and greenlet hops were most of it. The record statement locks each subject's oldest
active row ``FOR SHARE``, so it can never race the write that ends it (see ``ops.py``), then
inserts the batch with each subject's first new row ``queued`` unless the subject is busy, as
``model.ledger_rows`` decides on SQLite. The queue statements are ``sqlite.py``'s in
PostgreSQL's SQL, plus ``FOR UPDATE SKIP LOCKED`` so that concurrent claims never take one row
twice. Every commit waits for its WAL flush (``synchronous_commit`` stays on: a server crash loses
no job's outcome, so a finished job never runs again).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, TypeVar

import asyncpg
from sqlalchemy import Connection, Table, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from ..settings.dburl import postgres_engine_options as engine_options
from .backend import Outcome, root_cause
from .model import IncomingDelivery, Job, JobEnd, compress_payload, run_of
from .ops import FAIR_TURNS, claimed_jobs, finish_params
from .schema import PENDING

T = TypeVar("T")

CLOSE_WITHIN = 1.0  # seconds (see ``PostgresBackend.close``)
LEDGER_IN_FLIGHT = 4  # ledger batches committing at once: the server shares their WAL flushes
MIGRATION_LOCK = 727274  # advisory lock id held while the schema is upgraded
# Of a process's connections (DATABASE_POOL_SIZE), the ledger insert's own asyncpg pool takes up
# to this many (one per batch in flight); the shared SQLAlchemy pool the rest.
LEDGER_CONNECTIONS = 4


def first_of(status: str, *, subject: str, limit: str) -> str:
    """Ids of the first ``limit`` rows of ``subject`` (an SQL expression) in ``status``, oldest
    first, read as a range of the (subject, status, id) index. Written as a row comparison because
    for ``subject = $1 AND status = ... ORDER BY id`` the planner may walk the primary key from the
    oldest row instead, through every finished one: it estimates from statistics taken while the
    rows were still pending (30 ms a call after a backlog of 50,000 drained, growing)."""
    return (
        f"SELECT id FROM (SELECT id, subject, status FROM deliveries"
        f" WHERE (subject, status, id) >= ({subject}, '{status}', 0)"
        f" ORDER BY subject, status, id LIMIT {limit}) AS first_{status}"
        f" WHERE subject = {subject} AND status = '{status}'"
    )


RECORD = """
WITH incoming AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[],
                         $7::bytea[], $9::bytea[])
        WITH ORDINALITY AS t(delivery_id, event, action, installation_id, repo, subject, payload,
                             body_digest, ord)
), heads AS (
    SELECT first.id FROM (SELECT DISTINCT subject FROM incoming) AS s,
    LATERAL (SELECT id FROM ({queued} UNION ALL {running}) AS active ORDER BY id LIMIT 1) AS first
), busy AS (
    SELECT subject FROM deliveries
    WHERE id IN (SELECT id FROM heads) AND status IN ('queued', 'running')
    ORDER BY id FOR SHARE
)
INSERT INTO deliveries (delivery_id, event, action, installation_id, repo, subject, payload,
                        body_digest, received_at, status, attempts, run_after, done_handlers,
                        updated_at)
SELECT delivery_id, event, action, installation_id, repo, subject, payload, body_digest, $8,
       CASE WHEN subject IN (SELECT subject FROM busy)
                 OR row_number() OVER (PARTITION BY subject ORDER BY ord) > 1
            THEN 'waiting' ELSE 'queued' END,
       0, $8, '[]', $8
FROM incoming
WHERE NOT EXISTS (SELECT 1 FROM deliveries seen WHERE seen.delivery_id = incoming.delivery_id)
  AND NOT EXISTS (SELECT 1 FROM deliveries seen WHERE seen.body_digest = incoming.body_digest)
ORDER BY ord
ON CONFLICT DO NOTHING
RETURNING delivery_id
""".format(
    queued=first_of("queued", subject="s.subject", limit="1"),
    running=first_of("running", subject="s.subject", limit="1"),
)

# Ids and body digests (a replayed body) recorded before are left out before heads are chosen; an
# id or digest that another process inserts at the same moment is only skipped by ON CONFLICT
# (any unique index), and if it was to be its subject's head, the
# next row of that subject is promoted right after.
REPAIR_HEAD = f"""
UPDATE deliveries SET status = 'queued', run_after = $2, updated_at = $2
WHERE id = ({first_of("waiting", subject="$1", limit="1")}) AND status = 'waiting'
  AND NOT EXISTS ({first_of("queued", subject="$1", limit="1")})
  AND NOT EXISTS ({first_of("running", subject="$1", limit="1")})
"""


_RUNNABLE = """
    (j.status = 'queued' AND j.run_after <= $1 OR j.status = 'running' AND j.lease_until < $1)
    AND NOT EXISTS (SELECT 1 FROM deliveries k
                    WHERE k.subject = j.subject AND k.id < j.id AND k.status IN ('queued', 'running'))
"""
# Fair turns (``ops.FAIR_TURNS``) are ranked first: PostgreSQL allows no window function beside
# FOR UPDATE, so the rows are locked (and re-checked) in that order by the next step.
_CLAIM = """
WITH turns AS ({turns}),
candidates AS (
    SELECT j.id FROM deliveries j JOIN turns t ON t.id = j.id
    WHERE (j.status = 'queued' AND j.run_after <= $1 OR j.status = 'running' AND j.lease_until < $1)
    ORDER BY t.turn, j.id LIMIT $4 FOR UPDATE OF j SKIP LOCKED
)
UPDATE deliveries d SET status = 'running', attempts = d.attempts + 1, lease_until = $2,
                        worker_id = $3, updated_at = $1
FROM candidates WHERE d.id = candidates.id
RETURNING d.id, d.delivery_id, d.subject, d.event, d.payload, d.attempts, d.received_at, d.done_handlers
"""
# $1 now, $2 lease_until, $3 worker_id, $4 limit, $5 share
CLAIM = _CLAIM.format(
    turns=FAIR_TURNS.format(
        runnable=f"SELECT j.id, coalesce(j.installation_id, 0) AS tenant FROM deliveries j WHERE {_RUNNABLE}",
        now="$1",
        worker="$3",
        share="$5",
    )
)


# $1 subject, $2 limit: the subject's oldest unfinished rows, locked.
PENDING_OF_SUBJECT = (
    "SELECT id, status, run_after, lease_until FROM deliveries WHERE id IN ("
    "SELECT id FROM ("
    + " UNION ALL ".join(f"({first_of(status, subject='$1', limit='$2')})" for status in PENDING)
    + ") AS pending ORDER BY id LIMIT $2) ORDER BY id FOR UPDATE"
)
# $1 subject, $2 now: the subject's first waiting row becomes a head. Not only when the subject
# has no active row: a record racing a finish can leave a later row queued (see ``ops.py``);
# promoting the earlier one puts it back in front.
PROMOTE = f"""
UPDATE deliveries SET status = 'queued', run_after = $2, updated_at = $2
WHERE id = ({first_of("waiting", subject="$1", limit="1")}) AND status = 'waiting'
"""
# $1 now, $2 lease_until, $3 worker_id, $4 ids
CLAIM_IDS = """
UPDATE deliveries SET status = 'running', attempts = attempts + 1, lease_until = $2, worker_id = $3,
                      updated_at = $1
WHERE id = ANY($4::bigint[])
RETURNING id, delivery_id, subject, event, payload, attempts, received_at, done_handlers
"""
# $1 ids, $2 statuses, $3 errors, $4 done_handlers, $5 ended_at, $6 worker_id
FINISH = """
UPDATE deliveries d SET status = e.status, lease_until = NULL, updated_at = e.ended_at,
                        error = coalesce(e.error, d.error), done_handlers = e.done_handlers
FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::float8[])
    AS e(id, status, error, done_handlers, ended_at)
WHERE d.id = e.id AND d.worker_id = $6 AND d.status = 'running'
"""


def refused(exc: BaseException) -> bool:
    """A value the database (or asyncpg's encoder) refuses, as opposed to a connection problem."""
    if isinstance(exc, asyncpg.PostgresConnectionError):
        return False
    return isinstance(exc, asyncpg.PostgresError) or (
        isinstance(exc, asyncpg.InterfaceError) and isinstance(exc, ValueError)
    )


class PostgresBackend:
    """The queue's hot writes on asyncpg (the module doc); every other write and every read on
    the SQLAlchemy engine's pool."""

    ledger_in_flight = LEDGER_IN_FLIGHT  # see ``store.Ledger``

    def __init__(self, url: str, *, pool_size: int) -> None:
        self._url = url
        self._pool_size = pool_size
        self._pool: asyncpg.Pool | None = None
        self._pool_ready = asyncio.Lock()  # batches in flight share one pool, made once
        shared, _ledger = split_pool(pool_size)
        pg_url, options = engine_options(url, pool_size=shared)
        self.engine: AsyncEngine = create_async_engine(pg_url, **options)

    def describe(self) -> str:
        return describe(self._url)

    async def write(self, fn: Callable[[Connection], T], *, durable: bool = False) -> T:
        """One transaction on the engine's pool (every commit waits for its WAL flush)."""
        async with self.engine.begin() as conn:
            return await conn.run_sync(fn)

    def read(self) -> contextlib.AbstractAsyncContextManager[AsyncConnection]:
        return self.engine.connect()

    @contextlib.asynccontextmanager
    async def begin(self) -> AsyncIterator[AsyncConnection]:
        async with self.engine.begin() as conn:
            yield conn

    async def lock_for_upgrade(self, conn: AsyncConnection) -> None:
        await conn.execute(text(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK})"))

    @contextlib.asynccontextmanager
    async def exclusive(self, key: int) -> AsyncIterator[bool]:
        """A session advisory lock, held on one connection while the caller works."""
        async with self.engine.connect() as conn:
            got = (await conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": key})).scalar()
            await conn.commit()
            if not got:
                yield False
                return
            try:
                yield True
            finally:
                await conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
                await conn.commit()

    def upsert(self, table: Table) -> Any:
        return pg_insert(table)

    def not_reachable_yet(self, exc: BaseException) -> bool:
        return not_reachable_yet(exc)

    async def record(self, items: Sequence[IncomingDelivery], now: float) -> dict[str, Outcome]:
        """Per delivery: new, duplicate, or the error that kept it out. One transaction for the
        batch; if the database refuses a value, one transaction per row, so only that row fails."""
        try:
            return await self._record(items, now)
        except Exception as exc:
            if not refused(exc) or len(items) == 1:
                raise
        outcomes: dict[str, Outcome] = {}
        for item in items:
            try:
                outcomes |= await self._record([item], now)
            except Exception as exc:
                if not refused(exc):
                    raise
                outcomes[item.delivery_id] = exc
        return outcomes

    async def _connections(self) -> asyncpg.Pool:
        if self._pool is None:
            async with self._pool_ready:
                if self._pool is None:
                    self._pool = await create_asyncpg_pool(self._url, pool_size=self._pool_size)
        return self._pool

    async def _record(self, items: Sequence[IncomingDelivery], now: float) -> dict[str, Outcome]:
        pool = await self._connections()
        columns = (
            [d.delivery_id for d in items],
            [d.event for d in items],
            [d.action for d in items],
            [d.installation_id for d in items],
            [d.repo for d in items],
            [d.subject for d in items],
            [compress_payload(d.payload) for d in items],
        )
        digests = [d.body_digest for d in items]
        # One statement, one round trip: its own transaction (the locks last until its commit).
        async with pool.acquire() as conn:
            rows = await conn.fetch(RECORD, *columns, now, digests)
            inserted = {r[0] for r in rows}
            if len(inserted) < len(items):
                for subject in {d.subject for d in items if d.delivery_id not in inserted}:
                    await conn.execute(REPAIR_HEAD, subject, now)
        return {d.delivery_id: d.delivery_id in inserted for d in items}

    async def claim(
        self, *, worker_id: str, limit: int, lease_seconds: float, now: float, share: int
    ) -> list[Job]:
        """``sqlite.claim_heads``: one statement, its own transaction."""
        pool = await self._connections()
        async with pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(CLAIM, now, now + lease_seconds, worker_id, limit, share)
        return claimed_jobs(rows)

    async def finish(
        self,
        ends: Sequence[JobEnd],
        *,
        worker_id: str,
        now: float,
        claim_next_for: float | None,
        run_limit: int,
        run_continues: bool = False,
    ) -> tuple[bool, list[Job]]:
        """``sqlite.finish_run`` in one transaction: the ends, then the subject's next run claimed
        (``claim_next_for``: its lease) or its next head promoted."""
        subject = ends[0].job.subject
        params = finish_params(ends, worker_id, now)
        pool = await self._connections()
        async with pool.acquire() as conn, conn.transaction():
            done = await conn.execute(
                FINISH,
                [p["id"] for p in params],
                [p["status"] for p in params],
                [p["error"] for p in params],
                [p["done_handlers"] for p in params],
                [p["now"] for p in params],
                worker_id,
            )
            if done != f"UPDATE {len(ends)}":
                return False, []
            if claim_next_for is None:
                if not run_continues:
                    await conn.execute(PROMOTE, subject, now)
                return True, []
            pending = await conn.fetch(PENDING_OF_SUBJECT, subject, run_limit)
            run = run_of([tuple(r) for r in pending], now)
            if not run:
                return True, []
            rows = await conn.fetch(CLAIM_IDS, now, now + claim_next_for, worker_id, run)
        return True, claimed_jobs(rows)

    async def close(self) -> None:
        """Close gracefully; connections still busy after ``CLOSE_WITHIN`` (a server that does not
        answer) are closed at once."""
        if self._pool is not None:
            pool, self._pool = self._pool, None
            try:
                await asyncio.wait_for(pool.close(), timeout=CLOSE_WITHIN)
            except TimeoutError:
                pool.terminate()
        await self.engine.dispose()


def read_only_engine(url: str) -> AsyncEngine:
    pg_url, options = engine_options(url, pool_size=1)
    return create_async_engine(pg_url, **options)


def describe(url: str) -> str:
    parsed = make_url(url)
    return f"PostgreSQL {parsed.host}:{parsed.port or 5432}/{parsed.database}"


def not_reachable_yet(exc: BaseException) -> bool:
    """A server refusing or timing out connections, or still starting. Wrong passwords and
    missing databases are not worth waiting for."""
    cause = root_cause(exc)
    return isinstance(
        cause, OSError | TimeoutError | asyncpg.CannotConnectNowError | asyncpg.TooManyConnectionsError
    )


def split_pool(pool_size: int) -> tuple[int, int]:
    """(shared SQLAlchemy pool, asyncpg ledger pool) for ``pool_size`` connections in all."""
    ledger = max(1, min(LEDGER_CONNECTIONS, pool_size // 2))
    return max(1, pool_size - ledger), ledger


async def create_asyncpg_pool(url: str, *, pool_size: int) -> asyncpg.Pool:
    """``url`` is the SQLAlchemy form (``postgresql+asyncpg://``); asyncpg takes the plain DSN,
    ``sslmode`` included (it reads libpq's spelling itself)."""
    dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    _shared, ledger = split_pool(pool_size)
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=ledger)
    assert pool is not None
    return pool
