"""Thread resolution triggers: a reply in one of the bot's threads, and new commits.

A reply that disputes the finding (``commands.parse_dispute``) goes to ``usecases.disputes``
instead: someone who may overrule it withdraws it.

The bot also checks its threads when asked with ``@slug resolve`` (``mentions.py``) and after a
re-review (``usecases.review``); what checking means is ``usecases.threads.verify_threads``.
"""

from __future__ import annotations

from ..commands import parse_dispute
from ..events import PullRequestEvent, ReviewCommentEvent
from ..github import calls as github
from ..guards import is_bot_login
from ..usecases.disputes import dispute_finding
from ..usecases.threads import answer_reply, verify_threads
from .concern import OrderedRouter
from .context import Context

router = OrderedRouter()


@router.register("pull_request_review_comment", action="created")
async def on_thread_reply(event: ReviewCommentEvent, ctx: Context) -> None:
    """A reply in a thread the bot opened is a cue to check that thread at the current head
    (if the replier may ask: ``answer_reply``)."""
    if event.in_reply_to_id is None or event.repo is None:
        return
    root = await github.get_review_comment(ctx.gh, repo=event.repo, comment_id=event.in_reply_to_id)
    if not is_bot_login((root.get("user") or {}).get("login"), ctx.bot.identity):
        return
    dispute = parse_dispute(event.body, ctx.bot.identity.slug)
    if dispute is not None and event.commenter_login:
        await dispute_finding(
            ctx.gh,
            ctx.bot,
            repo=event.repo,
            pr_number=event.pr_number,
            root_comment_id=event.in_reply_to_id,
            login=event.commenter_login,
            dispute=dispute,
        )
        return
    await answer_reply(
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
