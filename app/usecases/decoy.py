"""Drop the decoy: once the bot's review is posted, the decoy it was requested as is no longer needed.

People ask for a review by requesting the decoy user (an App cannot be requested). GitHub shows
the App as a reviewer once its review is posted, but the decoy would stay "requested" forever.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import gidgethub

from ..github import calls as github
from ..github.client import GitHubClient
from .bot import Bot

log = logging.getLogger(__name__)


async def drop_decoy(
    gh: GitHubClient, bot: Bot, *, repo: str, pr_number: int, pull: Mapping[str, Any]
) -> None:
    """Remove the decoy if it is still requested. A failure is logged and left alone: retrying a
    removal GitHub refused could only loop."""
    requested = {(user.get("login") or "").casefold() for user in pull.get("requested_reviewers") or []}
    decoy = bot.identity.decoy_login
    if decoy.casefold() not in requested:
        return
    try:
        await github.remove_requested_reviewers(gh, repo=repo, pr_number=pr_number, reviewers=[decoy])
    except gidgethub.HTTPException as exc:
        log.warning("could not remove %s from the requested reviewers: %s", decoy, exc)
    else:
        log.info("removed the decoy %s from the requested reviewers", decoy)


async def drop_decoy_after_review(gh: GitHubClient, bot: Bot, *, repo: str, pr_number: int) -> None:
    """The bot's review of a decoy request landed: re-read the pull request for who is requested
    now, and drop the decoy if it still is."""
    pull = await github.get_pull(gh, repo=repo, pr_number=pr_number)
    await drop_decoy(gh, bot, repo=repo, pr_number=pr_number, pull=pull)
