"""The serving side of the execution boundary: a pool of child processes that run jobs.

Why long-lived ``python -I -m app.review.isolation.child`` processes on pipes, and not
``multiprocessing``: each child must get its own session (process group, so a deadline kills
ruff with it), a scrubbed environment and its own working directory, and its answers must not be
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
import json
import logging
import os
import pickle
import queue
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, TypeVar

from pydantic import TypeAdapter, ValidationError

from ... import tenancy
from ...config import AnalysisSettings, load_analysis_settings
from ...tenancy import Turns
from .child import HEADER, Setup
from .confine import readable_paths
from .limits import Budget, Confinement, Job, Limit, Limits, Stage, Tripped

__all__ = [
    "AnalysisError",
    "Boundary",
    "Isolation",
    "ProcessPool",
    "child_environment",
    "limits_of",
    "pool_of",
    "shared_pool",
]

log = logging.getLogger(__name__)

R = TypeVar("R")

MAX_ANSWER_BYTES = 64 * 1024 * 1024
STARTUP_SECONDS = 120.0  # an interpreter start, or a job's imports, on a loaded machine
# The interpreter's own directory first: the child runs this Python and the ruff installed beside it.
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


class AnalysisError(RuntimeError):
    """The boundary could not run a job at all (a child that did not start, an answer of the wrong
    shape, a closed pool). A job's own error is an answer: ``Tripped`` with ``Limit.FAILED``."""


class Boundary(Protocol):
    """Where the engine runs what evaluates pull-request content."""

    @property
    def limits(self) -> Limits: ...

    async def run(self, job: Job[R], budget: Budget | None = None) -> R | Tripped:
        """``job``'s answer, or the limit that ended it; with a ``budget``, the job's deadline is
        at most what remains of it, and its time is spent from it."""
        ...


