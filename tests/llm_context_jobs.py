"""Jobs and boundaries for the tests of the model reviewer's related context (``llm/bounded.py``):
the jobs are importable by the analysis children (they unpickle them by module path), so not
inside a test module."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from app.review.isolation.child import stage
from app.review.isolation.limits import Budget, Job, Limits, Stage, Tripped
from app.review.isolation.pool import ProcessPool
from app.review.llm.bounded import ContextJob

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class HeldAfter(Generic[R]):
    """``job``, then held in its child until the test lets it go: opens ``entered`` for writing
    (which returns once the test opens it to read), then reads ``release``."""

    job: Job[R]
    entered: str
    release: str

    def result_type(self) -> type[R]:
        return self.job.result_type()

    async def run(self) -> R:
        result = await self.job.run()
        # Blocking on purpose: were this on the serving process's loop, nothing would be served.
        with open(self.entered, "w") as held:  # noqa: ASYNC230
            held.write("held")
        with open(self.release) as release:  # noqa: ASYNC230
            release.read()
        return result


@dataclass(frozen=True, slots=True)
class Stuck:
    """Enters ``part`` (with a time limit of ``seconds``) and never leaves it: only the limit ends it."""

    part: Stage
    seconds: float

    def result_type(self) -> type[int]:
        return int

    async def run(self) -> int:
        with stage(self.part.key, self.part.what, self.part.consequence, seconds=self.seconds):
            await asyncio.Event().wait()
        return 0


@dataclass
class HoldContext:
    """The pool, with every ``ContextJob`` held at the gate of ``HeldAfter`` once it is done."""

    pool: ProcessPool
    entered: str
    release: str

    @property
    def limits(self) -> Limits:
        return self.pool.limits

    async def run(self, job: Job[R], budget: Budget | None = None) -> R | Tripped:
        if isinstance(job, ContextJob):
            return await self.pool.run(HeldAfter(job, self.entered, self.release), budget)
        return await self.pool.run(job, budget)


@dataclass
class StuckOnce:
    """The pool, where a ``ContextJob`` that still runs the stage ``part`` gets stuck in it instead."""

    pool: ProcessPool
    part: Stage
    seconds: float = 0.5

    @property
    def limits(self) -> Limits:
        return self.pool.limits

    async def run(self, job: Job[R], budget: Budget | None = None) -> R | Tripped:
        if isinstance(job, ContextJob) and self.part.key not in job.left_out:
            tripped = await self.pool.run(Stuck(self.part, self.seconds), budget)
            assert isinstance(tripped, Tripped), tripped
            return tripped
        return await self.pool.run(job, budget)


@dataclass
class InProcess:
    """Runs each job in this process (a test counts what it does; analysers that write files
    must not run on it)."""

    limits: Limits = field(default_factory=Limits)

    async def run(self, job: Job[R], budget: Budget | None = None) -> R | Tripped:
        return await job.run()
