"""Thread resolution triggers: a reply in one of the bot's threads, and new commits.

Whether the reply is in one of the bot's threads, and whether it disputes the finding, is
``usecases.replies.reply_in_thread``'s to find out (it reads the thread's first comment).

The bot also checks its threads when asked with ``@slug resolve`` (``mentions.py``) and after a
re-review (``usecases.review``); what checking means is ``usecases.threads.verify_threads``.
"""

from __future__ import annotations

from ..events import PullRequestEvent, ReviewCommentEvent
from ..usecases.replies import reply_in_thread
from ..usecases.threads import verify_threads
from .concern import OrderedRouter
from .context import Context

router = OrderedRouter()


@router.register("pull_request_review_comment", action="created")
async def on_thread_reply(event: ReviewCommentEvent, ctx: Context) -> None:
    """A reply to a review comment: a dispute, or a cue to check the thread at the current head,
    when the thread is the bot's (``reply_in_thread``)."""
    if event.in_reply_to_id is None or event.repo is None:
        return
    await reply_in_thread(
        ctx.gh,
        ctx.bot,
        repo=event.repo,
        pr_number=event.pr_number,
        root_comment_id=event.in_reply_to_id,
        body=event.body,
        commenter=event.commenter_login,
        association=event.commenter_association,
        pr_author=event.author_login,
    )


@router.register("pull_request", action="synchronize")
async def on_new_commits(event: PullRequestEvent, ctx: Context) -> None:
    if event.repo is not None:
        await verify_threads(ctx.gh, ctx.bot, repo=event.repo, pr_number=event.pr_number)
