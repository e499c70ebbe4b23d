"""Thread resolution: whoever opened a thread closes it, and only once the fix is verified.

The bot resolves only threads whose root comment it wrote, only after re-running the analysis
at the PR's current head and finding the problem gone. It checks when someone replies in one of
its threads, when new commits arrive, when asked with ``@slug resolve`` (dispatched by
``mentions.py``), and after a re-review.
A reply that claims a fix which is not there gets one answer in that thread per head commit; a
reply that argues ("this is intentional because ...") changes nothing. Threads of anyone else
are never touched, a resolved thread is never resolved again, and nothing is ever unresolved.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gidgethub import routing

from .. import github
from ..commands import claims_fix
from ..events import PullRequestEvent, ReviewCommentEvent
from ..github import ReviewThread
from ..guards import is_bot_author, is_bot_login
from ..review import decide
from ..review.markers import FindingMarker, encode
from ..review.model import ReviewResult
from ..routing import Context
from .common import analyse, build_context

log = logging.getLogger(__name__)

router = routing.Router()


@router.register("pull_request_review_comment", action="created")
async def on_thread_reply(event: ReviewCommentEvent, ctx: Context) -> None:
    """A reply in a thread the bot opened is a cue to check that thread at the current head."""
    if event.in_reply_to_id is None or event.repo is None:
        return
    root = await github.get_review_comment(ctx.gh, repo=event.repo, comment_id=event.in_reply_to_id)
    if not is_bot_login((root.get("user") or {}).get("login"), ctx.identity):
        return
    await verify_threads(
        ctx,
        repo=event.repo,
        pr_number=event.pr_number,
        root_comment_id=event.in_reply_to_id,
        claimed=claims_fix(event.body),
        acknowledge=True,
    )


@router.register("pull_request", action="synchronize")
async def on_new_commits(event: PullRequestEvent, ctx: Context) -> None:
    if event.repo is not None:
        await verify_threads(ctx, repo=event.repo, pr_number=event.pr_number)


@dataclass(frozen=True, slots=True)
class OpenThread:
    thread: ReviewThread
    finding: FindingMarker


async def open_bot_threads(
    ctx: Context, *, repo: str, pr_number: int, root_comment_id: int | None = None
) -> list[OpenThread]:
    """The bot's unresolved threads that carry a finding; with ``root_comment_id``, just that one
    (pages are read only until it is found)."""
    found = []
    async for thread in github.iter_review_threads(ctx.gh, repo=repo, pr_number=pr_number):
        if root_comment_id is not None and thread.root_comment_id != root_comment_id:
            continue
        if not thread.is_resolved and is_bot_author(
            thread.root_author_type, thread.root_author_login, ctx.identity
        ):
            markers = FindingMarker.read_all(thread.root_body)
            if markers:
                found.append(OpenThread(thread=thread, finding=markers[0]))
        if root_comment_id is not None:
            break
    return found


async def verify_threads(
    ctx: Context,
    *,
    repo: str,
    pr_number: int,
    root_comment_id: int | None = None,
    claimed: bool = False,
    acknowledge: bool = False,
    pull: Mapping[str, Any] | None = None,
    result: ReviewResult | None = None,
    threads: Sequence[OpenThread] | None = None,
) -> None:
    """Check the bot's open threads at the PR's head; resolve the fixed ones.

    ``claimed``: someone said the problems are fixed, so a problem still there is answered in
    its thread (once per head). ``acknowledge``: after resolving, say in the thread which commit
    fixed it (useful when someone replied; a push needs no words). ``threads``: the bot's open
    threads when the caller has just read them.
    """
    if threads is None:
        threads = await open_bot_threads(ctx, repo=repo, pr_number=pr_number, root_comment_id=root_comment_id)
    threads = [t for t in threads if decide.verifiable(t.finding)]
    if not threads:
        return
    if pull is None:
        pull = await github.get_pull(ctx.gh, repo=repo, pr_number=pr_number)
    if pull.get("state") != "open":
        return
    head_sha = str(pull["head"]["sha"])
    if result is None:
        config = await ctx.repo_configs.get(ctx.gh, repo=repo, slug=ctx.identity.slug)
        result = await analyse(ctx, await build_context(ctx.gh, repo=repo, pull=pull, config=config))
    earlier_replies: list[dict[str, Any]] | None = None
    for item in threads:
        status = decide.thread_status(item.finding, result)
        if status == "unknown":
            log.info(
                "thread %s: %s was not analysed at %s; leaving it",
                item.thread.node_id,
                item.finding.path,
                head_sha[:12],
            )
            continue
        if status == "fixed":
            if await github.resolve_review_thread(ctx.gh, thread_node_id=item.thread.node_id):
                log.info(
                    "resolved thread %s (%s) at %s", item.thread.node_id, item.finding.rule, head_sha[:12]
                )
                if acknowledge:
                    await say_in_thread(
                        ctx,
                        repo=repo,
                        pr_number=pr_number,
                        item=item,
                        key=f"fixed:{head_sha}",
                        text=f"Verified fixed at {head_sha[:12]}.",
                        earlier=earlier_replies,
                    )
            else:
                log.warning("GitHub did not confirm resolving thread %s", item.thread.node_id)
        elif claimed:
            if earlier_replies is None:
                earlier_replies = await github.list_pull_review_comments(
                    ctx.gh, repo=repo, pr_number=pr_number
                )
            await say_in_thread(
                ctx,
                repo=repo,
                pr_number=pr_number,
                item=item,
                key=f"still-open:{head_sha}",
                text=(
                    f"Still there at {head_sha[:12]}: `{item.finding.rule}` in `{item.finding.path}`. "
                    "I resolve this thread once the change is pushed."
                ),
                earlier=earlier_replies,
            )


async def say_in_thread(
    ctx: Context,
    *,
    repo: str,
    pr_number: int,
    item: OpenThread,
    key: str,
    text: str,
    earlier: list[dict[str, Any]] | None,
) -> None:
    """Reply in the thread unless the bot already said this there (a retried job, or a second
    "fixed" for the same head)."""
    marker = encode("note", key=key, thread=item.thread.root_comment_id)
    if earlier is None:
        earlier = await github.list_pull_review_comments(ctx.gh, repo=repo, pr_number=pr_number)
    for comment in earlier:
        if (
            comment.get("in_reply_to_id") == item.thread.root_comment_id
            and is_bot_login((comment.get("user") or {}).get("login"), ctx.identity)
            and marker in (comment.get("body") or "")
        ):
            return
    await github.reply_to_review_comment(
        ctx.gh,
        repo=repo,
        pr_number=pr_number,
        comment_id=item.thread.root_comment_id,
        body=f"{text}\n\n{marker}",
    )
