"""What goes into the ledger and what comes out of the queue (plain dataclasses)."""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

# Payloads are kept zlib-compressed: webhook JSON shrinks about tenfold, and at level 1 the
# compression costs less CPU than writing the uncompressed pages would.
PAYLOAD_COMPRESSION = 1


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
                "payload": zlib.compress(d.payload, PAYLOAD_COMPRESSION),
                "received_at": now,
                "status": "waiting" if d.subject in busy else "queued",
                "attempts": 0,
                "run_after": now,
                "done_handlers": "[]",
                "updated_at": now,
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
class QueueStats:
    """``depth``: rows waiting, queued or running; ``oldest_due_age``: seconds the oldest queued,
    due row has waited past its ``run_after`` (None when no row is due)."""

    depth: int
    oldest_due_age: float | None
