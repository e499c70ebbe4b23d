"""Review triggers: what asks the bot to review a pull request (the review itself is
``usecases.review.review_pull``).

A review request for the decoy user (or a configured team), the "Re-run" button of the bot's
check run, a push to a PR the bot approved (an approval is for one head), and (when the
repository opts in) a PR being opened or marked ready, or pushed to after the bot blocked it.
``@slug review`` arrives through ``mentions.py``.
"""

from __future__ import annotations

from ..events import CheckRunEvent, PullRequestEvent
from ..review.rounds.markers import Trigger
from ..usecases.checks import CheckKind, check_name
from ..usecases.review import review_pull, review_requested
from .concern import OrderedRouter
from .context import Context

router = OrderedRouter()


@router.register("pull_request", action="review_requested")
async def on_review_requested(event: PullRequestEvent, ctx: Context) -> None:
    """GitHub sends one delivery per requested reviewer: act on this delivery's reviewer only."""
    if event.repo is None:
        return
    identity = ctx.bot.identity
    if event.requested_reviewer is not None:
        if event.requested_reviewer.casefold() != identity.decoy_login.casefold():
            return
        trigger = Trigger.DECOY
    elif event.requested_team is not None:
        config = await ctx.bot.repo_configs.get(ctx.gh, repo=event.repo, slug=identity.slug)
        if event.requested_team.casefold() not in {t.casefold() for t in config.review.teams}:
            return
        trigger = Trigger.TEAM
    else:
        return
    await review_requested(ctx.gh, ctx.bot, repo=event.repo, pr_number=event.pr_number, trigger=trigger)


@router.register("pull_request", action="opened")
@router.register("pull_request", action="ready_for_review")
async def on_opened(event: PullRequestEvent, ctx: Context) -> None:
    """Automatic review, only when the repository asks for it, and never of a draft."""
    if event.draft or event.repo is None:
        return
    config = await ctx.bot.repo_configs.get(ctx.gh, repo=event.repo, slug=ctx.bot.identity.slug)
    if config.review.auto:
        await review_pull(ctx.gh, ctx.bot, repo=event.repo, pr_number=event.pr_number, trigger=Trigger.AUTO)


@router.register("pull_request", action="synchronize")
async def on_push(event: PullRequestEvent, ctx: Context) -> None:
    """A push: the review decides (a block is re-reviewed with ``review.on_push``; the bot's
    approval of the earlier head is reviewed again or dismissed; otherwise nothing)."""
    if event.repo is None:
        return
    await review_pull(ctx.gh, ctx.bot, repo=event.repo, pr_number=event.pr_number, trigger=Trigger.PUSH)


@router.register("check_run", action="rerequested")
async def on_rerun(event: CheckRunEvent, ctx: Context) -> None:
    """The Checks tab's "Re-run" on the bot's own check run reviews that PR again."""
    identity = ctx.bot.identity
    if (
        event.repo is None
        or event.app_slug != identity.slug
        or event.name != check_name(CheckKind.REVIEW, identity)
    ):
        return
    numbers = set(event.pr_numbers)
    if event.external_id and event.external_id.isdigit():
        numbers.add(int(event.external_id))  # forks' check runs list no PRs; the bot noted it
    for pr_number in sorted(numbers):
        await review_pull(ctx.gh, ctx.bot, repo=event.repo, pr_number=pr_number, trigger=Trigger.RERUN)
