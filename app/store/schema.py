"""The schema's single source (SQLAlchemy ``Table`` objects) and its numbered migrations.

A fresh database gets every table of ``metadata`` at once and is stamped with the latest version.
A database at an older version is upgraded by applying each later migration in order, in one
transaction under a lock (PostgreSQL: an advisory lock; SQLite: the write lock taken at BEGIN), so
several processes starting together upgrade it once. Each migration must leave the database as a
fresh ``create_all`` of the new version would be; ``tests/test_migrations.py`` checks that from
version 1, on both databases.

To change storage: edit the tables here, append a ``Migration`` to ``MIGRATIONS`` (a new table is
``Migration(N, "...", create_tables("name"))``), and never edit a migration that has shipped.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

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
    func,
    insert,
    inspect,
    select,
    text,
)

metadata = MetaData()

schema_version = Table(
    "schema_version",
    metadata,
    Column("version", Integer, nullable=False),
)


class JobStatus(enum.StrEnum):
    """A delivery's place in the queue (ARCHITECTURE.md draws the state machine):
    waiting -> queued -> running -> done | failed | skipped (running -> queued on retry or
    release). Stored as its value in ``deliveries.status``, which the hand-written SQL of the
    backends names literally."""

    WAITING = "waiting"
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    SKIPPED = "skipped"


ACTIVE = (JobStatus.QUEUED, JobStatus.RUNNING)
PENDING = (JobStatus.WAITING, JobStatus.QUEUED, JobStatus.RUNNING)
FINISHED = (JobStatus.DONE, JobStatus.FAILED, JobStatus.SKIPPED)

deliveries = Table(
    "deliveries",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("delivery_id", String(255), nullable=False, unique=True),
    Column("event", String(100), nullable=False),
    Column("action", String(100)),
    Column("installation_id", BigInteger),
    Column("repo", String(300)),
    Column("subject", String(400), nullable=False),
    Column("payload", LargeBinary, nullable=False),  # compressed delivery body (model.compress_payload)
    Column("received_at", Float, nullable=False),
    Column("status", String(20), nullable=False),
    Column("attempts", Integer, nullable=False, default=0),
    Column("run_after", Float, nullable=False),
    Column("lease_until", Float),
    Column("worker_id", String(100)),
    Column("error", Text),
    Column("done_handlers", Text, nullable=False, default="[]"),
    Column("updated_at", Float, nullable=False),
    # Version 4: the body's HMAC, so that a captured body replayed under a new delivery id is a
    # duplicate (NULL for rows recorded without a signature check, and before version 4).
    Column("body_digest", LargeBinary),
    Index("ix_deliveries_status_id", "status", "id"),
    Index("ix_deliveries_subject_status_id", "subject", "status", "id"),
    # Version 2: the oldest due job (health's queue age) without scanning finished rows.
    Index(
        "ix_deliveries_queued_run_after",
        "run_after",
        sqlite_where=text("status = 'queued'"),
        postgresql_where=text("status = 'queued'"),
    ),
    Index("ix_deliveries_body_digest", "body_digest", unique=True),
)


# Off the hot path: the missed-delivery sweeper's cursor (app/intake/recovery.py) and what the model
# reviewer keeps (app/store/llm_memory.py): its answers by what was asked, and tokens per
# installation and UTC day (the daily budget). Version 3.
recovery_state = Table(
    "recovery_state",
    metadata,
    Column("name", String(50), primary_key=True),
    Column("read_until", Float, nullable=False),  # delivered_at of the newest log entry read
    Column("updated_at", Float, nullable=False),
)

llm_answers = Table(
    "llm_answers",
    metadata,
    Column("key", String(64), primary_key=True),  # sha256 of what was asked (see reviewer.cache_key)
    Column("answer", Text, nullable=False),  # validated JSON
    Column("created_at", Float, nullable=False),
)

llm_usage = Table(
    "llm_usage",
    metadata,
    Column("installation_id", BigInteger, primary_key=True),  # 0: no installation (command line)
    Column("day", String(10), primary_key=True),  # UTC, YYYY-MM-DD
    Column("input_tokens", BigInteger, nullable=False, default=0),
    Column("output_tokens", BigInteger, nullable=False, default=0),
    Column("requests", Integer, nullable=False, default=0),
)

llm_spend = Table(
    "llm_spend",
    metadata,
    Column("scope", String(10), primary_key=True),  # "pull" or "person" (llm.memory.SpendScope)
    Column("subject", String(300), primary_key=True),  # "owner/repo#N", "installation:login"
    Column("day", String(10), primary_key=True),  # UTC, YYYY-MM-DD
    Column("tokens", BigInteger, nullable=False, default=0),
    Column("requests", Integer, nullable=False, default=0),
)


# Disputes remembered for a repository (app/store/learnings.py): a later review leaves out a
# finding of the same rule, path pattern and code line. Version 4.
learnings = Table(
    "learnings",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("repo", String(300), nullable=False),  # owner/name, lower case
    Column("rule", String(200), nullable=False),
    Column("path_dir", String(1000), nullable=False),  # the pattern: files of this directory
    Column("path_ext", String(100), nullable=False),  # ... with this extension
    # the finding's content digest (16 hex digits), or before version 7 the code line's sha256
    Column("line_sha", String(64), nullable=False),
    Column("severity", Integer, nullable=True),  # the most severe it withdraws (null: before version 7)
    Column("example", Text, nullable=False),  # the line, secrets redacted, capped: what is listed
    Column("reason", Text, nullable=False),
    Column("created_by", String(100), nullable=False),
    Column("source", String(400), nullable=False),  # owner/name#N where it was disputed
    Column("created_at", Float, nullable=False),
    Index("ux_learnings_key", "repo", "rule", "path_dir", "path_ext", "line_sha", unique=True),
)


@dataclass(frozen=True, slots=True)
class Migration:
    """One step from ``version - 1`` to ``version``, run on a sync connection inside the upgrade's
    transaction (SQLite and PostgreSQL both have transactional DDL)."""

    version: int
    description: str
    apply: Callable[[Connection], None]


def create_tables(*names: str) -> Callable[[Connection], None]:
    """A migration step that adds tables (with their indexes) as ``metadata`` defines them."""

    def apply(conn: Connection) -> None:
        metadata.create_all(conn, tables=[metadata.tables[name] for name in names])

    return apply


def create_indexes(table: str, *names: str) -> Callable[[Connection], None]:
    def apply(conn: Connection) -> None:
        for index in metadata.tables[table].indexes:
            if index.name in names:
                index.create(conn)

    return apply


def _promote_stalled_subjects(conn: Connection) -> None:
    """Version 1 on PostgreSQL could leave a subject with ``waiting`` rows and no head (a finish
    racing a record; issue 9). Give every such subject its head back: its oldest waiting row."""
    conn.execute(
        text(
            "UPDATE deliveries SET status = 'queued' WHERE id IN ("
            " SELECT min(w.id) FROM deliveries w WHERE w.status = 'waiting'"
            " AND NOT EXISTS (SELECT 1 FROM deliveries a"
            "  WHERE a.subject = w.subject AND a.status IN ('queued', 'running'))"
            " GROUP BY w.subject)"
        )
    )


def _version_2(conn: Connection) -> None:
    create_indexes("deliveries", "ix_deliveries_queued_run_after")(conn)
    _promote_stalled_subjects(conn)


def _add_column(table: Table, name: str) -> Callable[[Connection], None]:
    """A migration step that adds a column as ``metadata`` defines it, unless the table already
    has it (an earlier step created the table from today's ``metadata``)."""

    def apply(conn: Connection) -> None:
        if name in {c["name"] for c in inspect(conn).get_columns(table.name)}:
            return
        column = table.c[name]
        conn.execute(
            text(f"ALTER TABLE {table.name} ADD COLUMN {column.name} {column.type.compile(conn.dialect)}")
        )

    return apply


def _version_4(conn: Connection) -> None:
    column = deliveries.c.body_digest
    conn.execute(text(f"ALTER TABLE deliveries ADD COLUMN {column.name} {column.type.compile(conn.dialect)}"))
    create_indexes("deliveries", "ix_deliveries_body_digest")(conn)


# Version 1 is the schema the first release created (``deliveries``, ``schema_version``).
MIGRATIONS: tuple[Migration, ...] = (
    Migration(2, "index queued rows by run_after; give subjects stalled by the v1 race a head", _version_2),
    Migration(
        3,
        "the delivery-recovery cursor; the model reviewer's answers and daily usage",
        create_tables("recovery_state", "llm_answers", "llm_usage"),
    ),
    Migration(4, "the body's digest on each delivery: a replayed body is a duplicate", _version_4),
    Migration(
        5, "the model reviewer's daily usage per pull request and per person", create_tables("llm_spend")
    ),
    Migration(6, "disputes remembered for a repository (learnings)", create_tables("learnings")),
    Migration(
        7, "a learning's severity: it withdraws nothing more severe", _add_column(learnings, "severity")
    ),
)

SCHEMA_VERSION = MIGRATIONS[-1].version if MIGRATIONS else 1


class SchemaTooNew(RuntimeError):
    pass


def current_version(conn: Connection) -> int | None:
    """The database's schema version; None for an empty database."""
    tables = set(inspect(conn).get_table_names())
    if "schema_version" not in tables:
        return 1 if "deliveries" in tables else None
    version = conn.execute(select(func.max(schema_version.c.version))).scalar()
    return int(version) if version is not None else (1 if "deliveries" in tables else None)


def upgrade(conn: Connection) -> list[int]:
    """Bring the schema to ``SCHEMA_VERSION`` inside the caller's locked transaction; return the versions
    applied (empty when already there). Refuses a database newer than this code."""
    current = current_version(conn)
    if current is None:
        metadata.create_all(conn)
        conn.execute(insert(schema_version).values(version=SCHEMA_VERSION))
        return [SCHEMA_VERSION]
    if current > SCHEMA_VERSION:
        raise SchemaTooNew(
            f"database schema version {current} is newer than this code ({SCHEMA_VERSION}); "
            "upgrade revbot before pointing it at this database"
        )
    applied = []
    for migration in MIGRATIONS:
        if migration.version > current:
            migration.apply(conn)
            conn.execute(insert(schema_version).values(version=migration.version))
            applied.append(migration.version)
    return applied
