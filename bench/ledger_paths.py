"""Benchmark: what one ledger commit costs through three ways of reaching SQLite.

The webhook endpoint's throughput is bounded by the ledger write (see ``webhook_ack.py``). This
script isolates that write, on one core, for batches of signed ~25 KB payloads (compressed as the
store compresses them), and prints rows per second and CPU microseconds per row for:

- ``store``: the project's ``Store.record_deliveries`` (its SQLite writer thread, raw ``sqlite3``);
- ``sync-core-thread``: the same Core statements on a sync pysqlite engine, one thread hop per batch;
- ``raw-sqlite3-thread``: the stdlib ``sqlite3`` module in one thread, the lower bound.

Run pinned, as the server would be: ``taskset -c 0 python bench/ledger_paths.py``.
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sqlalchemy import create_engine, event, select
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection, Engine

from app.store import PENDING, IncomingDelivery, Store, deliveries, ledger_rows, metadata

ROWS = 3200


def body() -> bytes:
    """The same ~25 KB delivery ``webhook_ack.py`` sends."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from webhook_ack import payload

    return payload()


def batches(size: int, payload: bytes, tag: str) -> list[list[IncomingDelivery]]:
    items = [
        IncomingDelivery(f"{tag}-{n}", "pull_request", "opened", 1, "o/r", f"o/r#{n % 7}", payload)
        for n in range(ROWS)
    ]
    return [items[i : i + size] for i in range(0, ROWS, size)]


def rows_for(batch: list[IncomingDelivery], busy: set[str]) -> list[dict[str, object]]:
    return list(ledger_rows(batch, busy, time.time()))


async def timed(
    label: str,
    size: int,
    run: Callable[[list[IncomingDelivery]], Awaitable[object]],
    work: list[list[IncomingDelivery]],
) -> None:
    wall, cpu = time.perf_counter(), time.process_time()
    for batch in work:
        await run(batch)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"{label:<20}{size:>6}{ROWS / wall:>12.0f}{cpu / ROWS * 1e6:>14.1f}")


async def run_store(size: int, tmp: str, payload: bytes) -> None:
    store = Store(f"sqlite+aiosqlite:///{tmp}/store-{size}.db")
    await store.create_schema()
    await timed("store", size, store.record_deliveries, batches(size, payload, "s"))
    await store.close()


def sqlite_engine(path: str) -> Engine:
    engine = create_engine(f"sqlite+pysqlite:///{path}", pool_reset_on_return=None)

    @event.listens_for(engine, "connect")
    def _connect(dbapi: sqlite3.Connection, _record: object) -> None:
        dbapi.isolation_level = None
        dbapi.execute("PRAGMA journal_mode=WAL")
        dbapi.execute("PRAGMA synchronous=FULL")

    @event.listens_for(engine, "begin")
    def _begin(connection: Connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    metadata.create_all(engine)
    return engine


def core_batch(engine: Engine, batch: list[IncomingDelivery]) -> object:
    statement = (
        sqlite_insert(deliveries)
        .on_conflict_do_nothing(index_elements=["delivery_id"])
        .returning(deliveries.c.delivery_id)
    )
    with engine.begin() as conn:
        busy = set(
            conn.execute(
                select(deliveries.c.subject)
                .where(deliveries.c.subject.in_({d.subject for d in batch}), deliveries.c.status.in_(PENDING))
                .distinct()
            ).scalars()
        )
        return conn.execute(statement, rows_for(batch, busy)).scalars().all()


async def run_core(size: int, tmp: str, payload: bytes, thread: ThreadPoolExecutor) -> None:
    engine = sqlite_engine(f"{tmp}/core-{size}.db")
    loop = asyncio.get_running_loop()

    async def one(batch: list[IncomingDelivery]) -> object:
        return await loop.run_in_executor(thread, core_batch, engine, batch)

    await timed("sync-core-thread", size, one, batches(size, payload, "c"))
    engine.dispose()


COLUMNS = [c.name for c in deliveries.columns if c.name != "id"]
RAW_INSERT = (
    f"INSERT INTO deliveries ({', '.join(COLUMNS)}) VALUES ({', '.join('?' for _ in COLUMNS)}) "
    "ON CONFLICT (delivery_id) DO NOTHING"
)


def raw_batch(raw: sqlite3.Connection, batch: list[IncomingDelivery]) -> object:
    raw.execute("BEGIN IMMEDIATE")
    raw.executemany(RAW_INSERT, [tuple(r.get(c) for c in COLUMNS) for r in rows_for(batch, set())])
    raw.execute("COMMIT")
    return None


async def run_raw(size: int, tmp: str, payload: bytes, thread: ThreadPoolExecutor) -> None:
    raw = sqlite3.connect(f"{tmp}/raw-{size}.db", isolation_level=None, check_same_thread=False)
    raw.execute("PRAGMA journal_mode=WAL")
    raw.execute("PRAGMA synchronous=FULL")
    raw.execute(
        f"CREATE TABLE deliveries (id INTEGER PRIMARY KEY, {', '.join(COLUMNS)}, UNIQUE (delivery_id))"
    )
    loop = asyncio.get_running_loop()

    async def one(batch: list[IncomingDelivery]) -> object:
        return await loop.run_in_executor(thread, raw_batch, raw, batch)

    await timed("raw-sqlite3-thread", size, one, batches(size, payload, "r"))
    raw.close()


async def main() -> None:
    payload = body()
    print(f"payload {len(payload)} bytes, {ROWS} rows per run, synchronous=FULL, WAL")
    print(f"{'path':<20}{'batch':>6}{'rows/s':>12}{'cpu us/row':>14}")
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(1) as thread:
        for size in (8, 32, 64):
            await run_store(size, tmp, payload)
            await run_core(size, tmp, payload, thread)
            await run_raw(size, tmp, payload, thread)


if __name__ == "__main__":
    asyncio.run(main())
