"""What goes into the ledger and what comes out of the queue (plain dataclasses)."""

from __future__ import annotations

import threading
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import zstandard

from .schema import JobStatus

# Payloads are stored compressed with Zstandard at level 1: a 25 KB delivery shrinks about tenfold
# in 16 us of CPU (zlib at level 1: 83-117 us for a larger result, which was a third of the
# webhook's CPU per request). Rows written by earlier releases hold zlib streams; both are read.
PAYLOAD_COMPRESSION = 1
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_codecs = threading.local()  # zstandard's (de)compressors are not thread-safe: one per thread


def compress_payload(body: bytes) -> bytes:
    compressor = getattr(_codecs, "compressor", None)
    if compressor is None:
        compressor = _codecs.compressor = zstandard.ZstdCompressor(level=PAYLOAD_COMPRESSION)
    return bytes(compressor.compress(body))


def decompress_payload(stored: bytes) -> bytes:
    if not stored.startswith(_ZSTD_MAGIC):
        return zlib.decompress(stored)
    decompressor = getattr(_codecs, "decompressor", None)
    if decompressor is None:
        decompressor = _codecs.decompressor = zstandard.ZstdDecompressor()
    return bytes(decompressor.decompress(stored))


@dataclass(frozen=True, slots=True)
class IncomingDelivery:
    """What the webhook endpoint learned from a verified delivery, before any model is built."""

    delivery_id: str
    event: str
    action: str | None
    installation_id: int | None
    repo: str | None
    subject: str
    payload: bytes
    # The body's HMAC (the verified signature, 32 bytes): a body recorded before under another
    # delivery id is a replay (``Store.record_each``). None where no signature was checked.
    body_digest: bytes | None = None


def ledger_rows(batch: Iterable[IncomingDelivery], busy: set[str], now: float) -> list[dict[str, Any]]:
    """The rows for new deliveries: the first of a subject with nothing active is its head
    (``queued``), every other one ``waiting``. ``busy`` (subjects with an active row) grows."""
    rows = []
    for d in batch:
        rows.append(
            {
                "delivery_id": d.delivery_id,
                "event": d.event,
                "action": d.action,
                "installation_id": d.installation_id,
                "repo": d.repo,
                "subject": d.subject,
                "payload": compress_payload(d.payload),
                "received_at": now,
                "status": JobStatus.WAITING if d.subject in busy else JobStatus.QUEUED,
                "attempts": 0,
                "run_after": now,
                "done_handlers": "[]",
                "updated_at": now,
                "body_digest": d.body_digest,
            }
        )
        busy.add(d.subject)
    return rows


@dataclass(slots=True)
class Job:
    """A claimed delivery. ``done_handlers`` lists handlers that succeeded in an earlier attempt."""

    id: int
    delivery_id: str
    subject: str
    event: str
    payload: bytes
    attempts: int
    received_at: float = 0.0
    done_handlers: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class JobEnd:
    """A job's outcome, to be written: ``done``, ``failed`` or ``skipped``, with the error kept on
    the row, the handlers that completed (``job.done_handlers``) and when it ended (the store's
    clock; the row's ``updated_at``: the ends of a run are written together, later)."""

    job: Job
    status: JobStatus  # one of ``schema.FINISHED``
    error: str | None = None
    ended_at: float | None = None  # None: when written


def run_of(pending: Sequence[tuple[int, str, float, float | None]], now: float) -> list[int]:
    """The ids a worker may claim as one run of a subject: the longest prefix of the subject's
    unfinished rows (``(id, status, run_after, lease_until)``, oldest first) in which every row is
    free to start now: ``waiting`` (everything before it is finished or in this run), ``queued``
    and due, or ``running`` on an expired lease (a dead worker's run). A row held by a live lease
    or queued for later (a retry's backoff) ends the run, so the subject's order holds."""
    run: list[int] = []
    for row_id, status, run_after, lease_until in pending:
        free = (
            status == JobStatus.WAITING
            or (status == JobStatus.QUEUED and run_after <= now)
            or (status == JobStatus.RUNNING and lease_until is not None and lease_until < now)
        )
        if not free:
            break
        run.append(row_id)
    return run


@dataclass(frozen=True, slots=True)
class QueueStats:
    """``depth``: rows waiting, queued or running; ``oldest_due_age``: seconds the oldest queued,
    due row has waited past its ``run_after`` (None when no row is due)."""

    depth: int
    oldest_due_age: float | None
