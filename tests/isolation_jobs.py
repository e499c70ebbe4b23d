"""Jobs and an analyzer for the execution-boundary tests: importable by the child processes
(they unpickle them by module path), so not inside a test module."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from dataclasses import dataclass

from app.review.analyzers import AnalysisInput, AnalyzerOutput, Rule
from app.review.core.model import ChangedFile
from app.review.isolation.child import stage


@dataclass(frozen=True, slots=True)
class Seen:
    environ: dict[str, str]
    tool_environ: str  # what a program the child starts (as it starts ruff) sees
    cwd: str
    limits: dict[str, int]


@dataclass(frozen=True, slots=True)
class LookAround:
    def result_type(self) -> type[Seen]:
        return Seen

    async def run(self) -> Seen:
        import resource

        process = await asyncio.create_subprocess_exec("env", stdout=asyncio.subprocess.PIPE)
        tool = (await process.communicate())[0].decode()
        limits = {
            "as": resource.getrlimit(resource.RLIMIT_AS)[0],
            "fsize": resource.getrlimit(resource.RLIMIT_FSIZE)[0],
            "nofile": resource.getrlimit(resource.RLIMIT_NOFILE)[0],
            "core": resource.getrlimit(resource.RLIMIT_CORE)[0],
            "cpu": resource.getrlimit(resource.RLIMIT_CPU)[0],
            # its own group (a kill of the group ends ruff with it): led by itself, or, in a PID
            # namespace of its own, by the process the pool started, outside it (seen as 0)
            "pgid_is_pid": int(os.getpgid(0) in (os.getpid(), 0)),
            "nice": os.getpriority(os.PRIO_PROCESS, 0),
        }
        return Seen(dict(os.environ), tool, os.getcwd(), limits)


@dataclass(frozen=True, slots=True)
class Forever:
    """Waits on nothing (inside a stage of ``seconds``, when given): only a deadline ends it."""

    seconds: float | None = None

    def result_type(self) -> type[int]:
        return int

    async def run(self) -> int:
        if self.seconds is None:
            await asyncio.Event().wait()
        with stage("forever", "`waiting`", "it was not done", seconds=self.seconds):
            await asyncio.Event().wait()
        return 0


@dataclass(frozen=True, slots=True)
class Spin:
    def result_type(self) -> type[int]:
        return int

    async def run(self) -> int:
        total = 0
        while True:  # pure CPU: only RLIMIT_CPU (or the deadline) ends it
            total += 1


@dataclass(frozen=True, slots=True)
class Grow:
    def result_type(self) -> type[int]:
        return int

    async def run(self) -> int:
        with stage("grow", "`growing`", "it was not done"):
            blocks = [bytearray(64 * 1024 * 1024) for _ in range(1000)]
        return len(blocks)


@dataclass(frozen=True, slots=True)
class Echo:
    value: int

    def result_type(self) -> type[int]:
        return int

    async def run(self) -> int:
        return self.value


@dataclass(frozen=True, slots=True)
class Gate:
    """An analyzer that holds the analysis until the test lets it go: it opens ``entered`` for
    writing (which returns once the test opens it to read: the analysis is being held), then
    reads ``release`` (which returns once the test writes to it)."""

    entered: str
    release: str
    name: str = "gate"
    tools: tuple[str, ...] = ()
    rules: tuple[Rule, ...] = ()
    differential: bool = False

    def wanted_paths(self, files: Sequence[ChangedFile], unpatched: Sequence[ChangedFile]) -> list[str]:
        return []

    async def analyse(self, batch: AnalysisInput) -> AnalyzerOutput:
        # Blocking on purpose, as evaluating a hostile pattern does: where the analysis runs on
        # the serving process's event loop, nothing else is served meanwhile.
        with open(self.entered, "w") as held:  # noqa: ASYNC230
            held.write("held")
        with open(self.release) as release:  # noqa: ASYNC230
            release.read()
        return AnalyzerOutput()


@dataclass(frozen=True, slots=True)
class Write:
    megabytes: int

    def result_type(self) -> type[int]:
        return int

    async def run(self) -> int:
        with stage("write", "`writing`", "it was not done"), open("big", "wb") as out:  # noqa: ASYNC230
            out.write(b"x" * (self.megabytes * 1024 * 1024))
        return self.megabytes


@dataclass(frozen=True, slots=True)
class Dial:
    """Tries a TCP connection to a port of this machine's loopback: ``connected`` or the error."""

    port: int

    def result_type(self) -> type[str]:
        return str

    async def run(self) -> str:
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", self.port), 30)
        except OSError as exc:
            return os.strerror(exc.errno) if exc.errno else str(exc)
        writer.close()
        return "connected"


