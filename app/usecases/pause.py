"""``@slug pause`` / ``@slug resume``: the bot stays quiet on one pull request while paused.

The state lives on GitHub, in the conversation: the bot's answer to a pause or a resume carries
a hidden ``pause`` marker, and the latest such marker in the bot's own comments is the state.
So it survives a restart or a move to another database, any worker reads the same answer, and
the people on the pull request see who paused it and when; the bot keeps no memory of its own.
A marker-shaped line in anyone else's comment is never read (markers count only in the bot's
own text), and only someone with write access to the repository may pause or resume (the
collaborator permission API says so, never a comment).

While paused: no review of any trigger (the review check run of a head not reviewed yet says
so, and holds a merge where it is required), and readiness writes its check run only ("paused
by @x"), never the sticky comment.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from ..github.client import GitHubClient
from ..guards import BotIdentity, is_bot_login
from ..review.rounds.markers import decode, encode
from ..review.rounds.overrule import Role
from .bot import Bot
from .overrules import role_on

log = logging.getLogger(__name__)

MARKER = "pause"


def pause_marker(*, paused: bool, by: str) -> str:
    return encode(MARKER, paused=paused, by=by)


def paused_by(comments: Iterable[Mapping[str, Any]], identity: BotIdentity) -> str | None:
    """Who paused the pull request, from the bot's latest pause or resume record (None: not
    paused). ``comments``: the PR's conversation as the REST API lists it."""
    records = [
        (int(c.get("id") or 0), data)
        for c in comments
        if is_bot_login((c.get("user") or {}).get("login"), identity)
        and (data := decode(c.get("body"), MARKER)) is not None
    ]
    if not records:
        return None
    _, latest = max(records, key=lambda record: record[0])
    by = latest.get("by")
    return str(by) if latest.get("paused") is True and isinstance(by, str) and by else None


def paused_headline(by: str, slug: str) -> str:
    """The check runs' title while paused (``by`` is a login GitHub vouched for)."""
    return f"⏸ Paused by @{by}: no reviews or readiness comments until `@{slug} resume`"


async def pause_text(
    gh: GitHubClient,
    bot: Bot,
    *,
    repo: str,
    conversation: Iterable[Mapping[str, Any]],
    login: str,
    pause: bool,
) -> tuple[str, str | None]:
    """What ``pause``/``resume`` answers, and the marker that records the new state (None:
    nothing changes). Only someone with write access may change it: the PR's author too, but
    as a writer, never as the author. ``conversation``: the PR's comments, as listed."""
    slug = bot.identity.slug
    verb = "pause" if pause else "resume"
    role = await role_on(gh, repo=repo, login=login, pr_author=None)
    if role is not Role.WRITER:
        return f"@{login} only people with write access to this repository can {verb} me here.", None
    current = paused_by(conversation, bot.identity)
    if pause and current is not None:
        return f"Already paused by @{current}. `@{slug} resume` to resume.", None
    if not pause and current is None:
        return "I am not paused on this pull request.", None
    log.info("%sd by %s", verb, login)  # the log context names the pull request
    if pause:
        text = (
            f"Paused by @{login}: no reviews, re-reviews or readiness comments on this pull request "
            f"until someone with write access says `@{slug} resume`."
        )
    else:
        text = (
            f"Resumed by @{login}. Ask `@{slug} review` for a review of the current head; "
            "readiness looks again now."
        )
    return text, pause_marker(paused=pause, by=login)
