"""Verify and resolve the bot's threads: whoever opened a thread closes it, once the fix is verified.

The bot resolves only threads whose root comment it wrote, only after re-running the analysis
at the PR's current head and finding the problem gone. A reply (``usecases.replies``) that
claims a fix which is not there gets one answer in that thread per head commit; one that argues
changes nothing; a dispute ("intentional", "false positive") is ``usecases.disputes``'s. Threads
of anyone else are never touched, a resolved thread is never resolved again, and nothing is ever
unresolved. The model's own findings (``llm/...``) can only be judged by the model reviewer.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .. import metrics
from ..commands import claims_fix, only_a_command
from ..github import calls as github
from ..github.client import GitHubClient
from ..guards import BotIdentity, is_bot_author, is_bot_login, may_ask
from ..review.core.model import ChangedFile, Reviewer, ReviewResult, Severity, ThreadQuestion, ThreadStatus
from ..review.engine.inert import code, escape
from ..review.llm.prompt import hunk_listing, numbered
from ..review.rounds import decide
from ..review.rounds.identity import renames_in
from ..review.rounds.markers import FindingMarker, carries, encode
from ..review.rounds.overrule import severity_named
from ..settings.repoconfig import RepoConfig
from .bot import Bot
from .pull import analyse, build_context

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class OpenThread:
    thread: github.ReviewThread
    finding: FindingMarker  # the one the comment leads with (what a dispute in it is about)
    also: tuple[FindingMarker, ...] = ()  # the others it holds: on its line, the same elsewhere

    @property
    def markers(self) -> tuple[FindingMarker, ...]:
        return (*self.also, self.finding)

    @classmethod
    def read(cls, thread: github.ReviewThread) -> OpenThread | None:
        """The findings the root comment holds, from its markers: one (what every comment said
        before comments held several), or several, the lead's last. None: it holds none."""
        markers = FindingMarker.read_all(thread.root_body)
        if not markers:
            return None
        return cls(thread=thread, finding=markers[-1], also=tuple(markers[:-1]))

    @property
    def severity(self) -> Severity:
        """The most severe finding it holds: who may overrule the thread (all of it) is decided by it."""
        return max(severity_named(m.severity) for m in self.markers)


async def open_bot_threads(
    gh: GitHubClient, identity: BotIdentity, *, repo: str, pr_number: int, root_comment_id: int | None = None
) -> list[OpenThread]:
    """The bot's unresolved threads that carry a finding; with ``root_comment_id``, just that one."""
    found = []
    async for thread in github.iter_review_threads(gh, repo=repo, pr_number=pr_number):
        if root_comment_id in (None, thread.root_comment_id):
            found += bot_threads([thread], identity)
            if root_comment_id is not None:
                break
    return found


def bot_threads(threads: Iterable[github.ReviewThread], identity: BotIdentity) -> list[OpenThread]:
    """Of ``threads`` (read already), the bot's unresolved ones that carry a finding."""
    ours = [t for t in threads if is_bot_author(t.root_author_type, t.root_author_login, identity)]
    return [item for t in ours if not t.is_resolved and (item := OpenThread.read(t)) is not None]


