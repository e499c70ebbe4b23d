"""The storage backend interface: what ``Store`` needs of one database dialect.

``Store`` holds the queue's rules; a backend holds how one database runs them fast: SQLite's one
writer thread with group commit (``sqlite.py``), PostgreSQL's asyncpg prepared statements
(``postgres.py``). ``connect.open_backend`` chooses one, once, from the URL; nothing else in the
bot asks which database it is on. The queue writes that are the same on both (retry, release,
lease renewal, handler progress, the health probe) are ``ops.py``'s Core transactions, run
through ``write``; the hot ones (record, claim, finish-and-claim-next) are the backend's own.

A new backend (say PostgreSQL behind a pooler in transaction mode, where prepared statements and
session advisory locks do not survive between transactions) is one module implementing this,
one branch in ``open_backend``, and one more parameter of the ``db_url`` test fixture, under which
the whole storage and queue suite runs unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol, TypeVar

from sqlalchemy import Connection, Table
from sqlalchemy.ext.asyncio import AsyncConnection

from .model import IncomingDelivery, Job, JobEnd

T = TypeVar("T")

Outcome = bool | Exception  # per delivery: new, duplicate, or why it could not be recorded


class Backend(Protocol):
    ledger_in_flight: int  # ledger batches that may commit at once (see ``store.Ledger``)

    def describe(self) -> str:
        """Where the database is, without its password (for start-up errors and logs)."""
        ...

    async def record(self, items: Sequence[IncomingDelivery], now: float) -> dict[str, Outcome]:
        """Insert new deliveries (unique ids and body digests) as rows of the queue, each
        subject's first new row its head unless the subject is busy; per id: new, duplicate,
        or the error that kept that row alone out."""
        ...

    async def claim(
        self, *, worker_id: str, limit: int, lease_seconds: float, now: float, share: int
    ) -> list[Job]:
        """Up to ``limit`` due subject heads (or expired leases), leased, in fair turns between
        installations (``ops.FAIR_TURNS``), with at most ``share`` of one installation's jobs
        running under ``worker_id``."""
        ...

    async def finish(
        self,
        ends: Sequence[JobEnd],
        *,
        worker_id: str,
        now: float,
        claim_next_for: float | None,
        run_limit: int,
        run_continues: bool,
    ) -> tuple[bool, list[Job]]:
        """``Store.finish_jobs`` in one transaction."""
        ...

    async def write(self, fn: Callable[[Connection], T], *, durable: bool = False) -> T:
        """Run one transaction function (``ops.py``); ``durable``: synced like the ledger."""
        ...

    def read(self) -> AbstractAsyncContextManager[AsyncConnection]:
        """A connection for reads: the store's, and other modules' own tables (on SQLite its own
        connection, never blocked by the writer)."""
        ...

    def begin(self) -> AbstractAsyncContextManager[AsyncConnection]:
        """A write transaction for tables off the hot path (other modules' own tables, the schema)."""
        ...

    async def lock_for_upgrade(self, conn: AsyncConnection) -> None:
        """Inside ``begin()``: hold off other processes upgrading the schema at the same time."""
        ...

    def exclusive(self, key: int) -> AbstractAsyncContextManager[bool]:
        """True while this process holds ``key`` among all processes on the database (False:
        another one does); for work one process at a time does (the delivery recovery)."""
        ...

    def upsert(self, table: Table) -> Any:
        """An INSERT on ``table`` with ``on_conflict_do_update`` / ``on_conflict_do_nothing``."""
        ...

    def not_reachable_yet(self, exc: BaseException) -> bool:
        """A database that may answer shortly (still starting, locked by another process), as
        opposed to one that never will (wrong password, missing database)."""
        ...

    async def close(self) -> None: ...


def root_cause(exc: BaseException) -> BaseException:
    """The innermost cause: what the driver said, not SQLAlchemy's wrapping of it."""
    seen = {id(exc)}
    while (inner := exc.__cause__ or exc.__context__) is not None and id(inner) not in seen:
        seen.add(id(inner))
        exc = inner
    return exc
