"""A maintainer overrules the bot: a dispute in one of its threads, and the repository's learnings.

A reply in a thread of the bot such as "false positive", "intentional", "won't fix", or
``@slug dismiss <reason>``, from someone who may overrule that finding (write access; the PR's
author only for concerns and nits, never a blocker on their own PR), withdraws it on this pull
request: the bot says in one line who overruled it and why, resolves the thread, and when it was
a blocker re-decides its verdict without it, through the same re-review a fix gets
(``usecases.review.review_pull``): the last blocker gone, the sticky request for changes is
replaced by an approval (or, approval disabled, dismissed). Anyone else gets one answer per
thread saying who can. ``--always`` (or ``review.learn: true``) also remembers the dispute for
the repository, when it comes from someone with write access. A comment that holds several
findings (a line's, or one problem's places) is disputed as a whole, since its thread is then
resolved: all of them are withdrawn, and who may is decided by the most severe (the lead's is
the one remembered).
"""

from __future__ import annotations

import logging

from ..commands import Dispute
from ..github import calls as github
from ..github.client import GitHubClient
from ..review.core.model import Severity
from ..review.engine.inert import escape
from ..review.rounds.markers import Trigger
from ..review.rounds.overrule import Role, may_overrule
from .bot import Bot
from .overrules import PendingOverrule, patch_of, record_overrule, role_on, take_reactions
from .review import review_pull
from .threads import open_bot_threads, say_in_thread

log = logging.getLogger(__name__)


def refusal(login: str, role: Role, severity: Severity, slug: str) -> str:
    if role is Role.AUTHOR:
        return (
            f"@{login} the author of a pull request cannot overrule a blocker on it; someone else with "
            f"write access to this repository can (`@{slug} dismiss <reason>` in this thread)."
        )
    what = "findings" if severity is Severity.BLOCKER else "findings (the author too, for concerns and nits)"
    return f"@{login} only people with write access to this repository can overrule my {what}."


async def dispute_finding(
    gh: GitHubClient,
    bot: Bot,
    *,
    repo: str,
    pr_number: int,
    root_comment_id: int,
    login: str,
    dispute: Dispute,
) -> None:
    """Withdraw the finding of the bot's thread ``root_comment_id`` if ``login`` may overrule it."""
    found = await open_bot_threads(
        gh, bot.identity, repo=repo, pr_number=pr_number, root_comment_id=root_comment_id
    )
    if not found:
        return  # not the bot's thread, or already resolved
    item = found[0]
    pull = await github.get_pull(gh, repo=repo, pr_number=pr_number)
    if pull.get("state") != "open":
        return
    role = await role_on(gh, repo=repo, login=login, pr_author=(pull.get("user") or {}).get("login"))
    severity = item.severity
    comments = await github.list_pull_review_comments(gh, repo=repo, pr_number=pr_number)
    if not may_overrule(severity, role):
        log.info("%s (%s) may not overrule %s", login, role.value, item.finding.rule)
        await say_in_thread(
            gh,
            bot,
            repo=repo,
            pr_number=pr_number,
            item=item,
            key=f"not-overruled:{login.casefold()}",
            text=refusal(login, role, severity, bot.identity.slug),
            earlier=comments,
        )
        return
    config = await bot.repo_configs.get(gh, repo=repo, slug=bot.identity.slug)
    asked = dispute.always or config.review.learn
    pending = PendingOverrule(
        item,
        by=login,
        reason=dispute.reason,
        learn=asked and role is Role.WRITER,
        learn_problem="only someone with write access (not the author) can teach the repository"
        if dispute.always and role is not Role.WRITER
        else None,
    )
    patch = (
        await patch_of(gh, repo=repo, pr_number=pr_number, path=item.finding.path) if pending.learn else None
    )
    await record_overrule(
        gh, bot, repo=repo, pr_number=pr_number, pending=pending, comments=comments, patch=patch
    )
    await redecide(gh, bot, repo=repo, pr_number=pr_number)


async def redecide(gh: GitHubClient, bot: Bot, *, repo: str, pr_number: int) -> None:
    """The re-decision a fix gets, after a finding was overruled: a review is posted only when
    the block goes; otherwise the head's check run counts the overrule."""
    await review_pull(gh, bot, repo=repo, pr_number=pr_number, trigger=Trigger.OVERRULE)


async def take_thumbs_down(gh: GitHubClient, bot: Bot, *, repo: str, pr_number: int) -> None:
    """Read the 👎s on the bot's open findings (GitHub sends no webhook for reactions), overrule
    those given by someone who may, and re-decide the verdict if a blocker went."""
    taken = await take_reactions(gh, bot, repo=repo, pr_number=pr_number)
    if taken:
        await redecide(gh, bot, repo=repo, pr_number=pr_number)


async def learnings_text(bot: Bot, *, repo: str) -> str:
    """What ``@slug learnings`` answers."""
    learned = await bot.learnings.of_repo(repo)
    slug = bot.identity.slug
    if not learned:
        return (
            "This repository has no learnings. A maintainer's `@"
            f"{slug} dismiss --always <reason>` in one of my threads adds one."
        )
    lines = [f"Findings I leave out in this repository ({len(learned)}; `@{slug} forget N` removes one):", ""]
    lines += [f"- {escape(item.describe())}" for item in learned]
    return "\n".join(lines)


async def forget_text(gh: GitHubClient, bot: Bot, *, repo: str, login: str, number: int | None) -> str:
    """What ``@slug forget N`` does and answers: only someone with write access may forget."""
    if number is None:
        return f"Which one? `@{bot.identity.slug} forget N`, with N from `@{bot.identity.slug} learnings`."
    # For the repository, not this PR: whether they wrote this PR does not matter.
    role = await role_on(gh, repo=repo, login=login, pr_author=None)
    if role is not Role.WRITER:
        return f"@{login} only people with write access to this repository can remove a learning."
    removed = await bot.learnings.forget(repo, number)
    if removed is None:
        return f"This repository has no learning #{number}."
    log.info("learning %d of %s forgotten by %s", number, repo, login)
    return f"Forgot learning {escape(removed.describe())}. I report such findings again."
