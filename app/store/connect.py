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

from .sqlite_writer import configure_connection

PG_POOL_SIZE = 10
PG_MAX_OVERFLOW = 5


def create_engine_for(url: str, *, sqlite_synchronous: str = "FULL") -> AsyncEngine:
    if make_url(url).get_backend_name() != "sqlite":
        return create_async_engine(
            url, pool_size=PG_POOL_SIZE, max_overflow=PG_MAX_OVERFLOW, pool_pre_ping=True
        )
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


async def create_asyncpg_pool(url: str) -> asyncpg.Pool:
    """``url`` is the SQLAlchemy form (``postgresql+asyncpg://``); asyncpg takes the plain DSN."""
    dsn = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=PG_POOL_SIZE)
    assert pool is not None
    return pool
