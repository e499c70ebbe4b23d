"""What has been overruled on a pull request, read back from GitHub, and how a finding is withdrawn.

An overrule lives in the thread it concerns: the bot's one-line reply (who overruled it and why,
with an ``overruled`` marker) and the thread resolved. Every later review of the PR reads those
replies back (``recorded_overrules``) and leaves the findings out. A 👎 on the bot's comment
counts as a dispute without a reason; GitHub sends no webhook for reactions, so they are read
when the bot next reviews the PR (``read_reactions``; the review records them as it publishes)
or is asked to ``resolve`` (``take_reactions``). A dispute and a 👎 go the same way: a
``PendingOverrule``, then ``record_overrule``.

Who may overrule is re-read from GitHub (the collaborator permission API), never from a comment.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .. import metrics
from ..github import calls as github
from ..github.client import GitHubClient
from ..guards import BotIdentity, is_bot_login
from ..review.core.diff import parse_patch
from ..review.engine.inert import code, escape
from ..review.rounds.learnings import Learning
from ..review.rounds.markers import FindingMarker
from ..review.rounds.overrule import (
    Overrule,
    Role,
    may_overrule,
    overruled_by_marker,
    recorded_severity,
    role_of,
)
from .bot import Bot
from .threads import OpenThread, open_bot_threads

log = logging.getLogger(__name__)


def reported_at(
    comments: Sequence[Mapping[str, Any]], identity: BotIdentity, overruled: Sequence[Overrule]
) -> list[tuple[str, str]]:
    """(path, head) where each overruled finding was reported: its thread's root comment marker."""
    roots = {int(c["id"]): c for c in bot_comments(comments, identity) if c.get("in_reply_to_id") is None}
    found = []
    for item in overruled:
        marker = FindingMarker.read((roots.get(item.thread) or {}).get("body"))
        if marker is not None:
            found.append((item.path, marker.head_sha))
    return found


async def role_on(gh: GitHubClient, *, repo: str, login: str, pr_author: str | None) -> Role:
    permission = None
    if pr_author is None or login.casefold() != pr_author.casefold():
        permission = await github.get_permission(gh, repo=repo, login=login)
    return role_of(login=login, pr_author=pr_author, permission=permission)


def bot_comments(comments: Sequence[Mapping[str, Any]], identity: BotIdentity) -> list[Mapping[str, Any]]:
    return [c for c in comments if is_bot_login((c.get("user") or {}).get("login"), identity)]


def recorded_overrules(comments: Sequence[Mapping[str, Any]], identity: BotIdentity) -> list[Overrule]:
    """The overrules the bot recorded on this PR (markers are read from its own replies only)."""
    return overruled_by_marker(c.get("body") for c in bot_comments(comments, identity))


def overrule_text(
    items: Sequence[Overrule], *, learned: int | None = None, learn_problem: str | None = None
) -> str:
    """The one line recording who overruled the thread's findings (one, or all a comment held) and why."""
    item = items[0]
    why = f": {escape(item.reason)}" if item.reason else " (👎, no reason given)"
    rules = list(dict.fromkeys(code(o.rule) for o in items))
    verb = "is" if len(items) == 1 else "are"
    where = f" ({len(items)} places)" if len(rules) == 1 and len(items) > 1 else ""
    line = f"Overruled by @{item.by}{why}. {', '.join(rules)}{where} {verb} withdrawn on this pull request."
    if learned is not None:
        line += f" Remembered for this repository as learning #{learned}."
    elif learn_problem is not None:
        line += f" Not remembered: {learn_problem}."
    return line


@dataclass(frozen=True, slots=True)
class PendingOverrule:
    """A finding someone who may has overruled (a dispute in its thread, a 👎 on it), not yet
    recorded: ``learn``, remember it for the repository; ``learn_problem``, why it was asked to be
    remembered and is not."""

    item: OpenThread
    by: str
    reason: str = ""
    learn: bool = False
    learn_problem: str | None = None

    @property
    def overrules(self) -> tuple[Overrule, ...]:
        """One for each finding the thread holds, the lead first: the dispute is about the comment,
        and resolving its thread ends the discussion of all of it."""
        lead, now = self.item.finding, self.item.thread.line
        return tuple(
            Overrule(
                fingerprint=m.fingerprint,
                key=m.key,
                rule=m.rule,
                path=m.path,
                # the thread's line where it is now (its lead's line); another place's as recorded
                line=(now or m.line) if (m.path, m.line) == (lead.path, lead.line) else m.line,
                severity=m.severity,
                by=self.by,
                reason=self.reason,
                thread=self.item.thread.root_comment_id,
                content=m.content,
            )
            for m in reversed(self.item.markers)
        )


async def patch_of(gh: GitHubClient, *, repo: str, pr_number: int, path: str) -> str | None:
    """The PR's patch of ``path``, from GitHub's file list (where a learning's line is read)."""
    files = await github.list_pull_files(gh, repo=repo, pr_number=pr_number)
    return next((f.get("patch") for f in files if f.get("filename") == path), None)


