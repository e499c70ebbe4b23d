"""Schema migrations: a database left by version 1 is upgraded to the latest version at startup,
once even when several processes start together, and ends up exactly as a fresh database."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from sqlalchemy import (
    BigInteger,
    Column,
    Connection,
    Float,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    insert,
    inspect,
    select,
)
from sqlalchemy.ext.asyncio import create_async_engine

from app.store import SCHEMA_VERSION, Store, schema_version
from app.store.schema import MIGRATIONS

pytestmark = pytest.mark.slow

# The schema exactly as version 1 shipped it (app/store.py at the first release). Frozen: never edit.
V1 = MetaData()
Table("schema_version", V1, Column("version", Integer, nullable=False))
V1_DELIVERIES = Table(
    "deliveries",
    V1,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("delivery_id", String(255), nullable=False, unique=True),
    Column("event", String(100), nullable=False),
    Column("action", String(100)),
    Column("installation_id", BigInteger),
    Column("repo", String(300)),
    Column("subject", String(400), nullable=False),
    Column("payload", LargeBinary, nullable=False),
    Column("received_at", Float, nullable=False),
    Column("status", String(20), nullable=False),
    Column("attempts", Integer, nullable=False, default=0),
    Column("run_after", Float, nullable=False),
    Column("lease_until", Float),
    Column("worker_id", String(100)),
    Column("error", Text),
    Column("done_handlers", Text, nullable=False, default="[]"),
    Column("updated_at", Float, nullable=False),
    Index("ix_deliveries_status_id", "status", "id"),
    Index("ix_deliveries_subject_status_id", "subject", "status", "id"),
)


def _row(delivery_id: str, subject: str, status: str) -> dict[str, Any]:
    return {
        "delivery_id": delivery_id,
        "event": "issue_comment",
        "subject": subject,
        "payload": b"x\x9c\xab\xae\x05\x00\x01u\x00\xf9",  # zlib of b"{}"
        "received_at": 1.0,
        "status": status,
        "attempts": 0,
        "run_after": 1.0,
        "done_handlers": "[]",
        "updated_at": 1.0,
    }


def _create_v1(conn: Connection) -> None:
    V1.create_all(conn)
    conn.execute(insert(V1.tables["schema_version"]).values(version=1))
    conn.execute(
        insert(V1_DELIVERIES),
        [
            _row("a1", "o/r#1", "done"),
            _row("a2", "o/r#1", "running"),
            _row("a3", "o/r#1", "waiting"),
            # What the version-1 race left behind: waiting rows and no head.
            _row("b1", "o/r#2", "done"),
            _row("b2", "o/r#2", "waiting"),
            _row("b3", "o/r#2", "waiting"),
        ],
    )


def _shape(conn: Connection) -> dict[str, Any]:
    """Tables, columns (name, type, nullability) and indexes (name, columns, uniqueness)."""
    inspector = inspect(conn)
    shape = {}
    for table in sorted(inspector.get_table_names()):
        columns = [(c["name"], str(c["type"]), c["nullable"]) for c in inspector.get_columns(table)]
        indexes = sorted(
            (i["name"], tuple(i["column_names"]), bool(i["unique"])) for i in inspector.get_indexes(table)
        )
        shape[table] = (columns, indexes)
    return shape


async def test_a_version_1_database_is_upgraded_once_and_matches_a_fresh_one(db_url: str) -> None:
    engine = create_async_engine(db_url)
    async with engine.begin() as conn:
        await conn.run_sync(_create_v1)
    # Two processes starting at once: the upgrade runs once, under the lock.
    stores = [Store(db_url), Store(db_url)]
    await asyncio.gather(*(s.create_schema() for s in stores))
    async with engine.connect() as conn:
        versions = (await conn.execute(select(schema_version.c.version))).scalars().all()
        upgraded = await conn.run_sync(_shape)
    assert sorted(versions) == [1, *(m.version for m in MIGRATIONS)]
    assert max(versions) == SCHEMA_VERSION
    statuses = {r["delivery_id"]: r["status"] for r in await stores[0].all_jobs()}
    assert statuses == {
        "a1": "done",
        "a2": "running",
        "a3": "waiting",
        "b1": "done",
        "b2": "queued",
        "b3": "waiting",
    }
    [job] = await stores[0].claim(worker_id="w", limit=5, lease_seconds=60)
    assert (job.delivery_id, job.payload) == ("b2", b"{}")  # a payload stored by version 1 (zlib)
    for s in stores:
        await s.close()

    async with engine.begin() as conn:
        await conn.run_sync(_drop_everything)
    fresh = Store(db_url)
    await fresh.create_schema()
    await fresh.close()
    async with engine.connect() as conn:
        assert await conn.run_sync(_shape) == upgraded
        assert (await conn.execute(select(schema_version.c.version))).scalars().all() == [SCHEMA_VERSION]
    await engine.dispose()


def _drop_everything(conn: Connection) -> None:
    existing = MetaData()
    existing.reflect(conn)
    existing.drop_all(conn)
