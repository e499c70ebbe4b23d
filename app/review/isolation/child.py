"""The child's side of the execution boundary: ``python -I -m app.review.isolation.child``.

It reads length-prefixed frames on its standard input: first its setup (limits, the serving
process's import path), then one pickled job at a time (the serving process is trusted); it
answers each with JSON frames: ``{"started": true}`` once the job is unpickled (its deadline
counts from there), ``{"stage": ...}`` as a job enters a part of its work, then
``{"result": ...}``, ``{"tripped": ...}`` or ``{"error": ...}``. Its protocol pipes are moved off
fds 0 and 1 first, so nothing it runs (ruff) can write into them. It has no network (a namespace
of its own, where the kernel allows one), sees of the host's files only what it needs to run
(``confine``), has none of the serving process's environment, and exits when its input closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import pickle
import resource
import shutil
import signal
import struct
import sys
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, BinaryIO, NoReturn

from pydantic import TypeAdapter

from .confine import confine, unshare
from .limits import Confinement, Job, Limit, Limits, Stage

__all__ = ["Setup", "stage"]

HEADER = struct.Struct(">I")
_output: BinaryIO | None = None  # the protocol pipe, in a child; None elsewhere (stages are free)


@dataclass(frozen=True, slots=True)
class Setup:
    limits: Limits
    sys_path: tuple[str, ...]  # so jobs defined outside the package (tests) unpickle
    readable: tuple[str, ...] = ()  # all it may read of the host (``confine.readable_paths``)
    root: str = ""  # an empty directory, to become its ``/`` (``Confinement.PRIVATE_ROOT``)
    strongest: Confinement = Confinement.PRIVATE_ROOT


def write_frame(out: BinaryIO, data: bytes) -> None:
    out.write(HEADER.pack(len(data)) + data)
    out.flush()


def read_frame(source: BinaryIO) -> bytes | None:
    header = source.read(HEADER.size)
    if len(header) < HEADER.size:
        return None
    (size,) = HEADER.unpack(header)
    data = source.read(size)
    return data if len(data) == size else None


def _send(message: dict[str, Any]) -> None:
    if _output is not None:
        write_frame(_output, json.dumps(message).encode())


@contextlib.contextmanager
def stage(key: str, what: str, consequence: str, *, seconds: float | None = None) -> Iterator[None]:
    """Announce a part of the job to the serving process, which enforces its ``seconds`` and
    names it in the note when a limit trips inside it. Outside a child: does nothing."""
    _send({"stage": asdict(Stage(key, what, consequence, seconds))})
    yield
    _send({"stage": None})  # not on an exception: a limit that raised is the stage's


def apply_limits(limits: Limits) -> None:
    """Bounds inherited by everything this process starts (ruff included)."""
    mb = 1024 * 1024
    for kind, value in (
        (resource.RLIMIT_AS, limits.memory_mb * mb),
        (resource.RLIMIT_FSIZE, limits.file_size_mb * mb),
        (resource.RLIMIT_NOFILE, limits.open_files),
        (resource.RLIMIT_CORE, 0),
    ):
        resource.setrlimit(kind, (value, value))


def _cpu_budget(seconds: int) -> None:
    """RLIMIT_CPU counts the process's whole life: each job gets ``seconds`` more than used."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = int(usage.ru_utime + usage.ru_stime) + 1
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    soft = used + seconds
    resource.setrlimit(
        resource.RLIMIT_CPU, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard)
    )


CLONE_NEWNET = 0x40000000  # <linux/sched.h>; os.CLONE_* only from Python 3.12
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000


def leave_network() -> str | None:
    """Move into a network namespace of its own (loopback only, and down): what runs here can
    reach no host, the serving process's ports included. None when done, else why not (the
    kernel or a container's seccomp profile refuses namespaces): the pool says so once."""
    if not sys.platform.startswith("linux"):
        return "this platform has no namespaces"
    try:
        unshare(CLONE_NEWNET)  # root with CAP_SYS_ADMIN, as in most containers
        return None
    except OSError as privileged:
        reason = privileged.strerror or str(privileged)
    uid, gid = os.getuid(), os.getgid()
    try:
        # Unprivileged: a user namespace first, mapping this user to itself, so files and
        # permissions look the same from inside.
        unshare(CLONE_NEWUSER | CLONE_NEWNET)
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
        Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
        return None
    except OSError as unprivileged:
        return f"{reason}; as a user namespace: {unprivileged.strerror or unprivileged}"


