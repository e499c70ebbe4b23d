"""A reply in a review thread: the bot's business only when the thread is the bot's.

A reply that disputes the finding (``commands.parse_dispute``) goes to ``disputes``: someone who
may overrule it withdraws it. Any other reply is a cue to check that thread at the current head
(``threads.answer_reply``, if the replier may ask).
"""

from __future__ import annotations

from ..commands import parse_dispute
from ..github import calls as github
from ..github.client import GitHubClient
from ..guards import is_bot_login
from .bot import Bot
from .disputes import dispute_finding
from .threads import answer_reply


async def reply_in_thread(
    gh: GitHubClient,
    bot: Bot,
    *,
    repo: str,
    pr_number: int,
    root_comment_id: int,
    body: str,
    commenter: str | None,
    association: str | None,
    pr_author: str | None,
) -> None:
    """``root_comment_id``: the comment the reply answers, the thread's first (the event names
    only its id, so who wrote it is read from GitHub)."""
    root = await github.get_review_comment(gh, repo=repo, comment_id=root_comment_id)
    if not is_bot_login((root.get("user") or {}).get("login"), bot.identity):
        return
    dispute = parse_dispute(body, bot.identity.slug)
    if dispute is not None and commenter:
        await dispute_finding(
            gh,
            bot,
            repo=repo,
            pr_number=pr_number,
            root_comment_id=root_comment_id,
            login=commenter,
            dispute=dispute,
        )
        return
    await answer_reply(
        gh,
        bot,
        repo=repo,
        pr_number=pr_number,
        root_comment_id=root_comment_id,
        body=body,
        commenter=commenter,
        association=association,
        pr_author=pr_author,
    )
