"""Mentions: a comment that may hold a command, in the conversation or in an inline comment.

The command is parsed, and whoever asks is checked, in one place (``usecases.commands``), so
``resolve`` can never also trigger a review. No other concern parses commands.
"""

from __future__ import annotations

from ..events import IssueCommentEvent, ReviewCommentEvent
from ..usecases.commands import answer_command
from .concern import OrderedRouter
from .context import Context

router = OrderedRouter()


@router.register("issue_comment", action="created")
async def on_conversation_comment(event: IssueCommentEvent, ctx: Context) -> None:
    if not event.is_pull_request or event.repo is None or event.pr_number is None:
        return
    await answer_command(
        ctx.gh,
        ctx.bot,
        event,
        repo=event.repo,
        pr_number=event.pr_number,
        reaction="issue_comment",
        thread_root=None,
        received_at=ctx.received_at,
    )


@router.register("pull_request_review_comment", action="created")
async def on_inline_comment(event: ReviewCommentEvent, ctx: Context) -> None:
    if event.repo is None:
        return
    await answer_command(
        ctx.gh,
        ctx.bot,
        event,
        repo=event.repo,
        pr_number=event.pr_number,
        reaction="review_comment",
        thread_root=event.in_reply_to_id or event.comment_id,
        received_at=ctx.received_at,
    )
