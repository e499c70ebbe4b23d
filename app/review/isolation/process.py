"""One child process of the execution boundary, seen from the serving side: started with a
scrubbed environment in a private directory of its own, sent one job at a time over its pipes,
its answer read within the job's limits (its deadline, its stages' own time, the size of what it
says), and its process group killed when a limit trips. ``pool`` keeps several of them.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pickle
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from pydantic import TypeAdapter, ValidationError

from .child import HEADER, Setup
from .limits import AnalysisError, Budget, Confinement, Job, Limit, Limits, Stage, Tripped

__all__ = ["ChildProcess", "Isolation", "child_environment"]

log = logging.getLogger(__name__)

R = TypeVar("R")

MAX_ANSWER_BYTES = 64 * 1024 * 1024
STARTUP_SECONDS = 120.0  # an interpreter start, or a job's imports, on a loaded machine
# The interpreter's own directory first: the child runs this Python and the ruff installed beside it.
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


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
    processes_why: str = ""  # why it could not have a PID namespace of its own ("": it has)


def _lower_priority(pid: int, niceness: int) -> None:
    """Put the child ``niceness`` below the serving process (nice values add up to 19), before its
    first job, so what it starts (ruff) inherits it. From here, not in ``preexec_fn``, which is
    unsafe in a process with threads (the pool's)."""
    try:
        os.setpriority(os.PRIO_PROCESS, pid, min(19, os.getpriority(os.PRIO_PROCESS, 0) + niceness))
    except OSError as exc:  # a platform without it, or a policy that refuses: say so, go on
        log.warning("analysis process %d keeps the serving process's priority: %s", pid, exc)


class ChildProcess:
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
            # Its own process group, killed as one; not its own session, which on Linux would be an
            # autogroup of its own: the scheduler would then share the CPU between it and the
            # serving process as equals, whatever their nice values.
            process_group=0,
            close_fds=True,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        _lower_priority(self.process.pid, limits.niceness)
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
        self.isolation = Isolation(
            not refused,
            refused,
            filesystem,
            str(said.get("filesystem_why") or ""),
            str(said.get("processes") or ""),
        )

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
