"""Mentions: what a comment asks of the bot, parsed once and dispatched from here, once.

``@slug review`` (or a plain ask such as "@slug can you take a look?"), ``@slug resolve`` and
``@slug help``, in the conversation or in an inline comment. Whoever asks is checked once
(someone who may not ask gets one polite answer per PR, then silence), the comment gets one 👀,
and then exactly one thing happens: a review, a check of the bot's open threads, or the help
text. No other concern parses commands, so ``resolve`` can never also trigger a review.
"""

from __future__ import annotations

import logging
from typing import assert_never

from gidgethub import routing

from .. import github
from ..commands import HELP_TEXT, Command, parse_command
from ..events import IssueCommentEvent, ReviewCommentEvent
from ..guards import is_bot_login
from ..review.markers import encode
from ..routing import Context
from .common import may_ask
from .review import review_pull
from .threads import verify_threads

log = logging.getLogger(__name__)

router = routing.Router()


@router.register("issue_comment", action="created")
async def on_conversation_comment(event: IssueCommentEvent, ctx: Context) -> None:
    if not event.is_pull_request or event.repo is None or event.pr_number is None:
        return
    await answer_mention(
        ctx, event, repo=event.repo, pr_number=event.pr_number, reaction="issue_comment", thread_root=None
    )


@router.register("pull_request_review_comment", action="created")
async def on_inline_comment(event: ReviewCommentEvent, ctx: Context) -> None:
    if event.repo is None:
        return
    await answer_mention(
        ctx,
        event,
        repo=event.repo,
        pr_number=event.pr_number,
        reaction="review_comment",
        thread_root=event.in_reply_to_id or event.comment_id,
    )


async def answer_mention(
    ctx: Context,
    comment: IssueCommentEvent | ReviewCommentEvent,
    *,
    repo: str,
    pr_number: int,
    reaction: str,
    thread_root: int | None,
) -> None:
    """Parse the comment's command (the only place that does), check who asks, then act once.
    ``reaction`` is where the 👀 goes (``issue_comment`` or ``review_comment``)."""
    command = parse_command(comment.body, ctx.identity.slug)
    if command is None:
        return
    config = await ctx.repo_configs.get(ctx.gh, repo=repo, slug=ctx.identity.slug)
    if not may_ask(
        commenter=comment.commenter_login,
        association=comment.commenter_association,
        pr_author=comment.author_login,
        config=config,
    ):
        await refuse_once(ctx, repo=repo, pr_number=pr_number, login=comment.commenter_login or "someone")
        return
    await github.react(ctx.gh, repo=repo, target=reaction, target_id=comment.comment_id, content="eyes")
    log.info("command %s", command.value)
    match command:
        case Command.REVIEW:
            await review_pull(ctx, repo=repo, pr_number=pr_number, trigger="mention")
        case Command.RESOLVE:
            await verify_threads(ctx, repo=repo, pr_number=pr_number, claimed=True)
        case Command.HELP:
            text = HELP_TEXT.format(slug=ctx.identity.slug, decoy=ctx.identity.decoy_login)
            key = f"help:{comment.comment_id}"
            await say_once(ctx, repo=repo, pr_number=pr_number, key=key, text=text, thread_root=thread_root)
        case _:
            assert_never(command)


async def refuse_once(ctx: Context, *, repo: str, pr_number: int, login: str) -> None:
    """At most one polite answer per PR and person; after that, silence (never a reply war)."""
    text = (
        f"@{login} thanks for asking, but I review on request of the pull request's author and of "
        "the repository's owners, members and collaborators."
    )
    await say_once(
        ctx, repo=repo, pr_number=pr_number, key=f"refused:{login.casefold()}", text=text, thread_root=None
    )


async def say_once(
    ctx: Context, *, repo: str, pr_number: int, key: str, text: str, thread_root: int | None
) -> None:
    """Post ``text`` unless the bot already posted it for ``key`` (a retried job must not repeat it)."""
    marker = encode("note", key=key)
    for comment in await github.list_issue_comments(ctx.gh, repo=repo, number=pr_number):
        if is_bot_login((comment.get("user") or {}).get("login"), ctx.identity) and marker in (
            comment.get("body") or ""
        ):
            return
    body = f"{text}\n\n{marker}"
    if thread_root is not None:
        await github.reply_to_review_comment(
            ctx.gh, repo=repo, pr_number=pr_number, comment_id=thread_root, body=body
        )
    else:
        await github.create_issue_comment(ctx.gh, repo=repo, number=pr_number, body=body)
