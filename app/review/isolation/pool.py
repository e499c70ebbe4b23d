"""The serving side of the execution boundary: a pool of child processes that run jobs.

Why long-lived ``python -I -m app.review.isolation.child`` processes on pipes, and not
``multiprocessing``: each child must get its own process group (so a deadline kills ruff with
it), a scrubbed environment and its own working directory, and its answers must not be
unpickled by the serving process (the child evaluates hostile input). ``ProcessPoolExecutor``
gives none of that and breaks as a whole when one child is killed; here one child is replaced.
``-I`` keeps the child's working directory (where pull-request files are written) and every
``PYTHON*`` variable out of its imports.

The pool is not bound to an event loop: a job's round trip runs in one of the pool's own threads
(one per child), so one pool serves every loop of a process (the CLI, the tests) and a review's
analysis never blocks the loop that serves webhooks.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, TypeVar

from ... import tenancy
from ...settings.config import AnalysisSettings, load_analysis_settings
from ...tenancy import Turns
from .confine import readable_paths
from .limits import AnalysisError, Budget, Confinement, Job, Limits, Tripped
from .process import ChildProcess, Isolation

__all__ = ["Boundary", "ProcessPool", "limits_of", "pool_of", "shared_pool"]

log = logging.getLogger(__name__)

R = TypeVar("R")


class Boundary(Protocol):
    """Where the engine runs what evaluates pull-request content."""

    @property
    def limits(self) -> Limits: ...

    async def run(self, job: Job[R], budget: Budget | None = None) -> R | Tripped:
        """``job``'s answer, or the limit that ended it; with a ``budget``, the job's deadline is
        at most what remains of it, and its time is spent from it."""
        ...


@dataclass(frozen=True, slots=True)
class _Nothing:
    """A job that only makes sure a child is running."""

    def result_type(self) -> type[bool]:
        return bool

    async def run(self) -> bool:
        return True


@dataclass(slots=True)
class _Running:
    child: ChildProcess | None = None
    cancelled: bool = False


@dataclass(slots=True)
class _Waiting:
    """A job waiting for its turn at a child, and where its answer goes."""

    job: Job[Any]
    budget: Budget | None
    running: _Running
    loop: asyncio.AbstractEventLoop
    answer: asyncio.Future[Any]


class ProcessPool:
    """``Boundary`` on ``limits.workers`` child processes, started when first needed and replaced
    when a limit ends one."""

    def __init__(
        self,
        limits: Limits | None = None,
        *,
        readable: tuple[str | os.PathLike[str], ...] = (),
        strongest: Confinement = Confinement.PRIVATE_ROOT,
    ) -> None:
        """``readable``: directories a child reads besides what it needs to run (the pinned
        ruffs); ``strongest``: the confinement to try first (a weaker one only to test it)."""
        self._limits = limits or Limits()
        self._readable = tuple(str(p) for p in readable)
        self._strongest = strongest
        # Last in, first out: a child that just finished is reused before another one is started.
        self._idle: queue.LifoQueue[ChildProcess | None] = queue.LifoQueue()
        for _ in range(self._limits.workers):
            self._idle.put(None)
        self._executor = ThreadPoolExecutor(self._limits.workers, thread_name_prefix="analysis")
        # Jobs wait for a child in fair turns between installations (``tenancy.Turns``), not in
        # arrival order: a flood's reviews would otherwise hold every child while another
        # installation's one review waits behind all of them.
        self._turns: Turns[_Waiting] = Turns()
        self._turns_lock = threading.Lock()  # not ``_lock``: a child's start holds that one
        self._children: set[ChildProcess] = set()
        self._lock = threading.Lock()
        self._closed = False
        self._isolation: Isolation | None = None

    @property
    def limits(self) -> Limits:
        return self._limits

    async def isolation(self) -> Isolation:
        """What the children are kept from; starts one to find out, if none runs yet."""
        if self._isolation is None:
            await self.run(_Nothing())
        assert self._isolation is not None
        return self._isolation

    async def run(self, job: Job[R], budget: Budget | None = None) -> R | Tripped:
        loop = asyncio.get_running_loop()
        waiting = _Waiting(job, budget, _Running(), loop, loop.create_future())
        if self._closed:
            raise AnalysisError("the analysis pool is closed")
        with self._turns_lock:
            self._turns.put(tenancy.installation.get(), waiting)
        # One thread's turn per job: whichever job's turn it is when a thread is free runs then.
        self._executor.submit(self._next)
        try:
            answer: R | Tripped = await waiting.answer
        except asyncio.CancelledError:
            waiting.running.cancelled = True  # the review was cancelled: its child goes, is replaced
            if waiting.running.child is not None:
                waiting.running.child.kill()
            raise
        return answer

    def _next(self) -> None:
        """In a pool thread: run the job whose turn it is, and hand its answer to its loop."""
        with self._turns_lock:
            turn = self._turns.take()
        if turn is None:
            return
        key, waiting = turn
        try:
            if waiting.answer.cancelled():
                return
            try:
                result: Any = self._call(waiting.job, waiting.budget, waiting.running)
            except BaseException as exc:  # noqa: BLE001 - the caller gets the failure as its answer
                waiting.loop.call_soon_threadsafe(_settle, waiting.answer, None, exc)
            else:
                waiting.loop.call_soon_threadsafe(_settle, waiting.answer, result, None)
        finally:
            with self._turns_lock:
                self._turns.done(key)

    def _call(self, job: Job[R], budget: Budget | None, running: _Running) -> R | Tripped:
        child = self._idle.get()
        try:
            if child is None or not child.alive:
                if child is not None:
                    self._forget(child)
                child = self._start()
            running.child = child
            if running.cancelled:
                child.kill()
            return child.call(job, self._limits, budget)
        finally:
            if child is not None and not child.alive:
                self._forget(child)
                child = None
            self._idle.put(child)

    def _start(self) -> ChildProcess:
        with self._lock:
            if self._closed:
                raise AnalysisError("the analysis pool is closed")
            for directory in self._readable:  # bound when a child starts: so it must exist by then
                Path(directory).mkdir(parents=True, exist_ok=True)
            child = ChildProcess(self._limits, readable_paths(self._readable), self._strongest)
            self._children.add(child)
            isolation, before = child.isolation, self._isolation
            if not isolation.offline and (before is None or before.offline):
                log.warning(
                    "analysis processes share the host's network (no namespace of their own: %s)",
                    isolation.network_why,
                )
            if isolation.filesystem is not self._strongest and (
                before is None or before.filesystem is not isolation.filesystem
            ):
                log.warning(
                    "analysis processes see the host's files at the level %s (%s)",
                    isolation.filesystem.value,
                    isolation.filesystem_why,
                )
            self._isolation = isolation
            return child

    def _forget(self, child: ChildProcess) -> None:
        with self._lock:
            self._children.discard(child)
        child.close()

    def close(self) -> None:
        """End every child (a job still running ends with them)."""
        with self._lock:
            self._closed = True
            children = list(self._children)
            self._children.clear()
        with self._turns_lock:
            unserved = self._turns.drain()
        for waiting in unserved:
            with contextlib.suppress(RuntimeError):  # its loop is closed: nobody waits any more
                waiting.loop.call_soon_threadsafe(
                    _settle, waiting.answer, None, AnalysisError("the analysis pool is closed")
                )
        for child in children:
            child.close()
        self._executor.shutdown(wait=False, cancel_futures=True)


def _settle(answer: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    """On the waiting job's loop: its answer, unless it was cancelled meanwhile."""
    if answer.done():
        return
    if error is not None:
        answer.set_exception(error)
    else:
        answer.set_result(result)


