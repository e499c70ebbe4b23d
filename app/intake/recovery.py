"""Recovery of missed deliveries from the App's delivery log.

GitHub never retries a failed delivery by itself: while the bot was down, restarting, or
answering 503, those events are lost unless someone asks for them. This reads the log
(``GET /app/hook/deliveries``, newest first, back to where the last sweep read, at most the 3 days
GitHub keeps) and, for every delivery id with no successful attempt and no ledger row, fetches
the delivery (``GET /app/hook/deliveries/{id}``) and records it through the same ledger method
as the webhook endpoint, under the same delivery id: a delivery that did arrive, or that a
concurrent redelivery records first, is a duplicate and nothing runs twice.

One process sweeps at a time: on PostgreSQL the one that holds an advisory lock, on SQLite
(one process by design) the in-process lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import gidgethub
import orjson
from sqlalchemy import insert, select, update

from ..github.app import AppClient
from ..metrics import DELIVERIES, RECOVERED
from ..store import IncomingDelivery, Store, deliveries
from ..store.schema import recovery_state
from ..web.endpoint import SIGNATURE_PREFIX, Refused, delivery_headers, incoming_delivery

log = logging.getLogger(__name__)

LOOKBACK_SECONDS = 3 * 24 * 3600  # GitHub keeps the delivery log for 3 days
# Read a little before the last sweep's newest entry: an attempt can appear in the log after a
# later one did. Re-reading costs one page; recording twice is impossible (the ledger dedups).
OVERLAP_SECONDS = 10 * 60
SHA256_HEX = re.compile(r"[0-9a-f]{64}")
LOCK_KEY = 727275  # pg advisory lock of the sweeper (727274 serialises the schema DDL)
CURSOR = "hook_deliveries"


@dataclass(frozen=True, slots=True)
class SweepCounts:
    read: int  # log entries read (attempts)
    failed: int  # delivery ids with no successful attempt
    already_recorded: int  # ... that the ledger has anyway (the bot answered late, or a redelivery)
    recovered: int  # ... recorded now


def github_time(stamp: str) -> float:
    """Epoch seconds of GitHub's ``2024-01-02T03:04:05Z``."""
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def succeeded(status_code: Any) -> bool:
    return isinstance(status_code, int) and 200 <= status_code < 300


