"""The review pipeline without the GitHub App, for ``python -m app review`` and ``eval``.

The same ``usecases.review.run`` the bot runs, composed from the same settings (the configured
``REVIEWER``, ``REVIEW_APPROVE``, ``APP_SLUG``, learnings when ``DATABASE_URL`` is set), with a
reader of the API (a token) or of a local clone, and a publisher that keeps what the bot would
post instead of posting it. What it prints for a pull request is what ``@slug review`` would
post now: a head the bot already answered is not reviewed again, as the bot would not.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from .github.client import GitHubClient
from .guards import BotIdentity
from .review.core.model import PullContext, Reviewer, ReviewResult
from .review.llm import configured_reviewer
from .review.rounds.markers import Trigger
from .settings.config import ReviewerSettings
from .usecases.learnings import DatabaseLearnings, InMemoryLearnings, Learnings
from .usecases.pull import AnalysisCache, RepoConfigs
from .usecases.review import Reviewing, run
from .usecases.review.publish import RecordingPublisher
from .usecases.review.read import GitHubReader, LocalReader, Request

LOCAL_PR_NUMBER = 0  # a local range is no pull request of GitHub's


@dataclass(frozen=True, slots=True)
class Offline:
    """A ``Reviewing`` and the repository learnings it reads, as the deployment would have them."""

    reviewing: Reviewing
    learnings: Learnings

    async def pull_request(self, gh: GitHubClient, *, repo: str, pr_number: int) -> RecordingPublisher:
        """What the bot would post on ``repo#pr_number`` (read through ``gh``; nothing written)."""
        reader = GitHubReader(gh, self.reviewing.identity, RepoConfigs(), self.learnings)
        return await self._run(reader, Request(repo, pr_number, Trigger.MENTION))

    async def git_range(
        self, path: Path, *, base: str, tip: str, title: str | None = None, repo: str | None = None
    ) -> RecordingPublisher:
        """What the bot would post on a pull request of ``base..tip`` in the clone at ``path``
        (its settings from ``base``). ``repo``: whose learnings apply."""
        reader = LocalReader(path, base, tip, self.reviewing.identity, self.learnings, title=title, repo=repo)
        return await self._run(reader, Request(repo or str(path), LOCAL_PR_NUMBER, Trigger.MENTION))

    async def review_range(
        self, path: Path, *, base: str, tip: str, title: str | None = None
    ) -> tuple[PullContext, ReviewResult]:
        """The measurements' review (``local.RangeReview``): ``base..tip`` as a pull request."""
        published = await self.git_range(path, base=base, tip=tip, title=title)
        if published.plan is None:
            raise RuntimeError("; ".join(published.said))
        return published.plan.state.context, published.plan.result

    async def _run(self, reader: GitHubReader | LocalReader, request: Request) -> RecordingPublisher:
        publisher = RecordingPublisher()
        await run(self.reviewing, reader, publisher, request)
        return publisher


@asynccontextmanager
async def offline(settings: ReviewerSettings, *, reviewer: Reviewer | None = None) -> AsyncIterator[Offline]:
    """``reviewer``: another engine than the configured one (``eval --reviewer``)."""
    engine = reviewer or configured_reviewer(settings)
    identity = BotIdentity.from_slug(settings.app_slug or "revbot")
    store = None
    learnings: Learnings = InMemoryLearnings()
    if settings.database_url:
        from .settings.dburl import sqlalchemy_url
        from .store import Store

        store = Store(sqlalchemy_url(settings.database_url))
        await store.create_schema()
        learnings = DatabaseLearnings(store.backend)
    try:
        yield Offline(Reviewing(identity, engine, AnalysisCache(), settings.review_approve), learnings)
    finally:
        await engine.aclose()
        if store is not None:
            await store.close()
