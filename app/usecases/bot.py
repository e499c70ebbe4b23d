"""What every use case is given besides a GitHub client: who the bot is and what it keeps.

``Bot`` is built per job by the runtime (the identity is learnt from ``GET /app`` once), from the
deployment's settings, its review engine and the caches that live as long as the process.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Protocol

from cachetools import TTLCache

from ..guards import BotIdentity
from ..review.core.model import Reviewer
from ..settings.config import Settings
from .learnings import Learnings
from .pull import AnalysisCache, RepoConfigs
from .timers import Timers


class WriteBudget(Protocol):
    """The installation's content-creating budget (``ratelimit.Pacer``), as commands ask it."""

    def spare(self, installation: int, *, reserve: float) -> bool:
        """Whether a write that can be left out fits without the share kept for reviews."""
        ...


class NoWriteLimit:
    """No budget to keep (the command line, a recording client): every write fits."""

    def spare(self, installation: int, *, reserve: float) -> bool:
        return True


class CommandBudget:
    """How many commands each key (a person on a pull request, a pull request) had answered in
    the last hour: at most ``limit`` each. In memory, per process: a restart forgets, which no
    commenter controls; several workers each keep their own (docs/commands.md says so)."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic, keys: int = 10_000) -> None:
        self.clock = clock
        self._taken: TTLCache[Hashable, deque[float]] = TTLCache(maxsize=keys, ttl=3600.0, timer=clock)

    def take(self, key: Hashable, limit: int) -> bool:
        """Count one command for ``key`` if it is within ``limit`` an hour; False: over it."""
        now = self.clock()
        taken = self._taken.get(key) or deque()
        while taken and taken[0] <= now - 3600.0:
            taken.popleft()
        if len(taken) >= limit:
            return False
        taken.append(now)
        self._taken[key] = taken
        return True


@dataclass(frozen=True, slots=True)
class Bot:
    """Who the bot is, the deployment's settings, the review engine, the shared caches, what it
    remembers per repository, and its durable timers."""

    identity: BotIdentity
    settings: Settings
    reviewer: Reviewer
    repo_configs: RepoConfigs
    analyses: AnalysisCache
    learnings: Learnings  # disputes remembered per repository (in the database)
    timers: Timers  # durable "look again later" (readiness)
    writes: WriteBudget = field(default_factory=NoWriteLimit)  # the installation's content budget
    commands: CommandBudget = field(default_factory=CommandBudget)  # per person and per PR