def never_delivered(attempts: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Delivery id (``guid``) -> its latest attempt, for ids none of whose attempts succeeded."""
    by_guid: dict[str, list[dict[str, Any]]] = {}
    for attempt in attempts:
        by_guid.setdefault(str(attempt["guid"]), []).append(attempt)
    return {
        guid: max(tries, key=lambda t: int(t["id"]))
        for guid, tries in by_guid.items()
        if not any(succeeded(t.get("status_code")) for t in tries)
    }


def logged_digest(headers: Any) -> str | None:
    """The body's HMAC as GitHub signed the attempt, from the request headers its log keeps: the
    digest the endpoint would have recorded, so a replay of that captured body is a duplicate
    after a recovery too. None when the header is absent or not a SHA-256 hex digest."""
    if not isinstance(headers, dict):
        return None
    for name, value in headers.items():
        if str(name).lower() == "x-hub-signature-256" and isinstance(value, str):
            digest = value.removeprefix(SIGNATURE_PREFIX).lower()
            return digest if SHA256_HEX.fullmatch(digest) else None
    return None


def incoming_from(delivery: dict[str, Any]) -> IncomingDelivery | None:
    """The ledger entry for a delivery read back from the log, as the endpoint would have built it
    (every value checked the same way); None for a ping or a delivery the ledger could not hold."""
    request = delivery.get("request") or {}
    payload = request.get("payload")
    if not isinstance(payload, dict) or delivery.get("event") == "ping":
        return None
    body = orjson.dumps(payload)
    try:
        event, delivery_id = delivery_headers(str(delivery.get("event")), str(delivery.get("guid")))
        return incoming_delivery(event, delivery_id, payload, body, logged_digest(request.get("headers")))
    except Refused as refused:
        log.warning("delivery %s from GitHub's log not recorded: %s", delivery.get("guid"), refused.error)
        return None


class DeliveryRecovery:
    def __init__(
        self,
        store: Store,
        app: AppClient,
        *,
        on_recorded: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.app = app
        self.on_recorded = on_recorded
        self.clock = clock
        self._local = asyncio.Lock()

    @contextlib.asynccontextmanager
    async def _elected(self) -> AsyncIterator[bool]:
        """True while this process may sweep; False when another one is sweeping."""
        if self._local.locked():
            yield False
            return
        async with self._local, self.store.backend.exclusive(LOCK_KEY) as elected:
            yield elected

    async def read_until(self) -> float | None:
        async with self.store.backend.read() as conn:
            found = await conn.execute(
                select(recovery_state.c.read_until).where(recovery_state.c.name == CURSOR)
            )
            return found.scalar()

    async def _save(self, read_until: float) -> None:
        now = self.clock()
        async with self.store.begin() as conn:
            changed = await conn.execute(
                update(recovery_state)
                .where(recovery_state.c.name == CURSOR)
                .values(read_until=read_until, updated_at=now)
            )
            if changed.rowcount == 0:
                await conn.execute(
                    insert(recovery_state).values(name=CURSOR, read_until=read_until, updated_at=now)
                )

    async def _in_ledger(self, ids: Sequence[str]) -> set[str]:
        if not ids:
            return set()
        async with self.store.backend.read() as conn:
            found = await conn.execute(
                select(deliveries.c.delivery_id).where(deliveries.c.delivery_id.in_(ids))
            )
            return set(found.scalars())

    async def sweep(self) -> SweepCounts | None:
        """One pass over the log; None when another process holds the sweep."""
        async with self._elected() as elected:
            if not elected:
                log.info("delivery recovery: another process is sweeping")
                return None
            return await self._sweep()

    async def _sweep(self) -> SweepCounts:
        now = self.clock()
        last = await self.read_until()
        since = (
            now - LOOKBACK_SECONDS if last is None else max(now - LOOKBACK_SECONDS, last - OVERLAP_SECONDS)
        )
        attempts: list[dict[str, Any]] = []
        newest = last
        async for attempt in self.app.iter_hook_deliveries():
            at = github_time(str(attempt["delivered_at"]))
            if at < since:
                break  # newest first: everything further was read by an earlier sweep
            attempts.append(attempt)
            newest = at if newest is None else max(newest, at)
        missed = never_delivered(attempts)
        recorded = await self._in_ledger(sorted(missed))
        recovered = 0
        for guid, attempt in missed.items():
            if guid in recorded:
                continue
            try:
                delivery = await self.app.get_hook_delivery(delivery_id=int(attempt["id"]))
            except gidgethub.BadRequest as exc:
                if int(exc.status_code) != 404:
                    raise
                # Gone from the log between the listing and now: nothing left to recover.
                log.warning("delivery %s left GitHub's log before it could be recovered", guid)
                continue
            incoming = incoming_from(delivery)
            if incoming is None:
                continue
            [is_new] = await self.store.record_deliveries([incoming])
            if is_new:
                recovered += 1
                RECOVERED.inc()
                DELIVERIES.labels(event=incoming.event, outcome="recovered").inc()
                log.info("recovered delivery %s (%s) from GitHub's delivery log", guid, incoming.event)
        if recovered:
            self.on_recorded()
        if newest is not None:
            await self._save(newest)
        counts = SweepCounts(
            read=len(attempts), failed=len(missed), already_recorded=len(recorded), recovered=recovered
        )
        log.info(
            "delivery recovery: %d attempt(s) read, %d delivery id(s) never delivered, %d already recorded, "
            "%d recovered",
            counts.read,
            counts.failed,
            counts.already_recorded,
            counts.recovered,
        )
        return counts