async def thread_renames(
    gh: GitHubClient,
    *,
    repo: str,
    head_sha: str,
    files: Sequence[ChangedFile],
    recorded: Iterable[tuple[str, str]],
    known: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Where the files of recorded findings (path, the head it was reported at: the bot's open
    threads, its overrules) went, old path -> new path: the renames of the PR's file list,
    ``known`` ones, and for a finding whose file is gone from the diff, GitHub's comparison of
    the head it was reported at with this head (once per such head)."""
    renames = {f.previous_path: f.path for f in files if f.previous_path}
    renames.update((known or {}).items())
    present = {f.path for f in files if f.status != "removed"}
    lost = sorted(
        {
            since
            for path, since in recorded
            if path not in present
            and path not in renames
            and since != head_sha
            and github.is_commit_sha(since)
        }
    )
    for since in lost:
        comparison = await github.compare_commits(gh, repo=repo, base=since, head=head_sha)
        if comparison is not None and comparison.get("status") == "ahead":
            for old, new in renames_in(comparison.get("files") or []).items():
                renames.setdefault(old, new)
    return renames


async def verify_threads(
    gh: GitHubClient,
    bot: Bot,
    *,
    repo: str,
    pr_number: int,
    root_comment_id: int | None = None,
    claimed: bool = False,
    acknowledge: bool = False,
    pull: Mapping[str, Any] | None = None,
    result: ReviewResult | None = None,
    threads: Sequence[OpenThread] | None = None,
    asked_by: str | None = None,
    renames: Mapping[str, str] | None = None,
) -> None:
    """Check the bot's open threads at the PR's head; resolve the fixed ones.

    ``claimed``: someone said the problems are fixed, so a problem still there is answered in
    its thread (once per head). ``acknowledge``: after resolving, say in the thread which commit
    fixed it (useful when someone replied; a push needs no words). ``threads``: the bot's open
    threads when the caller has just read them. ``asked_by``: who asked (a reply, a command),
    whose model budget a judgement counts against; the PR's author otherwise. ``renames``: where
    the threads' files went (``thread_renames``; read here when the analysis is).
    """
    if threads is None:
        threads = await open_bot_threads(
            gh, bot.identity, repo=repo, pr_number=pr_number, root_comment_id=root_comment_id
        )
    judge = bot.reviewer
    model_threads = [t for t in threads if not decide.verifiable(t.finding)] if judge.judges_threads() else []
    threads = [t for t in threads if decide.verifiable(t.finding)]
    if not threads and not model_threads:
        return
    pull = pull if pull is not None else await github.get_pull(gh, repo=repo, pr_number=pr_number)
    if pull.get("state") != "open":
        return
    head_sha = str(pull["head"]["sha"])
    if model_threads:
        await verify_model_threads(
            gh,
            bot,
            judge,
            repo=repo,
            pr_number=pr_number,
            head_sha=head_sha,
            threads=model_threads,
            claimed=claimed,
            acknowledge=acknowledge,
            asked_by=asked_by or (pull.get("user") or {}).get("login"),
            pr_author=(pull.get("user") or {}).get("login"),
        )
    if not threads:
        return
    if result is None:
        result, renames = await _analysed_at_head(
            gh, bot, repo=repo, pull=pull, threads=threads, renames=renames
        )
    earlier_replies: list[dict[str, Any]] | None = None
    for item in threads:
        status, still = _checked(item, result, renames)
        if status is ThreadStatus.CANNOT_TELL:
            where = (item.thread.node_id, item.finding.path, head_sha[:12])
            log.info("thread %s: %s was not analysed at %s; leaving it", *where)
            continue
        if status is not ThreadStatus.FIXED and claimed and earlier_replies is None:
            earlier_replies = await github.list_pull_review_comments(gh, repo=repo, pr_number=pr_number)
        await conclude(
            gh,
            bot,
            repo=repo,
            pr_number=pr_number,
            item=item,
            head_sha=head_sha,
            fixed=status is ThreadStatus.FIXED,
            claimed=claimed,
            acknowledge=acknowledge,
            fixed_text=f"Verified fixed at {head_sha[:12]}.",
            open_text=_still_there(still, head_sha),
            earlier=earlier_replies,
        )


def _checked(
    item: OpenThread, result: ReviewResult, renames: Mapping[str, str] | None
) -> tuple[ThreadStatus, list[FindingMarker]]:
    """A thread's status at head (of every finding it holds: ``decide.combined_status``), and
    those of its findings still reported there."""
    each = [decide.thread_status(m, result, renames) for m in item.markers]
    still = [m for m, status in zip(item.markers, each, strict=True) if status is ThreadStatus.NOT_FIXED]
    return decide.combined_status(each), still


def _still_there(markers: Sequence[FindingMarker], head_sha: str) -> str:
    """The answer to a claimed fix that is not there: what the thread holds that is still
    reported at head (of a comment that holds several findings, only those; the lead first)."""
    named = dict.fromkeys(f"{code(m.rule)} in {code(m.path)}" for m in reversed(markers))
    still = ", ".join(named)
    return f"Still there at {head_sha[:12]}: {still}. I resolve this thread once the change is pushed."


async def _analysed_at_head(
    gh: GitHubClient,
    bot: Bot,
    *,
    repo: str,
    pull: Mapping[str, Any],
    threads: Sequence[OpenThread],
    renames: Mapping[str, str] | None,
) -> tuple[ReviewResult, Mapping[str, str] | None]:
    """The analysis at the PR's head, and where the threads' files went (read with it unless
    known). Built-in findings are re-checked by the analyzers that made them, never by a model."""
    config = await bot.repo_configs.get(gh, repo=repo, slug=bot.identity.slug)
    pull_context = await build_context(gh, repo=repo, pull=pull, config=config, slug=bot.identity.slug)
    result = await analyse(pull_context, reviewer=bot.reviewer.mechanical(), analyses=bot.analyses)
    if renames is None:
        renames = await thread_renames(
            gh,
            repo=repo,
            head_sha=str(pull["head"]["sha"]),
            files=pull_context.files,
            recorded=[(m.path, m.head_sha) for t in threads for m in t.markers],
        )
    return result, renames


async def answer_reply(
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
    """A reply in one of the bot's threads: checked at head, if the replier may ask. A reply from
    anyone else triggers nothing (no thread judgement, no model call: a stranger cannot spend
    the installation's budget or steer a judgement)."""
    config = await bot.repo_configs.get(gh, repo=repo, slug=bot.identity.slug)
    if not may_ask(
        commenter=commenter,
        association=association,
        pr_author=pr_author,
        allowed=config.review.allowed_associations,
    ):
        log.info("reply by %s in thread %s: may not ask; not checking it", commenter, root_comment_id)
        return
    await verify_threads(
        gh,
        bot,
        repo=repo,
        pr_number=pr_number,
        root_comment_id=root_comment_id,
        claimed=claims_fix(body),
        acknowledge=True,
        asked_by=commenter,
    )


async def conclude(
    gh: GitHubClient,
    bot: Bot,
    *,
    repo: str,
    pr_number: int,
    item: OpenThread,
    head_sha: str,
    fixed: bool,
    claimed: bool,
    acknowledge: bool,
    fixed_text: str,
    open_text: str,
    earlier: list[dict[str, Any]] | None,
) -> None:
    """Resolve a fixed thread (and say so when someone replied); answer a claimed fix that is not
    there, once per head."""
    if fixed:
        if await github.resolve_review_thread(gh, thread_node_id=item.thread.node_id):
            metrics.THREADS_RESOLVED.inc()
            log.info("resolved thread %s (%s) at %s", item.thread.node_id, item.finding.rule, head_sha[:12])
            if acknowledge:
                await say_in_thread(
                    gh,
                    bot,
                    repo=repo,
                    pr_number=pr_number,
                    item=item,
                    key=f"fixed:{head_sha}",
                    text=fixed_text,
                    earlier=earlier,
                )
        else:
            log.warning("GitHub did not confirm resolving thread %s", item.thread.node_id)
    elif claimed:
        await say_in_thread(
            gh,
            bot,
            repo=repo,
            pr_number=pr_number,
            item=item,
            key=f"still-open:{head_sha}",
            text=open_text,
            earlier=earlier,
        )


async def say_in_thread(
    gh: GitHubClient,
    bot: Bot,
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
        earlier = await github.list_pull_review_comments(gh, repo=repo, pr_number=pr_number)
    for comment in earlier:
        if (
            comment.get("in_reply_to_id") == item.thread.root_comment_id
            and is_bot_login((comment.get("user") or {}).get("login"), bot.identity)
            and carries(comment.get("body"), marker)
        ):
            return
    await github.reply_to_review_comment(
        gh,
        repo=repo,
        pr_number=pr_number,
        comment_id=item.thread.root_comment_id,
        body=f"{text}\n\n{marker}",
    )


# ------------------------------------------------------------------ the model's own findings
MODEL_CONTEXT_LINES = 40
MAX_REPLY_CHARS = 800
MAX_REASON_CHARS = 400  # of the model's reason, quoted in its answer


def thread_replies(
    comments: Sequence[Mapping[str, Any]],
    item: OpenThread,
    identity: BotIdentity,
    *,
    pr_author: str | None,
    config: RepoConfig,
) -> list[str]:
    """The replies in one of the bot's threads by people who may ask (the PR's author, and the
    associations the repository allows), "login: text", oldest first (capped). A stranger's reply
    is never shown to a model, nor part of what its answer is cached by; nor is a reply that only
    gives the bot a command (``@slug review`` asked again must not make the answer a new one)."""
    return [
        f"{(c.get('user') or {}).get('login')}: {str(c.get('body') or '')[:MAX_REPLY_CHARS]}"
        for c in comments
        if c.get("in_reply_to_id") == item.thread.root_comment_id
        and not is_bot_login((c.get("user") or {}).get("login"), identity)
        and not only_a_command(c.get("body"), identity.slug)
        and may_ask(
            commenter=(c.get("user") or {}).get("login"),
            association=c.get("author_association"),
            pr_author=pr_author,
            allowed=config.review.allowed_associations,
        )
    ]


def finding_text(root_body: str) -> str:
    """The visible first line of the bot's comment: severity, rule and message."""
    first = next((line for line in root_body.splitlines() if line.strip()), "")
    return first.replace("**", "")


async def verify_model_threads(
    gh: GitHubClient,
    bot: Bot,
    judge: Reviewer,
    *,
    repo: str,
    pr_number: int,
    head_sha: str,
    threads: Sequence[OpenThread],
    claimed: bool,
    acknowledge: bool,
    asked_by: str | None,
    pr_author: str | None,
) -> None:
    """The model's findings (``llm/...``) can only be judged by a model: for each open thread it
    answers fixed / not fixed / cannot tell, given the finding, the replies and the code at head.
    Only "fixed" resolves; "not fixed" answers a claimed fix once per head; "cannot tell" does
    nothing. A reply is evidence of nothing: the model is told so, and judges the code. A thread
    reported at this head is not fixed, and asked about nothing; the answers are kept by thread,
    head, code and replies (``llm.judge``), so asking again at a head costs no model call."""
    files = {str(f["filename"]): f for f in await github.list_pull_files(gh, repo=repo, pr_number=pr_number)}
    comments = await github.list_pull_review_comments(gh, repo=repo, pr_number=pr_number)
    config = await bot.repo_configs.get(gh, repo=repo, slug=bot.identity.slug)
    wanted = [
        t.finding.path
        for t in threads
        if t.finding.path in files
        and files[t.finding.path].get("status") != "removed"
        and t.finding.head_sha != head_sha
    ]
    blobs = await github.read_blobs(gh, repo=repo, ref=head_sha, paths=wanted) if wanted else {}
    for item in threads:
        changed = files.get(item.finding.path)
        blob = blobs.get(item.finding.path)
        if changed is None or changed.get("status") == "removed":
            status, reason = ThreadStatus.FIXED, "the change to this file is gone at this head"
        elif item.finding.head_sha == head_sha:
            # Reported at this very head: the code is what the model flagged; nothing to ask.
            status, reason = ThreadStatus.NOT_FIXED, "nothing was pushed since I reported it."
        else:
            answer = await judge.judge_thread(
                ThreadQuestion(
                    repo=repo,
                    pr_number=pr_number,
                    thread_id=item.thread.root_comment_id,
                    head_sha=head_sha,
                    finding=f"{item.finding.path}:{item.finding.line}: {finding_text(item.thread.root_body)}",
                    code=code_at_head(
                        blob.text if blob is not None else None,
                        patch=str(changed.get("patch") or ""),
                        line=item.thread.line or item.finding.line,
                    ),
                    replies=tuple(
                        thread_replies(comments, item, bot.identity, pr_author=pr_author, config=config)
                    ),
                    installation_id=gh.installation_id,
                    asked_by=asked_by,
                )
            )
            if answer is None or answer.status is ThreadStatus.CANNOT_TELL:
                log.info(
                    "thread %s: the model cannot tell at %s; leaving it", item.thread.node_id, head_sha[:12]
                )
                continue
            status, reason = answer.status, answer.reason
        fixed_text, open_text = model_answers(head_sha, reason)
        await conclude(
            gh,
            bot,
            repo=repo,
            pr_number=pr_number,
            item=item,
            head_sha=head_sha,
            fixed=status is ThreadStatus.FIXED,
            claimed=claimed,
            acknowledge=acknowledge,
            fixed_text=fixed_text,
            open_text=open_text,
            earlier=comments,
        )


def model_answers(head_sha: str, reason: str) -> tuple[str, str]:
    """What the bot says in a thread the model judged, fixed and not fixed: the model's reason
    (its words rest on the PR's code and replies) quoted as inert text."""
    said = escape(reason[:MAX_REASON_CHARS])
    return (
        f"Looks fixed at {head_sha[:12]}: {said}",
        f"Still there at {head_sha[:12]}, as far as I can tell: {said} "
        "I resolve this thread once the change is pushed.",
    )


def code_at_head(text: str | None, *, patch: str, line: int) -> str:
    """The file around the thread's line, numbered, and the file's current diff."""
    parts: list[str] = []
    if text is not None:
        lines = text.splitlines()
        first, last = max(1, line - MODEL_CONTEXT_LINES), min(len(lines), line + MODEL_CONTEXT_LINES)
        parts.append(f"Lines {first}-{last} at head:")
        parts += numbered(lines, range(first, last + 1))
    else:
        parts.append("(the file's text at head could not be read)")
    parts.append("The file's diff in this pull request (head line numbers):")
    parts += hunk_listing(patch)
    return "\n".join(parts)
