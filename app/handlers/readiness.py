"""Readiness triggers: anything that can change whether a pull request looks ready.

Each event only asks for a look once its burst has settled (a durable timer, ``settle_soon``);
the timer's job hands the look to the pull request's own queue (``look_now``), where the
evaluation runs (``usecases.readiness.evaluate``). The bot's own check runs and comments wake
nothing (the routing's self guard); its own reviews and thread resolutions do, since they change
the answer. A closed pull request schedules nothing.
"""

from __future__ import annotations

from ..events import (
    READINESS_EVENT,
    TIMER_EVENT,
    CheckRunEvent,
    CheckSuiteEvent,
    IssueCommentEvent,
    PullRequestEvent,
    PullRequestScoped,
    ReviewCommentEvent,
    ReviewEvent,
    ReviewThreadEvent,
    StatusEvent,
    TimerEvent,
)
from ..usecases.readiness import evaluate, settle_commit, settle_soon
from .concern import OrderedRouter
from .context import Context, accepts_own_events

router = OrderedRouter()


async def _settle(event: PullRequestScoped, ctx: Context) -> None:
    if event.repo is None or event.pr_state == "closed":
        return
    await settle_soon(
        ctx.bot,
        repo=event.repo,
        pr_number=event.pr_number,
        installation_id=event.installation_id,
        received_at=ctx.received_at,
    )


@router.register("pull_request", action="opened")
@router.register("pull_request", action="synchronize")
@router.register("pull_request", action="ready_for_review")
@router.register("pull_request", action="converted_to_draft")
@router.register("pull_request", action="reopened")
@router.register("pull_request", action="review_requested")
@router.register("pull_request", action="review_request_removed")
async def on_pull_request(event: PullRequestEvent, ctx: Context) -> None:
    await _settle(event, ctx)


@router.register("pull_request_review", action="submitted")
@router.register("pull_request_review", action="dismissed")
@accepts_own_events
async def on_review(event: ReviewEvent, ctx: Context) -> None:
    await _settle(event, ctx)


@router.register("pull_request_review_thread", action="resolved")
@router.register("pull_request_review_thread", action="unresolved")
@accepts_own_events
async def on_thread(event: ReviewThreadEvent, ctx: Context) -> None:
    await _settle(event, ctx)


@router.register("pull_request_review_comment", action="created")
async def on_inline_comment(event: ReviewCommentEvent, ctx: Context) -> None:
    await _settle(event, ctx)


@router.register("issue_comment", action="created")
@router.register("issue_comment", action="edited")
async def on_comment(event: IssueCommentEvent, ctx: Context) -> None:
    if event.repo is None or event.pr_number is None or event.issue_state == "closed":
        return
    await settle_soon(
        ctx.bot,
        repo=event.repo,
        pr_number=event.pr_number,
        installation_id=event.installation_id,
        received_at=ctx.received_at,
    )


async def _settle_commit(
    event: CheckRunEvent | CheckSuiteEvent | StatusEvent,
    sha: str | None,
    numbers: tuple[int, ...],
    ctx: Context,
) -> None:
    """CI moved on a commit: the pull requests it is the head of settle (``settle_commit``)."""
    if event.repo is None or event.installation_id is None:
        return
    await settle_commit(
        ctx.gh,
        ctx.bot,
        repo=event.repo,
        sha=sha,
        numbers=numbers,
        installation_id=event.installation_id,
        received_at=ctx.received_at,
    )


@router.register("check_run", action="completed")
async def on_check_run(event: CheckRunEvent, ctx: Context) -> None:
    if event.app_slug != ctx.bot.identity.slug:  # our own checks never wake us
        await _settle_commit(event, event.head_sha, event.pr_numbers, ctx)


@router.register("check_suite", action="completed")
async def on_check_suite(event: CheckSuiteEvent, ctx: Context) -> None:
    if event.app_slug != ctx.bot.identity.slug:
        await _settle_commit(event, event.head_sha, event.pr_numbers, ctx)


@router.register("status")
async def on_status(event: StatusEvent, ctx: Context) -> None:
    await _settle_commit(event, event.sha, (), ctx)


@router.register(TIMER_EVENT)
async def on_timer(event: TimerEvent, ctx: Context) -> None:
    """A timer is due: the look runs in the pull request's own queue, once per timer."""
    if event.repo is None or event.installation_id is None:
        return
    await ctx.bot.timers.look_now(
        timer_id=event.delivery_id,
        repo=event.repo,
        pr_number=event.pr_number,
        installation_id=event.installation_id,
        since=event.since,
    )


@router.register(READINESS_EVENT)
async def on_look(event: TimerEvent, ctx: Context) -> None:
    if event.repo is None or event.installation_id is None:
        return
    await evaluate(
        ctx.gh,
        ctx.bot,
        repo=event.repo,
        pr_number=event.pr_number,
        installation_id=event.installation_id,
        since=event.since,
    )