def child_environment(home: Path) -> dict[str, str]:
    """All a child (and ruff) gets: no variable of the serving process is passed on."""
    return {
        "PATH": f"{Path(sys.executable).parent}:{SYSTEM_PATH}",
        "HOME": str(home),
        "TMPDIR": str(home),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


@dataclass(frozen=True, slots=True)
class Isolation:
    """What a child got at start-up (``python -m app doctor`` says it): a network namespace of
    its own (``offline``), or the host's network and why not; and how much of the host's
    filesystem it sees (``filesystem``), and why not less."""

    offline: bool
    network_why: str = ""
    filesystem: Confinement = Confinement.NONE
    filesystem_why: str = ""


@dataclass(frozen=True, slots=True)
class _Nothing:
    """A job that only makes sure a child is running."""

    def result_type(self) -> type[bool]:
        return bool

    async def run(self) -> bool:
        return True


class _Child:
    """One child process, its private directory, and the frames it has sent but not yet read."""

    isolation: Isolation

    def __init__(self, limits: Limits, readable: tuple[str, ...], strongest: Confinement) -> None:
        self.home = Path(tempfile.mkdtemp(prefix="revbot-analysis-")).resolve()
        # Its root, when it gets a private one: an empty directory (the mounts are its own); at
        # the Landlock level, where its import path's links are.
        self.root = Path(tempfile.mkdtemp(prefix="revbot-root-")).resolve()
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-m", "app.review.isolation.child"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,  # nothing the child or ruff says reaches the log unread
            cwd=self.home,
            env=child_environment(self.home),
            start_new_session=True,  # its own process group, killed as one
            close_fds=True,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self._in = self.process.stdin
        self._out = self.process.stdout.fileno()
        self._buffer = bytearray()
        self._started: float | None = None  # when the child said the current job started
        sys_path = tuple(os.path.abspath(p) for p in sys.path if p)
        self._send(pickle.dumps(Setup(limits, sys_path, readable, str(self.root), strongest)))
        try:
            ready = self._frame(STARTUP_SECONDS)
        except (_Late, _TooLarge):
            ready = None
        said = json.loads(ready) if ready is not None else None
        if not isinstance(said, dict) or said.get("ready") is not True:
            self.close()
            raise AnalysisError("an analysis process did not start")
        refused = str(said.get("network") or "")
        try:
            filesystem = Confinement(str(said.get("filesystem")))
        except ValueError:
            filesystem = Confinement.NONE
        self.isolation = Isolation(not refused, refused, filesystem, str(said.get("filesystem_why") or ""))

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def _send(self, data: bytes) -> None:
        self._in.write(HEADER.pack(len(data)) + data)
        self._in.flush()

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)

    def close(self) -> None:
        self.kill()
        with contextlib.suppress(OSError):
            self._in.close()
        self.process.wait()
        assert self.process.stdout is not None
        self.process.stdout.close()
        shutil.rmtree(self.home, ignore_errors=True)
        shutil.rmtree(self.root, ignore_errors=True)  # empty, or the import path's links (Landlock)

    def _frame(self, timeout: float) -> bytes | None:
        """The next frame; None at end of input. Raises _Late when ``timeout`` passed first."""
        deadline = time.monotonic() + timeout
        while True:
            if len(self._buffer) >= HEADER.size:
                (size,) = HEADER.unpack(self._buffer[: HEADER.size])
                if size > MAX_ANSWER_BYTES:
                    raise _TooLarge
                if len(self._buffer) >= HEADER.size + size:
                    frame = bytes(self._buffer[HEADER.size : HEADER.size + size])
                    del self._buffer[: HEADER.size + size]
                    return frame
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _Late
            ready, _, _ = select.select([self._out], [], [], remaining)
            if not ready:
                raise _Late
            chunk = os.read(self._out, 1 << 20)
            if not chunk:
                return None
            self._buffer += chunk

    def call(self, job: Job[R], limits: Limits, budget: Budget | None = None) -> R | Tripped:
        """Send ``job`` and read its answer, killing the process group at the job's deadline (or
        when the ``budget`` is spent) or at the end of a stage's own time; a limit that trips is
        the answer."""
        self._started = None
        try:
            return self._exchange(job, limits, budget)
        finally:
            if budget is not None:
                budget.spend(0.0 if self._started is None else time.monotonic() - self._started)

    def _exchange(self, job: Job[R], limits: Limits, budget: Budget | None) -> R | Tripped:
        try:
            self._send(pickle.dumps(job))
        except (BrokenPipeError, OSError):
            return self._ended(None, limits)
        # Until the child says the job started (unpickled: its modules imported), the start-up bound.
        deadline = time.monotonic() + STARTUP_SECONDS
        by_budget = False
        current: Stage | None = None
        stage_deadline: float | None = None
        while True:
            until = deadline if stage_deadline is None else min(deadline, stage_deadline)
            try:
                frame = self._frame(until - time.monotonic())
            except _TooLarge:
                return self._stop(Tripped(Limit.OUTPUT, current, limits))
            except _Late:
                late = Limit.BUDGET if by_budget and until == deadline else Limit.TIME
                return self._stop(Tripped(late, current, limits))
            if frame is None:
                return self._ended(current, limits)
            try:
                message = json.loads(frame)
            except ValueError:
                return self._stop(Tripped(Limit.CRASH, current, limits, "an unreadable answer"))
            if "started" in message:
                self._started = time.monotonic()
                allowed = limits.deadline_seconds
                if budget is not None and budget.remaining < allowed:
                    allowed, by_budget = budget.remaining, True
                deadline = self._started + allowed
            elif "stage" in message:
                current = None if message["stage"] is None else Stage(**message["stage"])
                seconds = current.seconds if current is not None else None
                stage_deadline = time.monotonic() + seconds if seconds is not None else None
            elif "result" in message:
                try:
                    return TypeAdapter(job.result_type()).validate_python(message["result"])
                except ValidationError as exc:
                    raise AnalysisError(f"the analysis answered in an unexpected shape: {exc}") from None
            elif "tripped" in message:
                self.process.wait()
                return Tripped(Limit(message["tripped"]), current, limits)
            else:
                return _failed(str(message.get("error", "no answer")), current, limits)

    def _stop(self, tripped: Tripped) -> Tripped:
        self.kill()
        self.process.wait()
        return tripped

    def _ended(self, current: Stage | None, limits: Limits) -> Tripped:
        code = self.process.wait()
        if code == -signal.SIGXCPU:
            return Tripped(Limit.CPU, current, limits)
        if code == -signal.SIGXFSZ:
            return Tripped(Limit.FILE_SIZE, current, limits)
        if code in (-signal.SIGSEGV, -signal.SIGABRT, -signal.SIGBUS):  # allocation failures
            return Tripped(Limit.MEMORY, current, limits)
        detail = f"signal {-code}" if code < 0 else f"exit status {code}"
        return Tripped(Limit.CRASH, current, limits, detail)


_ERROR_TYPE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,79}")


def _failed(error: str, current: Stage | None, limits: Limits) -> Tripped:
    """A job's error is an answer like a tripped limit, named by its exception type only (the
    message may quote pull-request content: it goes to the log, never to the review)."""
    log.warning("an analysis job failed%s: %s", f" in {current.key}" if current else "", error)
    kind = _ERROR_TYPE.match(error)
    return Tripped(Limit.FAILED, current, limits, kind.group(0) if kind else "an error")


class _TooLarge(Exception):
    pass


class _Late(Exception):
    pass


@dataclass(slots=True)
class _Running:
    child: _Child | None = None
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
        self._idle: queue.LifoQueue[_Child | None] = queue.LifoQueue()
        for _ in range(self._limits.workers):
            self._idle.put(None)
        self._executor = ThreadPoolExecutor(self._limits.workers, thread_name_prefix="analysis")
        # Jobs wait for a child in fair turns between installations (``tenancy.Turns``), not in
        # arrival order: a flood's reviews would otherwise hold every child while another
        # installation's one review waits behind all of them.
        self._turns: Turns[_Waiting] = Turns()
        self._turns_lock = threading.Lock()  # not ``_lock``: a child's start holds that one
        self._children: set[_Child] = set()
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

    def _start(self) -> _Child:
        with self._lock:
            if self._closed:
                raise AnalysisError("the analysis pool is closed")
            for directory in self._readable:  # bound when a child starts: so it must exist by then
                Path(directory).mkdir(parents=True, exist_ok=True)
            child = _Child(self._limits, readable_paths(self._readable), self._strongest)
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

    def _forget(self, child: _Child) -> None:
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
