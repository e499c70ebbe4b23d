"""Benchmark: the PostgreSQL ledger commit through the store (asyncpg directly: one prepared
statement per batch, ``app/store/postgres.py``) against the same transaction in SQLAlchemy Core
over asyncpg (the head lock, then the insert), which is how the store did it before. Decides
which path the store uses on PostgreSQL; rows per second and CPU microseconds per row, one core.

    BENCH_DATABASE_URL_PG=postgresql://revbot:revbot@127.0.0.1:5432/revbot_bench \\
        taskset -c 0 python bench/pg_ledger_paths.py
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

from sqlalchemy import Connection, select
from sqlalchemy.dialects.postgresql import insert as pg_insert

from app.settings.dburl import async_database_url
from app.store import ACTIVE, IncomingDelivery, Store, deliveries, ledger_rows

URL = os.environ.get("BENCH_DATABASE_URL_PG", "postgresql://revbot:revbot@127.0.0.1:5432/revbot_bench")
ROWS = 3200

CORE_INSERT = (
    pg_insert(deliveries)
    .on_conflict_do_nothing(index_elements=["delivery_id"])
    .returning(deliveries.c.delivery_id)
)


def core_record(conn: Connection, items: list[IncomingDelivery], now: float) -> set[str]:
    busy = set(
        conn.execute(
            select(deliveries.c.subject)
            .where(deliveries.c.subject.in_({d.subject for d in items}), deliveries.c.status.in_(ACTIVE))
            .order_by(deliveries.c.id)
            .with_for_update()
        ).scalars()
    )
    return set(conn.execute(CORE_INSERT, ledger_rows(items, busy, now)).scalars())


def body() -> bytes:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from webhook_ack import payload

    return payload()


def batches(size: int, payload: bytes, tag: str) -> list[list[IncomingDelivery]]:
    items = [
        IncomingDelivery(f"{tag}-{size}-{n}", "pull_request", "opened", 1, "o/r", f"o/r#{n % 7}", payload)
        for n in range(ROWS)
    ]
    return [items[i : i + size] for i in range(0, ROWS, size)]


def report(label: str, size: int, wall: float, cpu: float) -> None:
    print(f"{label:<22}{size:>6}{ROWS / wall:>12.0f}{cpu / ROWS * 1e6:>14.1f}")


async def main() -> None:
    payload = body()
    store = Store(async_database_url(URL))
    await store.create_schema()
    print(f"payload {len(payload)} bytes, {ROWS} rows per run")
    print(f"{'path':<22}{'batch':>6}{'rows/s':>12}{'cpu us/row':>14}")
    for size in (8, 32, 64):
        work = batches(size, payload, "store")
        wall, cpu = time.perf_counter(), time.process_time()
        for batch in work:
            await store.record_deliveries(batch)
        report("store (asyncpg)", size, time.perf_counter() - wall, time.process_time() - cpu)
        work = batches(size, payload, "core")
        wall, cpu = time.perf_counter(), time.process_time()
        for batch in work:
            async with store.engine.begin() as conn:
                await conn.run_sync(core_record, batch, time.time())
        report("Core (same tx)", size, time.perf_counter() - wall, time.process_time() - cpu)
    await store.close()


if __name__ == "__main__":
    asyncio.run(main())
