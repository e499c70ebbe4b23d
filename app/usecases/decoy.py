"""Drop the decoy: once the bot's review is posted, the decoy it was requested as is no longer needed.

People ask for a review by requesting the decoy user (an App cannot be requested). GitHub shows
the App as a reviewer once its review is posted, but the decoy would stay "requested" forever.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

import gidgethub

from ..github import calls as github
from ..github.client import GitHubClient
from .bot import Bot

log = logging.getLogger(__name__)


async def drop_decoy(
    gh: GitHubClient, bot: Bot, *, repo: str, pr_number: int, requested: Iterable[str]
) -> None:
    """Remove the decoy if it is among the ``requested`` reviewers. A failure is logged and left
    alone: retrying a removal GitHub refused could only loop."""
    decoy = bot.identity.decoy_login
    if decoy.casefold() not in {login.casefold() for login in requested}:
        return
    try:
        await github.remove_requested_reviewers(gh, repo=repo, pr_number=pr_number, reviewers=[decoy])
    except gidgethub.HTTPException as exc:
        log.warning("could not remove %s from the requested reviewers: %s", decoy, exc)
    else:
        log.info("removed the decoy %s from the requested reviewers", decoy)


def requested_logins(pull: Mapping[str, Any]) -> list[str]:
    """The users a pull request (as GitHub answers it) still has requested."""
    return [str(user.get("login") or "") for user in pull.get("requested_reviewers") or ()]
