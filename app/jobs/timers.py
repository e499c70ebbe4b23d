"""Durable timers over the queue: ``Store.schedule`` rows with a due time and a deterministic id.

A timer for a pull request due at ``at`` is filed under the slot ``ceil(at / bucket)`` and runs
at that slot's end, so every request for a moment in the same slot is one row (a burst of events
yields one evaluation), and a timer never runs early. The slots this process filed are remembered
for a while, so a burst also costs one write: asking again for a filed slot would insert nothing
(its id is a permanent key), and a slot is only asked for until it is due. Each slot has its own
queue subject, so a timer waiting for its time never holds back the pull request's deliveries;
when due, its job records the evaluation itself on the pull request's subject (``look_now``),
where it runs in order with everything else about that pull request.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import orjson
from cachetools import TTLCache

from ..events import READINESS_EVENT, TIMER_EVENT
from ..store import Store
from ..store.model import IncomingDelivery

FILED_MEMORY = 4096  # timers remembered as filed (one per PR and slot of recent bursts)
FILED_SECONDS = 3600.0  # how long; asking after it only costs a write that inserts nothing


def slot_of(at: float, bucket: float) -> int:
    return math.ceil(at / bucket)


def _payload(repo: str, pr_number: int, installation_id: int, since: float) -> bytes:
    return orjson.dumps(
        {
            "repository": {"full_name": repo},
            "installation": {"id": installation_id},
            "pull_request": {"number": pr_number},
            "since": since,
        }
    )


class StoreTimers:
    def __init__(self, store: Store, *, wake: Callable[[], None], bucket: float) -> None:
        self._store = store
        self._wake = wake
        self._bucket = bucket
        # Ids of timers filed here: a slot is asked for only until it is due (``bucket`` seconds
        # ahead at most, or a verdict's own later time), so entries outlive their use.
        self._filed: TTLCache[str, None] = TTLCache(FILED_MEMORY, ttl=FILED_SECONDS, timer=store.now)

    def now(self) -> float:
        return self._store.now()

    async def look_again(
        self, *, repo: str, pr_number: int, installation_id: int, at: float, since: float
    ) -> None:
        slot = slot_of(at, self._bucket)
        subject = f"{repo}#{pr_number}"
        timer_id = f"revbot-timer:{subject}@{slot}"
        if timer_id in self._filed:
            return
        item = IncomingDelivery(
            delivery_id=timer_id,
            event=TIMER_EVENT,
            action=None,
            installation_id=installation_id,
            repo=repo,
            subject=f"{subject}~timer@{slot}",
            payload=_payload(repo, pr_number, installation_id, since),
        )
        await self._store.schedule(item, run_after=slot * self._bucket)
        self._filed[timer_id] = None  # only once committed: a failed write is asked for again

    async def look_now(
        self, *, timer_id: str, repo: str, pr_number: int, installation_id: int, since: float
    ) -> None:
        item = IncomingDelivery(
            delivery_id=f"{timer_id}:run",
            event=READINESS_EVENT,
            action=None,
            installation_id=installation_id,
            repo=repo,
            subject=f"{repo}#{pr_number}",
            payload=_payload(repo, pr_number, installation_id, since),
        )
        if await self._store.schedule(item, run_after=self._store.now()):
            self._wake()
