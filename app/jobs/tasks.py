"""Ending background work within a bound, whatever it is stuck on.

A task blocked on a database that does not answer (its host frozen, a partition) may not end when
cancelled: the driver's own cleanup (asyncpg sends a cancel request and resets the connection)
waits on the same silent server. ``asyncio.wait_for`` waits for the cancelled work to finish, so
it is unbounded there; these helpers wait at most the time given and then leave the task to end
on its own. They never swallow the caller's cancellation: ``asyncio.wait`` raises it, and only
the awaited task's outcome is read.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

# Tasks given up on: referenced until they end (the loop keeps only weak references).
_abandoned: set[asyncio.Task[Any]] = set()


def _forget(task: asyncio.Task[Any]) -> None:
    _abandoned.discard(task)
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.debug("abandoned task %s ended with %s", task.get_name(), type(exc).__name__)


def abandon(task: asyncio.Task[Any]) -> None:
    """Cancel ``task`` and stop waiting for it (its outcome, when it comes, is discarded)."""
    task.cancel()
    if not task.done():
        _abandoned.add(task)
    task.add_done_callback(_forget)


async def cancel_and_wait(task: asyncio.Task[Any], *, within: float) -> bool:
    """Cancel ``task`` and wait up to ``within`` seconds for it to end; False if it did not (it is
    then abandoned)."""
    if task.done():
        _forget(task)
        return True
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=within)
    if not done:
        abandon(task)
        return False
    _forget(task)
    return True


async def bounded(work: Coroutine[Any, Any, T], *, within: float) -> T:
    """``await work``, or TimeoutError after ``within`` seconds (the work is cancelled and
    abandoned, not waited for). The caller being cancelled cancels the work too."""
    task = asyncio.ensure_future(work)
    try:
        done, _ = await asyncio.wait({task}, timeout=within)
    except asyncio.CancelledError:
        abandon(task)
        raise
    if not done:
        abandon(task)
        raise TimeoutError(f"no end within {within:g}s")
    return task.result()
