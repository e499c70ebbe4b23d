"""Periodic upkeep in every bot process: recover missed deliveries, empty old payloads, forget
old model answers.

It runs once at startup and then every ``interval`` seconds (5 minutes). A failing round (GitHub
or the database unreachable) is logged and counted, and the next round tries again; the loop
itself never ends before ``stop()``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import delete, select, update

from ..intake.recovery import DeliveryRecovery, SweepCounts
from ..jobs.tasks import cancel_and_wait
from ..metrics import PAYLOADS_EMPTIED, RECOVERY_SWEEPS
from ..store import FINISHED, Store, compress_payload, deliveries
from ..store.schema import llm_answers

log = logging.getLogger(__name__)

INTERVAL_SECONDS = 5 * 60
EMPTY_PAYLOAD = compress_payload(b"")
RETENTION_BATCH = 500  # rows per transaction: never one long lock over a large table
ANSWER_DAYS = 30  # a model answer kept (by what was asked: file, head, thread) this long
STOP_WITHIN = 1.0  # seconds a cancelled round may take to end before shutdown goes on


async def empty_old_payloads(store: Store, *, days: int, now: float | None = None) -> int:
    """Empty the payload of deliveries whose job ended more than ``days`` ago; the rows (their
    delivery id is the permanent dedup claim) stay. Returns how many were emptied."""
    cutoff = (time.time() if now is None else now) - days * 86400
    total = 0
    while True:
        batch = (
            select(deliveries.c.id)
            .where(
                deliveries.c.status.in_(FINISHED),
                deliveries.c.updated_at < cutoff,
                deliveries.c.payload != EMPTY_PAYLOAD,
            )
            .limit(RETENTION_BATCH)
            .scalar_subquery()
        )
        async with store.begin() as conn:
            emptied = (
                await conn.execute(
                    update(deliveries).where(deliveries.c.id.in_(batch)).values(payload=EMPTY_PAYLOAD)
                )
            ).rowcount
        total += emptied
        if emptied < RETENTION_BATCH:
            break
    if total:
        PAYLOADS_EMPTIED.inc(total)
        log.info("emptied the payload of %d delivery(ies) handled more than %d days ago", total, days)
    return total


async def forget_old_answers(store: Store, *, days: int = ANSWER_DAYS, now: float | None = None) -> int:
    """Delete the model's cached answers last stored more than ``days`` ago, so the cache stays
    bounded (an answer is keyed by what was asked: an old one is rarely asked again). Returns how
    many were deleted."""
    cutoff = (time.time() if now is None else now) - days * 86400
    total = 0
    while True:
        batch = select(llm_answers.c.key).where(llm_answers.c.created_at < cutoff).limit(RETENTION_BATCH)
        async with store.begin() as conn:
            deleted = (
                await conn.execute(delete(llm_answers).where(llm_answers.c.key.in_(batch.scalar_subquery())))
            ).rowcount
        total += deleted
        if deleted < RETENTION_BATCH:
            return total


class Housekeeping:
    def __init__(
        self,
        store: Store,
        recovery: DeliveryRecovery,
        *,
        retention_days: int,
        interval: float = INTERVAL_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.recovery = recovery
        self.retention_days = retention_days
        self.interval = interval
        self.clock = clock
        self.rounds = 0
        self.round_done = asyncio.Event()  # set after every round (tests wait on it)
        self.last_sweep: SweepCounts | None = None
        self.last_sweep_at: float | None = None
        self.last_error: str | None = None
        self.recovered_total = 0
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="housekeeping")

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            # Bounded: a sweep stuck on a database that does not answer is left behind.
            await cancel_and_wait(self._task, within=STOP_WITHIN)
            self._task = None

    def status(self) -> dict[str, Any]:
        """For ``/healthz``: when the delivery log was last swept and what came of it."""
        return {
            "last_sweep_at": self.last_sweep_at,
            "recovered": self.recovered_total,
            "last_error": self.last_error,
        }

    async def run_once(self) -> None:
        try:
            counts = await self.recovery.sweep()
        except Exception as exc:  # noqa: BLE001 - GitHub or the database failed: the next round retries
            self.last_error = f"delivery recovery: {type(exc).__name__}: {exc}"[:500]
            RECOVERY_SWEEPS.labels(outcome="error").inc()
            log.warning(
                "delivery recovery failed (%s: %s); next try in %.0fs", type(exc).__name__, exc, self.interval
            )
        else:
            RECOVERY_SWEEPS.labels(outcome="skipped" if counts is None else "ok").inc()
            if counts is not None:
                self.last_sweep, self.last_sweep_at, self.last_error = counts, self.clock(), None
                self.recovered_total += counts.recovered
        try:
            await empty_old_payloads(self.store, days=self.retention_days, now=self.clock())
            await forget_old_answers(self.store, now=self.clock())
        except Exception as exc:  # noqa: BLE001 - the database failed: the next round retries
            log.warning(
                "retention (payloads, model answers) failed (%s: %s); next try in %.0fs",
                type(exc).__name__,
                exc,
                self.interval,
            )

    async def _run(self) -> None:
        while not self._stop.is_set():
            await self.run_once()
            self.rounds += 1
            self.round_done.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), timeout=self.interval)