def enter_own_pids(*pipes: BinaryIO) -> str | None:
    """Move into a PID namespace of its own, after ``leave_network`` (whose user namespace,
    unprivileged, grants the right): neither this process nor anything it starts can see or
    signal a process outside (the serving process included). None when done, else why not.

    The namespace's first process only waits: the kernel shields it from signals it has no
    handler for, and the limits (``RLIMIT_CPU``'s ``SIGXCPU``) must still end the jobs. So it forks
    the process that goes on as this one; each process left behind passes on how its child
    ended, a signal as ``128 + signal`` across the namespace's first process."""
    if not sys.platform.startswith("linux"):
        return "this platform has no namespaces"
    try:
        unshare(CLONE_NEWPID)
    except OSError as refused:
        return refused.strerror or str(refused)
    first = os.fork()
    if first:
        _pass_on(first, pipes, by_signal=True)
    second = os.fork()  # in the namespace's first process
    if second:
        _pass_on(second, pipes, by_signal=False)
    return None


def _pass_on(pid: int, pipes: tuple[BinaryIO, ...], *, by_signal: bool) -> NoReturn:
    """Wait for ``pid`` and end as it ended: by the same signal (``by_signal``, outside the
    namespace) or, inside, with the exit status ``128 + signal`` that the process outside reads."""
    for pipe in pipes:  # the protocol is the job runner's alone
        pipe.close()
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if by_signal and 128 < code <= 128 + signal.NSIG:
        code = 128 - code  # passed on from inside: the signal it was
    if code < 0:
        if by_signal:
            signal.signal(-code, signal.SIG_DFL)
            os.kill(os.getpid(), -code)
        os._exit(128 - code)
    os._exit(code)


def _clear(directory: Path) -> None:
    for entry in directory.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                entry.unlink()


async def _awaited(job: Job[Any]) -> Any:
    return await job.run()


def _run(job: Job[Any]) -> dict[str, Any]:
    try:
        result: Any = asyncio.run(_awaited(job))
    except MemoryError:
        return {"tripped": Limit.MEMORY.value}
    except OSError as exc:
        if exc.errno == errno.EFBIG:
            return {"tripped": Limit.FILE_SIZE.value}
        return {"error": f"{type(exc).__name__}: {exc}"[:500]}
    except Exception as exc:  # noqa: BLE001 - a defect in a job: the serving process raises it
        return {"error": f"{type(exc).__name__}: {exc}"[:500]}
    return {"result": TypeAdapter(job.result_type()).dump_python(result, mode="json")}


def main() -> int:
    # Run as ``-m``, this module is ``__main__``: jobs import it under its own name, whose
    # ``_output`` is the one ``stage`` writes to.
    from app.review.isolation import child

    # The protocol pipes leave fds 0 and 1, which become /dev/null for whatever runs below.
    source = os.fdopen(os.dup(0), "rb")
    child._output = os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    first = read_frame(source)
    if first is None:
        return 0
    setup: Setup = pickle.loads(first)
    offline = leave_network()
    own_pids = enter_own_pids(source, child._output)
    home = Path.cwd()
    sys.path.extend(p for p in setup.sys_path if p not in sys.path)
    confinement, why = confine(str(home), setup.root, setup.readable, setup.strongest)
    apply_limits(setup.limits)
    # A job's deadline counts from here, not from the start-up.
    child._send(
        {
            "ready": True,
            "network": offline or "",
            "filesystem": confinement.value,
            "filesystem_why": why,
            "processes": own_pids or "",
        }
    )
    while (frame := read_frame(source)) is not None:
        _cpu_budget(setup.limits.cpu_seconds)
        try:
            job: Job[Any] = pickle.loads(frame)
            child._send({"started": True})  # the job's deadline counts from here, imports done
            answer = _run(job)
        except MemoryError:
            answer = {"tripped": Limit.MEMORY.value}
        except Exception as exc:  # noqa: BLE001 - a job that does not unpickle here
            answer = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        _clear(home)
        child._send(answer)
        if "tripped" in answer:
            return 0  # a process that ran out of something is replaced, not reused
    return 0


if __name__ == "__main__":
    sys.exit(main())