async def remember(
    bot: Bot, *, repo: str, pr_number: int, pending: PendingOverrule, patch: str | None
) -> tuple[int | None, str | None]:
    """Store the dispute as a learning of the repository: (its number, None), or (None, why not).
    The code line is read from the PR's diff (``patch``, the thread's file) at the thread's
    current line, never from a comment."""
    item = pending.item
    line = item.thread.line
    if line is None:
        return None, "my comment is outdated, so its line is not known at this head"
    text = parse_patch(patch).added_text.get(line)
    if text is None:
        return None, "its line is no longer one this pull request adds"
    learning = await bot.learnings.remember(
        repo,
        Learning.new(
            rule=item.finding.rule,
            path=item.finding.path,
            line_text=text,
            reason=pending.reason,
            created_by=pending.by,
            source=f"{repo}#{pr_number}",
            # what it saw (the finding's flagged text and evidence), and nothing more severe
            severity=recorded_severity(item.finding.severity),
            content=item.finding.content,
        ),
    )
    return learning.number, None


async def record_overrule(
    gh: GitHubClient,
    bot: Bot,
    *,
    repo: str,
    pr_number: int,
    pending: PendingOverrule,
    comments: Sequence[Mapping[str, Any]],
    patch: str | None,
) -> tuple[Overrule, ...]:
    """Remember it if asked, record the overrule in the thread (once: a retried job finds its
    reply) and resolve the thread. ``comments``: the PR's review comments, read before."""
    learned, problem = None, pending.learn_problem
    if pending.learn:
        learned, problem = await remember(bot, repo=repo, pr_number=pr_number, pending=pending, patch=patch)
    overrules = pending.overrules
    thread = pending.item.thread.root_comment_id
    if not any(o.thread == thread for o in recorded_overrules(comments, bot.identity)):
        text = overrule_text(overrules, learned=learned, learn_problem=problem)
        markers = "\n".join(o.encode() for o in overrules)
        await github.reply_to_review_comment(
            gh, repo=repo, pr_number=pr_number, comment_id=thread, body=f"{text}\n\n{markers}"
        )
    if await github.resolve_review_thread(gh, thread_node_id=pending.item.thread.node_id):
        metrics.THREADS_RESOLVED.inc()
    log.info("%d finding(s) of thread %s overruled by %s", len(overrules), thread, pending.by)
    return overrules


def disliked(comments: Sequence[Mapping[str, Any]], identity: BotIdentity) -> set[int]:
    """The bot's root comments whose reaction counts show a 👎 and whose overrule is not recorded."""
    done = {o.thread for o in recorded_overrules(comments, identity)}
    return {
        int(c["id"])
        for c in bot_comments(comments, identity)
        if c.get("in_reply_to_id") is None
        and int((c.get("reactions") or {}).get("-1") or 0) > 0
        and int(c["id"]) not in done
    }


async def read_reactions(
    gh: GitHubClient,
    identity: BotIdentity,
    *,
    repo: str,
    pr_author: str | None,
    comments: Sequence[Mapping[str, Any]],
    threads: Sequence[OpenThread],
    learn: bool,
) -> list[PendingOverrule]:
    """The open findings of the bot that someone who may has given a 👎 (GitHub sends no webhook
    for reactions), not yet recorded. Only the bot's root comments whose reaction counts show a
    👎 (``disliked``) cost requests: who reacted, and their permission. ``learn``: the repository's
    ``review.learn`` (a 👎 from someone with write access is remembered)."""
    roots = disliked(comments, identity)
    pending: list[PendingOverrule] = []
    for item in threads:
        if item.thread.root_comment_id not in roots:
            continue
        reactions = await github.list_review_comment_reactions(
            gh, repo=repo, comment_id=item.thread.root_comment_id, content="-1"
        )
        for reaction in reactions:
            login = (reaction.get("user") or {}).get("login")
            if not login or is_bot_login(login, identity):
                continue
            role = await role_on(gh, repo=repo, login=login, pr_author=pr_author)
            if may_overrule(item.severity, role):
                pending.append(PendingOverrule(item, by=login, learn=learn and role is Role.WRITER))
                break
    return pending


async def take_reactions(gh: GitHubClient, bot: Bot, *, repo: str, pr_number: int) -> list[Overrule]:
    """Overrule each open finding of the bot that someone who may has given a 👎; the new ones
    (``@slug resolve``; a review reads them itself)."""
    comments = await github.list_pull_review_comments(gh, repo=repo, pr_number=pr_number)
    if not disliked(comments, bot.identity):
        return []
    pull = await github.get_pull(gh, repo=repo, pr_number=pr_number)
    if pull.get("state") != "open":
        return []
    threads = await open_bot_threads(gh, bot.identity, repo=repo, pr_number=pr_number)
    config = await bot.repo_configs.get(gh, repo=repo, slug=bot.identity.slug)
    pending = await read_reactions(
        gh,
        bot.identity,
        repo=repo,
        pr_author=(pull.get("user") or {}).get("login"),
        comments=comments,
        threads=threads,
        learn=config.review.learn,
    )
    return [
        overrule
        for p in pending
        for overrule in await record_overrule(
            gh,
            bot,
            repo=repo,
            pr_number=pr_number,
            pending=p,
            comments=comments,
            patch=await patch_of(gh, repo=repo, pr_number=pr_number, path=p.item.finding.path)
            if p.learn
            else None,
        )
    ]
