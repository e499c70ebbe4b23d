"""The one place where database connections are configured: pool sizes, TLS, SQLite pragmas.

``create_engine_for`` makes the SQLAlchemy ``AsyncEngine`` every backend uses (reads, migrations,
PostgreSQL queue writes, other modules' tables); ``create_asyncpg_pool`` the pool behind the
PostgreSQL ledger insert, which talks to asyncpg directly (``postgres.py``).
"""

from __future__ import annotations

from typing import Any

import asyncpg
from sqlalchemy import event
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from ..config import DEFAULT_POOL_SIZE, postgres_engine_options
from .sqlite_writer import configure_connection

# Of a process's PostgreSQL connections (DATABASE_POOL_SIZE), the ledger insert's own asyncpg
# pool takes up to this many (one per batch in flight, see ``Store``); the shared pool the rest.
PG_LEDGER_CONNECTIONS = 4


def split_pool(pool_size: int) -> tuple[int, int]:
    """(shared SQLAlchemy pool, asyncpg ledger pool) for ``pool_size`` connections in all."""
    ledger = max(1, min(PG_LEDGER_CONNECTIONS, pool_size // 2))
    return max(1, pool_size - ledger), ledger


def create_engine_for(
    url: str, *, sqlite_synchronous: str = "FULL", pool_size: int = DEFAULT_POOL_SIZE
) -> AsyncEngine:
    if make_url(url).get_backend_name() != "sqlite":
        # ``?sslmode=`` (what Heroku and Fly hand out) becomes asyncpg's ``ssl``; no overflow, so
        # the process never opens more than DATABASE_POOL_SIZE connections.
        shared, _ledger = split_pool(pool_size)
        pg_url, options = postgres_engine_options(url, pool_size=shared)
        return create_async_engine(pg_url, **options)
    # Every transaction here ends in commit or rollback before its connection goes back, so the
    # pool's extra rollback on return would only cost a thread hop.
    engine = create_async_engine(url, pool_size=5, max_overflow=0, pool_reset_on_return=None)

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi: Any, _record: Any) -> None:
        configure_connection(dbapi, sqlite_synchronous)

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(connection: Any) -> None:
        # pysqlite begins too late for concurrent writers: a write transaction takes the lock at
        # BEGIN (IMMEDIATE) so two connections never deadlock upgrading a read lock.
        mode = connection.get_execution_options().get("sqlite_begin", "DEFERRED")
        connection.exec_driver_sql(f"BEGIN {mode}")

    return engine


async def create_asyncpg_pool(url: str, *, pool_size: int = DEFAULT_POOL_SIZE) -> asyncpg.Pool:
    """``url`` is the SQLAlchemy form (``postgresql+asyncpg://``); asyncpg takes the plain DSN,
    ``sslmode`` included (it reads libpq's spelling itself)."""
    dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    _shared, ledger = split_pool(pool_size)
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=ledger)
    assert pool is not None
    return pool
