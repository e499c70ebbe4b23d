"""Whose work the current task is doing, so that what installations share takes turns fairly.

The worker sets ``installation`` for each job it runs (a context variable: every coroutine and
task the job starts sees it); a shared resource reads it where work is handed over, as the
analysis pool does (``review.isolation.pool``). ``Turns`` is that resource's queue: the policy
is the queue's (``store.ops.FAIR_TURNS``), round robin weighted by current use, so that an
installation with less running goes first and a flood waits behind everyone else's turn.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from contextvars import ContextVar
from typing import Generic, TypeVar

T = TypeVar("T")

installation: ContextVar[int | None] = ContextVar("installation", default=None)


class Turns(Generic[T]):
    """Waiting items per key; ``take`` gives the oldest item of the key with the fewest items
    running (``done`` ends one), the key that waited longest for its turn between equals. Not
    thread-safe: the caller holds its lock."""

    def __init__(self) -> None:
        self._waiting: OrderedDict[int | None, deque[T]] = OrderedDict()  # in turn order
        self._running: dict[int | None, int] = {}

    def __len__(self) -> int:
        return sum(len(items) for items in self._waiting.values())

    def put(self, key: int | None, item: T) -> None:
        self._waiting.setdefault(key, deque()).append(item)

    def take(self) -> tuple[int | None, T] | None:
        """The next item and its key (now counted as running), or None when nothing waits."""
        if not self._waiting:
            return None
        key = min(self._waiting, key=lambda k: self._running.get(k, 0))  # first of the least busy
        items = self._waiting.pop(key)
        item = items.popleft()
        if items:
            self._waiting[key] = items  # to the back of the turn order
        self._running[key] = self._running.get(key, 0) + 1
        return key, item

    def done(self, key: int | None) -> None:
        left = self._running.get(key, 0) - 1
        if left > 0:
            self._running[key] = left
        else:
            self._running.pop(key, None)

    def drain(self) -> list[T]:
        """Every waiting item, removed (the resource is closing)."""
        items = [item for queue in self._waiting.values() for item in queue]
        self._waiting.clear()
        return items