@dataclass(frozen=True, slots=True)
class Reached:
    read: list[str]  # paths whose content (a file's first byte, a directory's names) could be read
    written: list[str]  # directories a file could be created in


@dataclass(frozen=True, slots=True)
class Peek:
    """Tries to read each of ``paths`` and to create a file in each of ``directories``."""

    paths: tuple[str, ...]
    directories: tuple[str, ...] = ()

    def result_type(self) -> type[Reached]:
        return Reached

    async def run(self) -> Reached:
        read, written = [], []
        for path in self.paths:
            try:
                if os.path.isdir(path):  # noqa: ASYNC240
                    os.listdir(path)
                else:
                    with open(path, "rb") as handle:  # noqa: ASYNC230
                        handle.read(1)
                read.append(path)
            except OSError:
                pass
        for directory in self.directories:
            try:
                with open(os.path.join(directory, "planted.py"), "x"):  # noqa: ASYNC230
                    written.append(directory)
            except OSError:
                pass
        return Reached(read, written)


@dataclass(frozen=True, slots=True)
class Stall:
    """An analyzer that never finishes: only a limit ends the job it is in."""

    name: str = "stall"
    tools: tuple[str, ...] = ()
    rules: tuple[Rule, ...] = ()
    differential: bool = False

    def wanted_paths(self, files: Sequence[ChangedFile], unpatched: Sequence[ChangedFile]) -> list[str]:
        return []

    async def analyse(self, batch: AnalysisInput) -> AnalyzerOutput:
        await asyncio.Event().wait()
        return AnalyzerOutput()


@dataclass(frozen=True, slots=True)
class Held:
    """A job that holds its child until the test lets it go (``Gate``'s fifos, as a job)."""

    entered: str
    release: str

    def result_type(self) -> type[bool]:
        return bool

    async def run(self) -> bool:
        with open(self.entered, "w") as held:  # noqa: ASYNC230 - blocking on purpose: the child is held
            held.write("held")
        with open(self.release) as release:  # noqa: ASYNC230
            release.read()
        return True


@dataclass(frozen=True, slots=True)
class Explode:
    """An analyzer that fails whenever ``path`` is among its files, as a tool a crafted file
    crashes does (and checks nothing else)."""

    path: str
    name: str = "explode"
    tools: tuple[str, ...] = ()
    rules: tuple[Rule, ...] = ()
    differential: bool = False

    def wanted_paths(self, files: Sequence[ChangedFile], unpatched: Sequence[ChangedFile]) -> list[str]:
        return []

    async def analyse(self, batch: AnalysisInput) -> AnalyzerOutput:
        if any(item.path == self.path for item in (*batch.files, *batch.unpatched)):
            raise ValueError(f"{self.path} crashed me")
        return AnalyzerOutput()


@dataclass(frozen=True, slots=True)
class Signal:
    """Tries to signal ``pid`` (signal 0: asks only whether it may): the errno, 0 when it may."""

    pid: int

    def result_type(self) -> type[int]:
        return int

    async def run(self) -> int:
        try:
            os.kill(self.pid, 0)
        except OSError as refused:
            return refused.errno or -1
        return 0
