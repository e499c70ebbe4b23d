"""Decoy cleanup: after the bot's review lands, take the decoy off the requested reviewers.

People ask for a review by requesting the decoy user (an App cannot be requested). GitHub shows
the App as a reviewer once its review is posted, but the decoy would stay "requested" forever.
This concern listens to the bot's own ``pull_request_review.submitted`` echo (the one own event
it opts into) and removes the decoy once, only for reviews that a decoy request triggered.
The ``review_request_removed`` echo of that removal has the bot as sender and wakes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import gidgethub
from gidgethub import routing

from .. import github
from ..events import ReviewEvent
from ..guards import is_bot_login
from ..review.markers import ReviewMarker
from ..routing import Context, accepts_own_events

log = logging.getLogger(__name__)

router = routing.Router()


@router.register("pull_request_review", action="submitted")
@accepts_own_events
async def on_own_review_submitted(event: ReviewEvent, ctx: Context) -> None:
    if event.repo is None or not is_bot_login(event.reviewer_login, ctx.identity):
        return
    marker = ReviewMarker.read(event.body)
    if marker is None or marker.trigger != "decoy":
        return
    pull = await github.get_pull(ctx.gh, repo=event.repo, pr_number=event.pr_number)
    await drop_decoy(ctx, repo=event.repo, pr_number=event.pr_number, pull=pull)


async def drop_decoy(ctx: Context, *, repo: str, pr_number: int, pull: Mapping[str, Any]) -> None:
    """Remove the decoy if it is still requested. A failure is logged and left alone: retrying a
    removal GitHub refused could only loop."""
    requested = {(user.get("login") or "").casefold() for user in pull.get("requested_reviewers") or []}
    decoy = ctx.identity.decoy_login
    if decoy.casefold() not in requested:
        return
    try:
        await github.remove_requested_reviewers(ctx.gh, repo=repo, pr_number=pr_number, reviewers=[decoy])
    except gidgethub.HTTPException as exc:
        log.warning("could not remove %s from the requested reviewers: %s", decoy, exc)
    else:
        log.info("removed the decoy %s from the requested reviewers", decoy)
