"""Answer a command: what a comment asks of the bot, checked once and done once.

``@slug review`` (or a plain ask such as "@slug can you take a look?"), ``@slug resolve`` and
``@slug help``. Whoever asks is checked once (someone who may not ask gets one polite answer per
PR, then silence), the comment gets one 👀, and then exactly one thing happens: a review, a
check of the bot's open threads, or the help text.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any, assert_never

from ..commands import HELP_TEXT, Command, parse_command, parse_forget
from ..events import IssueCommentEvent, ReviewCommentEvent
from ..github import calls as github
from ..github.client import GitHubClient
from ..guards import is_bot_login, may_ask
from ..review.rounds.markers import Trigger, carries, encode
from .bot import Bot
from .disputes import forget_text, learnings_text, take_thumbs_down
from .pause import pause_text
from .readiness import evaluate
from .review import review_pull
from .threads import verify_threads

log = logging.getLogger(__name__)


async def answer_command(
    gh: GitHubClient,
    bot: Bot,
    comment: IssueCommentEvent | ReviewCommentEvent,
    *,
    repo: str,
    pr_number: int,
    reaction: str,
    thread_root: int | None,
    received_at: float,
) -> None:
    """Parse the comment's command (the only place that does), check who asks, then act once: a
    review, a check of the bot's threads, or one answer (in the thread it was asked in, if any).
    ``reaction`` is where the 👀 goes (``issue_comment`` or ``review_comment``)."""
    command = parse_command(comment.body, bot.identity.slug)
    if command is None:
        return
    if command is Command.OVERRULE and thread_root is not None:
        return  # a dispute in a thread: the threads concern answers it (usecases.disputes)
    if not await may_ask_here(gh, bot, comment, repo=repo, pr_number=pr_number):
        return
    if not within_budgets(bot, comment, repo=repo, pr_number=pr_number):
        return  # silence: not even a reaction (each one is a write)
    await github.react(gh, repo=repo, target=reaction, target_id=comment.comment_id, content="eyes")
    log.info("command %s", command.value)
    slug = bot.identity.slug
    where = thread_root
    match command:
        case Command.REVIEW:
            await review_pull(gh, bot, repo=repo, pr_number=pr_number, trigger=Trigger.MENTION)
            return
        case Command.RESOLVE:
            await take_thumbs_down(gh, bot, repo=repo, pr_number=pr_number)
            await verify_threads(
                gh, bot, repo=repo, pr_number=pr_number, claimed=True, asked_by=comment.commenter_login
            )
            return
        case Command.PAUSE | Command.RESUME:
            await answer_pause(
                gh, bot, comment, repo=repo, pr_number=pr_number, pause=command is Command.PAUSE
            )
            return
        case Command.STATUS:
            await answer_status(gh, bot, comment, repo=repo, pr_number=pr_number, thread_root=thread_root)
            return
        case Command.OVERRULE:
            text = f"To overrule a finding, reply `@{slug} dismiss <reason>` in its thread."
            where = None
        case Command.LEARNINGS:
            text = await learnings_text(bot, repo=repo)
        case Command.FORGET:
            number = parse_forget(comment.body, slug)
            text = await forget_text(gh, bot, repo=repo, login=comment.commenter_login or "", number=number)
        case Command.HELP:
            text = HELP_TEXT.format(slug=slug, decoy=bot.identity.decoy_login)
        case _:
            assert_never(command)
    # An answer that reads the same as one given (the help, the same learnings) is given once.
    key = (
        f"{command.value}:{answer_key(text)}"
        if command in SAME_ANSWER_ONCE
        else f"{command.value}:{comment.comment_id}"
    )
    await say_once(gh, bot, repo=repo, pr_number=pr_number, key=key, text=text, thread_root=where)


# Commands whose answer depends only on what it says: asked again while nothing changed (the same
# head, the same learnings), the answer already given stands (status is keyed the same way).
SAME_ANSWER_ONCE = frozenset({Command.HELP, Command.LEARNINGS, Command.OVERRULE})


def answer_key(text: str) -> str:
    """What identifies an answer: a digest of its words."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def within_budgets(
    bot: Bot, comment: IssueCommentEvent | ReviewCommentEvent, *, repo: str, pr_number: int
) -> bool:
    """Whether a command may be acknowledged at all: within the person's and the pull request's
    budget of commands an hour, and without the share of the installation's content-creating
    budget kept for reviews (a flood of commands on one pull request never delays another's
    review). Counted here, once per command."""
    settings = bot.settings
    installation = comment.installation_id
    if installation is not None and not bot.writes.spare(
        installation, reserve=settings.write_reserve_for_reviews
    ):
        log.info("command left unanswered: the installation's writes are kept for reviews")
        return False
    person = (comment.commenter_login or "").casefold()
    if not bot.commands.take((repo.lower(), pr_number, person), settings.command_budget_per_person):
        log.info("command left unanswered: %s is over the budget on this pull request", person)
        return False
    if not bot.commands.take((repo.lower(), pr_number), settings.command_budget_per_pull):
        log.info("command left unanswered: the pull request is over its budget of commands")
        return False
    return True


