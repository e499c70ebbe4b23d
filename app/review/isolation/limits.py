"""The execution boundary's vocabulary: its limits, a job, what a tripped limit says, and the error
of a boundary that could not run a job at all."""

from __future__ import annotations

import enum
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Protocol, TypeVar

__all__ = ["AnalysisError", "Budget", "Confinement", "Job", "Limit", "Limits", "Stage", "Tripped"]

R_co = TypeVar("R_co", covariant=True)


class AnalysisError(RuntimeError):
    """The boundary could not run a job at all (a child that did not start, an answer of the wrong
    shape, a closed pool). A job's own error is an answer: ``Tripped`` with ``Limit.FAILED``."""


@dataclass(frozen=True, slots=True)
class Limits:
    """What one child process may use (``AnalysisSettings``, read by ``pool.limits_of``;
    docs/configuration.md lists them). The child imports this module: it stays free of the
    settings' imports."""

    workers: int = 2
    deadline_seconds: float = 120.0  # wall clock for one job, after which its process group is killed
    cpu_seconds: int = 120  # RLIMIT_CPU for one job
    memory_mb: int = 1024  # RLIMIT_AS
    file_size_mb: int = 64  # RLIMIT_FSIZE
    open_files: int = 256  # RLIMIT_NOFILE
    pattern_seconds: float = 2.0  # one configuration file's patterns, against every path
    budget_seconds: float = 30.0  # child time for all the jobs of one review (``Budget``)
    # What one review keeps of the pull request's files and hands to the children (each file's
    # text is already bounded by GitHub's API): beyond it, files are not analysed, and said so.
    review_bytes: int = 64 * 1024 * 1024
    # How far below the serving process's scheduling priority (nice) the children and all they run
    # are, so on a small machine the webhook door keeps its CPU while reviews run.
    niceness: int = 19


class Confinement(enum.StrEnum):
    """How much of the host's filesystem a child sees, strongest first (``confine``)."""

    PRIVATE_ROOT = "private-root"  # a mount namespace whose root holds only what the child needs
    LANDLOCK = "landlock"  # the host's tree, the kernel refusing to open anything else
    NONE = "none"  # the host's tree, as the bot's user sees it


class Limit(enum.StrEnum):
    TIME = "time"
    CPU = "cpu"
    MEMORY = "memory"
    FILE_SIZE = "file-size"
    OUTPUT = "output"  # the answer was larger than the boundary reads
    BUDGET = "budget"  # the review's child time was spent (``Budget``)
    CRASH = "crash"  # the process ended in another way
    FAILED = "failed"  # the job raised an error (``Tripped.detail``: its type)


@dataclass(frozen=True, slots=True)
class Stage:
    """A part of a job, announced by the child before it starts: what it is (``what``, for the
    review's note), what is lost when it trips (``consequence``), and its own time limit, if it
    has one tighter than the job's deadline. ``key`` names it for the job that leaves it out."""

    key: str
    what: str
    consequence: str
    seconds: float | None = None


@dataclass(slots=True)
class Budget:
    """The child time one review may use over all its jobs: each job's deadline is at most what
    remains, and the time from its start (its modules imported) to its answer is ``spent``."""

    seconds: float
    spent: float = 0.0
    jobs: int = 0  # jobs run against it

    @property
    def remaining(self) -> float:
        return max(0.0, self.seconds - self.spent)

    def spend(self, seconds: float) -> None:
        self.spent += seconds
        self.jobs += 1


@dataclass(frozen=True, slots=True)
class Tripped:
    """A limit ended the job, or an error did (``Limit.FAILED``): which, during which stage (None:
    before any). Either way the review says so and goes on without that stage."""

    limit: Limit
    stage: Stage | None
    limits: Limits
    detail: str = ""

    def note(self) -> str:
        """One sentence for the review's summary: what was not analysed, and why."""
        what = self.stage.what if self.stage is not None else "the analysis"
        consequence = self.stage.consequence if self.stage is not None else "nothing was analysed"
        if self.limit is Limit.TIME:
            seconds = (
                self.stage.seconds
                if self.stage is not None and self.stage.seconds is not None
                else self.limits.deadline_seconds
            )
            why = f"took longer than {seconds:g} s"
        elif self.limit is Limit.CPU:
            why = f"used more than {self.limits.cpu_seconds} s of CPU"
        elif self.limit is Limit.MEMORY:
            why = f"needed more than {self.limits.memory_mb} MB of memory"
        elif self.limit is Limit.FILE_SIZE:
            why = f"wrote a file larger than {self.limits.file_size_mb} MB"
        elif self.limit is Limit.OUTPUT:
            why = "answered with more than the boundary reads"
        elif self.limit is Limit.FAILED:
            why = f"failed ({self.detail or 'an error'})"
        elif self.limit is Limit.BUDGET:
            why = f"reached the review's analysis budget of {self.limits.budget_seconds:g} s"
        else:
            why = f"stopped unexpectedly{f' ({self.detail})' if self.detail else ''}"
        return f"{what} {why}; {consequence}"


class Job(Protocol[R_co]):
    """Work for a child process: pickled there (the serving process is trusted), its answer
    comes back as JSON checked against ``result_type`` (the child is not)."""

    def result_type(self) -> type[R_co]: ...

    def run(self) -> Awaitable[R_co]: ...
