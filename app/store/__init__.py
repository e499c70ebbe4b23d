"""The delivery ledger and the job queue, on SQLite (default) or PostgreSQL.

Each delivery is one row of ``deliveries``, which is both its ledger entry and its job: the unique
``delivery_id`` is a permanent claim (a redelivery of the same id is recognised forever, so rows
are never deleted) and the row's queue columns say where its work stands. A 2xx answer to a
webhook follows the commit of its row.

Queue rules, so that any number of workers can share it:
- deliveries of one subject (``owner/repo#N``) are worked one at a time, in arrival (id) order.
  Only the head of a subject is ``queued``; later ones are ``waiting``. Claims scan only subject
  heads, however long one subject's backlog grows, and refuse a row with an earlier active row
  of its subject (two web processes racing on one subject cannot break order). The worker that
  ends a subject's jobs claims, in the same transaction, its next *run*: the following rows
  that are free to start, worked by that worker in order (a backlog costs a write per run, not
  two per job); with no claim, the next row is promoted to head instead;
- a claim is a lease; a row whose lease ran out (its process died) is claimable again;
- on PostgreSQL the claim uses ``FOR UPDATE SKIP LOCKED`` so workers never double-claim.

Times are epoch seconds (floats) from the store's clock: they compare the same on both databases.

Modules: ``schema`` (tables, migrations), ``model`` (dataclasses), ``ops`` (the transactions both
backends share), ``backend`` (the interface a dialect implements), ``sqlite`` and
``sqlite_writer`` (SQLite's one writer thread), ``postgres`` (asyncpg), ``connect`` (which one),
``store`` (``Store``, ``Ledger``); off the hot path, what the use cases keep for the review:
``learnings`` (disputes remembered per repository), ``llm_memory`` (the model reviewer's answers
and spend).
"""

from .backend import Backend
from .connect import describe_database, open_backend, read_only_engine
from .llm_memory import DatabaseMemory
from .model import (
    PAYLOAD_COMPRESSION,
    IncomingDelivery,
    Job,
    JobEnd,
    QueueStats,
    compress_payload,
    decompress_payload,
    ledger_rows,
)
from .schema import ACTIVE, FINISHED, PENDING, SCHEMA_VERSION, JobStatus, deliveries, metadata, schema_version
from .store import Ledger, Store

__all__ = [
    "ACTIVE",
    "FINISHED",
    "PAYLOAD_COMPRESSION",
    "PENDING",
    "SCHEMA_VERSION",
    "Backend",
    "DatabaseMemory",
    "IncomingDelivery",
    "Job",
    "JobEnd",
    "JobStatus",
    "Ledger",
    "QueueStats",
    "Store",
    "compress_payload",
    "decompress_payload",
    "deliveries",
    "describe_database",
    "ledger_rows",
    "metadata",
    "open_backend",
    "read_only_engine",
    "schema_version",
]
