"""Pacing shared by the webhook endpoint, the worker and the runtime: requests before jobs
(``AckFirst``), and capped exponential backoff with jitter (``backoff_delay``)."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable


class AckFirst:
    """Webhook requests go before jobs (one event loop serves both).

    The endpoint marks a request from its start until it hands the delivery to the ledger (where
    it waits on the database, using no CPU). A job starts once no request is in that stretch and
    none has started for ``quiet`` seconds, or after the worker's ``ack_first_wait`` at most; so a
    flood of deliveries is acknowledged at the endpoint's own speed while the worker still makes
    progress, and the backlog is worked off (in runs) once the flood ends. Acknowledging within
    GitHub's 10 s is the deadline; the queue is durable.
    """

    def __init__(self, *, quiet: float = 0.005, yield_every: float = 0.0005) -> None:
        self.quiet = quiet
        self.yield_every = yield_every
        self.receiving = 0
        self._last_started = float("-inf")
        self._yielded_at = float("-inf")

    @staticmethod
    def _now() -> float:
        return time.monotonic()  # the event loop's clock

    def request_started(self) -> Callable[[], None]:
        """Count a request as being received; returns the call (idempotent) that ends that."""
        self.receiving += 1
        self._last_started = self._now()
        ended = False

        def handed_over() -> None:
            nonlocal ended
            if ended:
                return
            ended = True
            self.receiving -= 1

        return handed_over

    async def wait(self, at_most: float) -> None:
        """Until the endpoint is quiet, or ``at_most`` seconds (checked every ``quiet`` seconds:
        cheaper under a flood than waking at each hand-over).

        Jobs that do no I/O never suspend, so a run of them would hold the event loop until its
        write: after ``yield_every`` seconds of that, the loop gets a turn first (answers whose
        rows have committed go out, new requests are read), then the endpoint is checked."""
        now = self._now()
        if now - self._yielded_at >= self.yield_every:
            await asyncio.sleep(0)
            now = self._yielded_at = self._now()
        deadline = now + at_most
        while now < deadline and (self.receiving or now < self._last_started + self.quiet):
            await asyncio.sleep(min(self.quiet, deadline - now))
            now = self._yielded_at = self._now()


def backoff_delay(
    attempt: int, *, base: float, cap: float, rand: Callable[[], float] = random.random
) -> float:
    """Capped exponential backoff with "equal jitter": half fixed, half random, never above cap."""
    ceiling = min(cap, base * 2.0 ** max(0, attempt - 1))
    return ceiling / 2 + rand() * ceiling / 2
