"""Review a pull request: one formal review with inline findings, and a check run beside it.

Whatever asked for it (a decoy or team review request, ``@slug review``, the check run's
"Re-run", an automatic trigger, an overrule), the work is one pipeline, its files in the order
it runs: ``read`` (the pull request and the bot's earlier reviews, re-read from GitHub),
``decide`` (what the trigger asks, and whether this job reviews at all), ``analyse``, ``plan``
(the review to post, a pure function of what was read and found) and ``publish`` (the only
writer). ``python -m app review`` and ``eval`` run the same pipeline with a reader of a clone or
of the API and a publisher that keeps what it would post.

Jobs of one PR run one at a time, so triggers that arrive while a review of the same head is
queued or running find it done and coalesce into it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ...github import calls as github
from ...github.client import GitHubClient
from ...guards import BotIdentity
from ...review.core.model import Reviewer
from ...review.rounds.markers import Trigger
from ..bot import Bot
from ..pull import AnalysisCache
from . import decide
from .analyse import analyse
from .plan import Plan, plan_review
from .publish import GitHubPublisher, Publisher
from .read import GitHubReader, Reader, Request


@dataclass(frozen=True, slots=True)
class Reviewing:
    """What the pipeline needs of the bot, the same for ``serve`` and the command line: who it
    is, its engine and analysis cache, the deployment's ``REVIEW_APPROVE``, the clock its
    reviews are stamped with."""

    identity: BotIdentity
    reviewer: Reviewer
    analyses: AnalysisCache
    approve: bool
    clock: Callable[[], float] = time.time

    @classmethod
    def of(cls, bot: Bot) -> Reviewing:
        return cls(bot.identity, bot.reviewer, bot.analyses, bot.settings.review_approve)


async def review_pull(gh: GitHubClient, bot: Bot, *, repo: str, pr_number: int, trigger: Trigger) -> None:
    """Review the PR's current head, re-reading everything from GitHub first."""
    reader = GitHubReader(gh, bot.identity, bot.repo_configs, bot.learnings)
    request = Request(repo, pr_number, trigger)
    await run(Reviewing.of(bot), reader, GitHubPublisher(gh, bot), request)


async def review_requested(
    gh: GitHubClient, bot: Bot, *, repo: str, pr_number: int, trigger: Trigger
) -> None:
    """A person asked for the review: eyes on the pull request first, so they see it was heard
    before the review (which can take a while) lands."""
    await github.react(gh, repo=repo, target="pull", target_id=pr_number, content="eyes")
    await review_pull(gh, bot, repo=repo, pr_number=pr_number, trigger=trigger)


async def run(reviewing: Reviewing, reader: Reader, publisher: Publisher, request: Request) -> Plan | None:
    """The pipeline: read, decide, analyse, plan, publish; the plan published, if any."""
    mode = decide.ReviewMode.of(request.trigger)
    head = await reader.head(request)
    step = decide.step(head, mode)
    if step is decide.Step.DISMISS_APPROVAL:
        if await publisher.dismiss_approval(head):
            return None
        step = decide.Step.REVIEW  # GitHub refused: a review of the new head supersedes it instead
    if step is decide.Step.REVIEW and (by := await reader.paused_by(head)) is not None:
        await publisher.paused(head, by)
        return None
    if step is not decide.Step.REVIEW:
        await publisher.skip(head, step, request.trigger)
        return None
    async with publisher.check_run(head, mode) as check:
        state = await reader.state(head)
        result = await analyse(
            state,
            reader=reader,
            reviewer=reviewing.reviewer,
            analyses=reviewing.analyses,
            identity=reviewing.identity,
        )
        plan = plan_review(
            state,
            result,
            mode=mode,
            trigger=request.trigger,
            identity=reviewing.identity,
            approve=reviewing.approve,
            issued_at=reviewing.clock(),
        )
        await publisher.publish(plan, check)
    return plan
