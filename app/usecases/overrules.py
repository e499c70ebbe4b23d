"""What has been overruled on a pull request, read back from GitHub, and how a finding is withdrawn.

An overrule lives in the thread it concerns: the bot's one-line reply (who overruled it and why,
with an ``overruled`` marker) and the thread resolved. Every later review of the PR reads those
replies back (``recorded_overrules``) and leaves the findings out. A 👎 on the bot's comment
counts as a dispute without a reason; GitHub sends no webhook for reactions, so they are read
here, when the bot next reviews the PR or is asked to ``resolve`` (``take_reactions``).

Who may overrule is re-read from GitHub (the collaborator permission API), never from a comment.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from .. import github, metrics
from ..github import GitHubClient
from ..guards import is_bot_login
from ..review.core.diff import parse_patch
from ..review.engine.inert import code, escape
from ..review.learnings import Learning
from ..review.overrule import (
    Overrule,
    Role,
    may_overrule,
    overruled_by_marker,
    role_of,
    severity_named,
)
from ..review.rounds.markers import FindingMarker
from .bot import Bot
from .threads import OpenThread, open_bot_threads

log = logging.getLogger(__name__)


def reported_at(
    comments: Sequence[Mapping[str, Any]], bot: Bot, overruled: Sequence[Overrule]
) -> list[tuple[str, str]]:
    """(path, head) where each overruled finding was reported: its thread's root comment marker."""
    roots = {int(c["id"]): c for c in bot_comments(comments, bot) if c.get("in_reply_to_id") is None}
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


def bot_comments(comments: Sequence[Mapping[str, Any]], bot: Bot) -> list[Mapping[str, Any]]:
    return [c for c in comments if is_bot_login((c.get("user") or {}).get("login"), bot.identity)]


def recorded_overrules(comments: Sequence[Mapping[str, Any]], bot: Bot) -> list[Overrule]:
    """The overrules the bot recorded on this PR (markers are read from its own replies only)."""
    return overruled_by_marker(c.get("body") for c in bot_comments(comments, bot))


def overrule_text(item: Overrule, *, learned: int | None = None, learn_problem: str | None = None) -> str:
    """The one line recording who overruled the finding and why."""
    why = f": {escape(item.reason)}" if item.reason else " (👎, no reason given)"
    line = f"Overruled by @{item.by}{why}. {code(item.rule)} is withdrawn on this pull request."
    if learned is not None:
        line += f" Remembered for this repository as learning #{learned}."
    elif learn_problem is not None:
        line += f" Not remembered: {learn_problem}."
    return line


async def remember(
    gh: GitHubClient, bot: Bot, *, repo: str, pr_number: int, item: OpenThread, by: str, reason: str
) -> tuple[int | None, str | None]:
    """Store the dispute as a learning of the repository: (its number, None), or (None, why not).
    The code line is read from the PR's diff at the thread's current line, never from a comment."""
    line = item.thread.line
    if line is None:
        return None, "my comment is outdated, so its line is not known at this head"
    files = await github.list_pull_files(gh, repo=repo, pr_number=pr_number)
    patch = next((f.get("patch") for f in files if f.get("filename") == item.finding.path), None)
    text = parse_patch(patch).added_text.get(line)
    if text is None:
        return None, "its line is no longer one this pull request adds"
    learning = await bot.learnings.remember(
        repo,
        Learning.new(
            rule=item.finding.rule,
            path=item.finding.path,
            line_text=text,
            reason=reason,
            created_by=by,
            source=f"{repo}#{pr_number}",
        ),
    )
    return learning.number, None


async def withdraw_thread(
    gh: GitHubClient,
    bot: Bot,
    *,
    repo: str,
    pr_number: int,
    item: OpenThread,
    by: str,
    reason: str,
    comments: Sequence[Mapping[str, Any]],
    learned: int | None = None,
    learn_problem: str | None = None,
) -> Overrule:
    """Record the overrule in the thread (once: a retried job finds its reply) and resolve it."""
    overrule = Overrule(
        fingerprint=item.finding.fingerprint,
        key=item.finding.key,
        rule=item.finding.rule,
        path=item.finding.path,
        line=item.thread.line or item.finding.line,
        severity=item.finding.severity,
        by=by,
        reason=reason,
        thread=item.thread.root_comment_id,
        content=item.finding.content,
    )
    if not any(o.thread == overrule.thread for o in recorded_overrules(comments, bot)):
        text = overrule_text(overrule, learned=learned, learn_problem=learn_problem)
        await github.reply_to_review_comment(
            gh,
            repo=repo,
            pr_number=pr_number,
            comment_id=item.thread.root_comment_id,
            body=f"{text}\n\n{overrule.encode()}",
        )
    if await github.resolve_review_thread(gh, thread_node_id=item.thread.node_id):
        metrics.THREADS_RESOLVED.inc()
    log.info("finding %s in %s overruled by %s", overrule.rule, overrule.path, by)
    return overrule


async def take_reactions(
    gh: GitHubClient,
    bot: Bot,
    *,
    repo: str,
    pr_number: int,
    comments: Sequence[Mapping[str, Any]],
    pull: Mapping[str, Any] | None = None,
    threads: Sequence[OpenThread] | None = None,
) -> list[Overrule]:
    """Overrule each open finding of the bot that someone who may has given a 👎; the new ones.

    Only the bot's root comments whose reaction counts show a 👎 cost requests (who reacted; the
    pull request and the threads when the caller has not read them)."""
    done = {o.thread for o in recorded_overrules(comments, bot)}
    disliked = {
        int(c["id"])
        for c in bot_comments(comments, bot)
        if c.get("in_reply_to_id") is None
        and int((c.get("reactions") or {}).get("-1") or 0) > 0
        and int(c["id"]) not in done
    }
    if not disliked:
        return []
    if pull is None:
        pull = await github.get_pull(gh, repo=repo, pr_number=pr_number)
        if pull.get("state") != "open":
            return []
    if threads is None:
        threads = await open_bot_threads(gh, bot, repo=repo, pr_number=pr_number)
    author = (pull.get("user") or {}).get("login")
    config = await bot.repo_configs.get(gh, repo=repo, slug=bot.identity.slug)
    taken: list[Overrule] = []
    for item in threads:
        if item.thread.root_comment_id not in disliked:
            continue
        reactions = await github.list_review_comment_reactions(
            gh, repo=repo, comment_id=item.thread.root_comment_id, content="-1"
        )
        for reaction in reactions:
            login = (reaction.get("user") or {}).get("login")
            if not login or is_bot_login(login, bot.identity):
                continue
            role = await role_on(gh, repo=repo, login=login, pr_author=author)
            if not may_overrule(severity_named(item.finding.severity), role):
                continue
            learned, problem = None, None
            if config.review.learn and role is Role.WRITER:
                learned, problem = await remember(
                    gh, bot, repo=repo, pr_number=pr_number, item=item, by=login, reason=""
                )
            taken.append(
                await withdraw_thread(
                    gh,
                    bot,
                    repo=repo,
                    pr_number=pr_number,
                    item=item,
                    by=login,
                    reason="",
                    comments=comments,
                    learned=learned,
                    learn_problem=problem,
                )
            )
            break
    return taken
