"""Benchmark: the PostgreSQL ledger commit through the store (SQLAlchemy Core over asyncpg, with the
head lock) against asyncpg alone (one prepared ``INSERT ... SELECT FROM unnest(...)`` statement per
batch, no head lock: a lower bound). Decides which path ``app/store/ops.py`` uses on PostgreSQL.

    BENCH_DATABASE_URL_PG=postgresql://revbot:revbot@127.0.0.1:5432/revbot_bench \\
        taskset -c 0 python bench/pg_ledger_paths.py
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import asyncpg

from app.config import async_database_url
from app.store import IncomingDelivery, Store, ledger_rows

URL = os.environ.get("BENCH_DATABASE_URL_PG", "postgresql://revbot:revbot@127.0.0.1:5432/revbot_bench")
ROWS = 3200

RAW_INSERT = """
INSERT INTO deliveries (delivery_id, event, action, installation_id, repo, subject, payload,
    received_at, status, attempts, run_after, done_handlers, updated_at)
SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[],
    $7::bytea[], $8::float8[], $9::text[], $10::int[], $11::float8[], $12::text[], $13::float8[])
ON CONFLICT (delivery_id) DO NOTHING RETURNING delivery_id
"""


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
    raw = await asyncpg.connect(URL)
    insert = await raw.prepare(RAW_INSERT)
    print(f"payload {len(payload)} bytes, {ROWS} rows per run")
    print(f"{'path':<22}{'batch':>6}{'rows/s':>12}{'cpu us/row':>14}")
    for size in (8, 32, 64):
        work = batches(size, payload, "core")
        wall, cpu = time.perf_counter(), time.process_time()
        for batch in work:
            await store.record_deliveries(batch)
        report("store (Core)", size, time.perf_counter() - wall, time.process_time() - cpu)
        work = batches(size, payload, "raw")
        wall, cpu = time.perf_counter(), time.process_time()
        for batch in work:
            rows = ledger_rows(batch, set(), time.time())
            columns = list(zip(*(r.values() for r in rows), strict=True))
            await insert.fetch(*columns)
        report("asyncpg unnest", size, time.perf_counter() - wall, time.process_time() - cpu)
    await raw.close()
    await store.close()


if __name__ == "__main__":
    asyncio.run(main())
