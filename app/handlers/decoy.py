"""Decoy cleanup: after the bot's review lands, take the decoy off the requested reviewers.

This concern listens to the bot's own ``pull_request_review.submitted`` echo (the one own event
it opts into) and drops the decoy once, only for reviews that a decoy request triggered.
The ``review_request_removed`` echo of that removal has the bot as sender and wakes nothing.
"""

from __future__ import annotations

from ..events import ReviewEvent
from ..guards import is_bot_login
from ..review.rounds.markers import ReviewMarker, Trigger
from ..usecases.decoy import drop_decoy
from .concern import OrderedRouter
from .context import Context, accepts_own_events

router = OrderedRouter()


@router.register("pull_request_review", action="submitted")
@accepts_own_events
async def on_own_review_submitted(event: ReviewEvent, ctx: Context) -> None:
    if event.repo is None or not is_bot_login(event.reviewer_login, ctx.bot.identity):
        return
    marker = ReviewMarker.read(event.body)
    if marker is None or marker.trigger != Trigger.DECOY:
        return
    # Who is requested as of the review, from its own payload: the removal is idempotent, and a
    # re-read of the pull request would spend a call to learn the same
    await drop_decoy(
        ctx.gh, ctx.bot, repo=event.repo, pr_number=event.pr_number, requested=event.requested_reviewers
    )