def limits_of(settings: AnalysisSettings) -> Limits:
    return Limits(
        workers=settings.review_workers,
        deadline_seconds=settings.review_deadline_seconds,
        cpu_seconds=settings.review_cpu_seconds,
        memory_mb=settings.review_memory_mb,
        file_size_mb=settings.review_file_size_mb,
        open_files=settings.review_open_files,
        pattern_seconds=settings.review_pattern_seconds,
        budget_seconds=settings.review_budget_seconds,
        niceness=settings.review_niceness,
        review_bytes=settings.review_max_bytes,
    )


def pool_of(settings: AnalysisSettings, *, workers: int | None = None) -> ProcessPool:
    """A pool as the settings describe it: its limits, and the pinned ruffs readable."""
    limits = limits_of(settings)
    if workers is not None:
        limits = replace(limits, workers=workers)
    pins = settings.review_ruff_versions
    return ProcessPool(limits, readable=() if pins is None else (pins,))


_shared: ProcessPool | None = None
_shared_lock = threading.Lock()


def shared_pool(settings: AnalysisSettings | None = None) -> ProcessPool:
    """The process's pool (``REVIEW_WORKERS`` children; created on first use, closed at exit)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = pool_of(settings or load_analysis_settings())
            atexit.register(_shared.close)
        return _shared
