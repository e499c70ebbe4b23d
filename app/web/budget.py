"""Bytes of request bodies held in memory at once, over all requests of the process.

Without it, a hundred concurrent 24 MiB bodies are 2.4 GB of memory before one signature is
checked. The endpoint reserves a body's bytes as they arrive (``Reservation``) and releases them
once its delivery is answered.
"""

from __future__ import annotations

import asyncio
from collections import deque

from aiohttp import web


class BodyBudget:
    """The budget, first come, first served. ``peak`` is the most ever reserved (what the fault
    tests assert on)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.in_use = 0
        self.peak = 0
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()

    def _take(self, size: int) -> None:
        self.in_use += size
        self.peak = max(self.peak, self.in_use)

    def _grant(self) -> None:
        while self._waiters and self.in_use + self._waiters[0][0] <= self.limit:
            size, waiter = self._waiters.popleft()
            if not waiter.done():
                self._take(size)
                waiter.set_result(None)

    async def reserve(self, size: int, *, wait: float) -> bool:
        """Take ``size`` bytes, waiting up to ``wait`` seconds behind earlier requests."""
        if size > self.limit:
            return False
        if not self._waiters and self.in_use + size <= self.limit:
            self._take(size)
            return True
        entry = (size, asyncio.get_running_loop().create_future())
        self._waiters.append(entry)
        waiter = entry[1]
        try:
            await asyncio.wait({waiter}, timeout=wait)
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self.release(size)
            raise
        finally:
            if not waiter.done():
                waiter.cancel()
                self._waiters.remove(entry)
                self._grant()  # a large request giving up may unblock smaller ones behind it
        return not waiter.cancelled()

    def release(self, size: int) -> None:
        self.in_use -= size
        self._grant()


class Reservation:
    """What one request holds of the budget; released once its delivery is answered."""

    def __init__(self, budget: BodyBudget, wait: float) -> None:
        self._budget = budget
        self.wait = wait  # how long a body waits for budget before it is refused
        self.size = 0

    async def cover(self, size: int) -> bool:
        """Hold ``size`` bytes in all; False when the budget had no room within ``wait``."""
        if size <= self.size:
            return True
        if not await self._budget.reserve(size - self.size, wait=self.wait):
            return False
        self.size = size
        return True

    def release(self) -> None:
        self._budget.release(self.size)
        self.size = 0


BODY_BUDGET = web.AppKey("body_budget", BodyBudget)
