"""What every use case is given besides a GitHub client: who the bot is and what it keeps.

``Bot`` is built per job by the runtime (the identity is learnt from ``GET /app`` once), from the
deployment's settings, its review engine and the caches that live as long as the process.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config import Settings
from ..guards import BotIdentity
from ..review.core.model import Reviewer
from ..review.rounds.learnings import Learnings
from .pull import AnalysisCache, RepoConfigs
from .timers import Timers


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