async def may_ask_here(
    gh: GitHubClient, bot: Bot, comment: IssueCommentEvent | ReviewCommentEvent, *, repo: str, pr_number: int
) -> bool:
    """Whether the commenter may ask the bot here (the repository's ``review.allowed_associations``);
    someone who may not is answered once per PR."""
    config = await bot.repo_configs.get(gh, repo=repo, slug=bot.identity.slug)
    if may_ask(
        commenter=comment.commenter_login,
        association=comment.commenter_association,
        pr_author=comment.author_login,
        allowed=config.review.allowed_associations,
    ):
        return True
    await refuse_once(gh, bot, repo=repo, pr_number=pr_number, login=comment.commenter_login or "someone")
    return False


async def answer_pause(
    gh: GitHubClient,
    bot: Bot,
    comment: IssueCommentEvent | ReviewCommentEvent,
    *,
    repo: str,
    pr_number: int,
    pause: bool,
) -> None:
    """Pause or resume, answered in the conversation even when asked in a thread: the state is
    read from there."""
    # The conversation holds the state and the answers said before: read once for both.
    conversation = await github.list_issue_comments(gh, repo=repo, number=pr_number)
    text, record = await pause_text(
        gh, bot, repo=repo, conversation=conversation, login=comment.commenter_login or "", pause=pause
    )
    await say_once(
        gh,
        bot,
        repo=repo,
        pr_number=pr_number,
        key=f"{(Command.PAUSE if pause else Command.RESUME).value}:{comment.comment_id}",
        text=text,
        thread_root=None,
        markers=(record,) if record else (),
        conversation=conversation,
    )


async def answer_status(
    gh: GitHubClient,
    bot: Bot,
    comment: IssueCommentEvent | ReviewCommentEvent,
    *,
    repo: str,
    pr_number: int,
    thread_root: int | None,
) -> None:
    """The readiness call right now, in the same words as the sticky comment (which it updates
    where the pull request is followed)."""
    evaluation = None
    if comment.installation_id is not None:
        evaluation = await evaluate(
            gh,
            bot,
            repo=repo,
            pr_number=pr_number,
            installation_id=comment.installation_id,
            since=None,
            asked=True,
        )
    text = (
        evaluation.text
        if evaluation
        else "I follow open pull requests only (drafts where the repository asks)."
    )
    await say_once(
        gh,
        bot,
        repo=repo,
        pr_number=pr_number,
        key=f"status:{answer_key(text)}",  # the same call, asked again: answered once
        text=text,
        thread_root=thread_root,
    )


async def refuse_once(gh: GitHubClient, bot: Bot, *, repo: str, pr_number: int, login: str) -> None:
    """At most one polite answer per PR and person; after that, silence (never a reply war)."""
    text = (
        f"@{login} thanks for asking, but I review on request of the pull request's author and of "
        "the repository's owners, members and collaborators."
    )
    await say_once(
        gh,
        bot,
        repo=repo,
        pr_number=pr_number,
        key=f"refused:{login.casefold()}",
        text=text,
        thread_root=None,
    )


async def say_once(
    gh: GitHubClient,
    bot: Bot,
    *,
    repo: str,
    pr_number: int,
    key: str,
    text: str,
    thread_root: int | None,
    markers: tuple[str, ...] = (),
    conversation: Sequence[Mapping[str, Any]] | None = None,
) -> None:
    """Post ``text`` unless the bot already posted it for ``key`` (a retried job must not repeat it).
    ``markers``: more of the bot's hidden markers for the body's trailer (a pause record).
    ``conversation``: the PR's comments, when the caller has just read them."""
    marker = encode("note", key=key)
    if conversation is None:
        conversation = await github.list_issue_comments(gh, repo=repo, number=pr_number)
    for comment in conversation:
        if is_bot_login((comment.get("user") or {}).get("login"), bot.identity) and carries(
            comment.get("body"), marker
        ):
            return
    body = f"{text}\n\n" + "\n".join([*markers, marker])
    if thread_root is not None:
        await github.reply_to_review_comment(
            gh, repo=repo, pr_number=pr_number, comment_id=thread_root, body=body
        )
    else:
        await github.create_issue_comment(gh, repo=repo, number=pr_number, body=body)
