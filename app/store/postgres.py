"""PostgreSQL's ledger insert on asyncpg directly: one prepared statement per batch.

Chosen because it measured faster than the same transaction in SQLAlchemy Core (which every other
PostgreSQL write uses): ``bench/pg_ledger_paths.py`` runs both. The statement locks the subjects'
active rows ``FOR UPDATE`` in id order, so it can never race a ``finish`` (see ``ops.py``), then
inserts the batch with each subject's first new row ``queued`` unless the subject is busy, as
``model.ledger_rows`` decides on SQLite.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import asyncpg

from .connect import create_asyncpg_pool
from .model import IncomingDelivery, compress_payload
from .ops import Outcome

RECORD = """
WITH incoming AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[],
                         $7::bytea[])
        WITH ORDINALITY AS t(delivery_id, event, action, installation_id, repo, subject, payload, ord)
), busy AS (
    SELECT DISTINCT subject FROM (
        SELECT subject FROM deliveries
        WHERE subject IN (SELECT subject FROM incoming) AND status IN ('queued', 'running')
        ORDER BY id FOR UPDATE
    ) AS locked
)
INSERT INTO deliveries (delivery_id, event, action, installation_id, repo, subject, payload,
                        received_at, status, attempts, run_after, done_handlers, updated_at)
SELECT delivery_id, event, action, installation_id, repo, subject, payload, $8,
       CASE WHEN subject IN (SELECT subject FROM busy)
                 OR row_number() OVER (PARTITION BY subject ORDER BY ord) > 1
            THEN 'waiting' ELSE 'queued' END,
       0, $8, '[]', $8
FROM incoming
WHERE NOT EXISTS (SELECT 1 FROM deliveries seen WHERE seen.delivery_id = incoming.delivery_id)
ORDER BY ord
ON CONFLICT (delivery_id) DO NOTHING
RETURNING delivery_id
"""

# Ids recorded before are left out before heads are chosen; an id that another process inserts
# at the same moment is only skipped by ON CONFLICT, and if it was to be its subject's head, the
# next row of that subject is promoted right after.
REPAIR_HEAD = """
UPDATE deliveries SET status = 'queued', run_after = $2, updated_at = $2
WHERE id = (SELECT min(id) FROM deliveries WHERE subject = $1 AND status = 'waiting')
  AND status = 'waiting'
  AND NOT EXISTS (SELECT 1 FROM deliveries WHERE subject = $1 AND status IN ('queued', 'running'))
"""


def refused(exc: BaseException) -> bool:
    """A value the database (or asyncpg's encoder) refuses, as opposed to a connection problem."""
    if isinstance(exc, asyncpg.PostgresConnectionError):
        return False
    return isinstance(exc, asyncpg.PostgresError) or (
        isinstance(exc, asyncpg.InterfaceError) and isinstance(exc, ValueError)
    )


class PostgresLedger:
    def __init__(self, url: str, *, pool_size: int) -> None:
        self._url = url
        self._pool_size = pool_size
        self._pool: asyncpg.Pool | None = None
        self._pool_ready = asyncio.Lock()  # batches in flight share one pool, made once

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

    async def _record(self, items: Sequence[IncomingDelivery], now: float) -> dict[str, Outcome]:
        if self._pool is None:
            async with self._pool_ready:
                if self._pool is None:
                    self._pool = await create_asyncpg_pool(self._url, pool_size=self._pool_size)
        columns = (
            [d.delivery_id for d in items],
            [d.event for d in items],
            [d.action for d in items],
            [d.installation_id for d in items],
            [d.repo for d in items],
            [d.subject for d in items],
            [compress_payload(d.payload) for d in items],
        )
        # One statement, one round trip: its own transaction (the locks last until its commit).
        async with self._pool.acquire() as conn:
            rows = await conn.fetch(RECORD, *columns, now)
            inserted = {r[0] for r in rows}
            if len(inserted) < len(items):
                for subject in {d.subject for d in items if d.delivery_id not in inserted}:
                    await conn.execute(REPAIR_HEAD, subject, now)
        return {d.delivery_id: d.delivery_id in inserted for d in items}

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None
