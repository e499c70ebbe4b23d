"""Review a pull request: one formal review with inline findings, and a check run beside it.

Whatever asked for it (a decoy or team review request, ``@slug review``, the check run's
"Re-run", an automatic trigger), the work is the same: re-read the PR and the bot's earlier
reviews from GitHub, decide whether this is a new review, a re-review of a sticky request for
changes, or a repeat of a request already answered; analyse; post; finish the check run. Jobs
of one PR run one at a time, so triggers that arrive while a review of the same head is queued
or running find it done and coalesce into it (``received_at`` is when this job's delivery
arrived).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import gidgethub

from .. import github, metrics
from ..config import MAX_INSTRUCTIONS_CHARS, RepoConfig
from ..github import GitHubClient
from ..guards import BotIdentity, is_bot_login
from ..review.core.diff import parse_patch
from ..review.core.model import ModelInputs, ModelOptions, PriorFinding, PullContext, ReviewResult, Verdict
from ..review.learnings import Learning, prompt_context
from ..review.output import render
from ..review.overrule import Overrule, severity_named, withdraw
from ..review.rounds import decide
from ..review.rounds.identity import Delta, Scope, delta_of
from ..review.rounds.markers import FindingMarker, ReviewMarker, Trigger
from .bot import Bot
from .decoy import drop_decoy
from .overrules import recorded_overrules, reported_at, take_reactions
from .pause import note_paused, read_paused_by
from .pull import analyse, build_context
from .threads import (
    OpenThread,
    finding_text,
    open_bot_threads,
    thread_renames,
    thread_replies,
    verify_threads,
)

log = logging.getLogger(__name__)

ANNOTATIONS_PER_REQUEST = 50


def check_name(identity: BotIdentity) -> str:
    """The name of the bot's check run (``Re-run`` on it asks for a review again)."""
    return f"{identity.slug} review"


def policy_for(
    pull_context: PullContext, *, config: RepoConfig, approve: bool, identity: BotIdentity
) -> render.Policy:
    """The repository's ``review.approve`` overrides the deployment's ``REVIEW_APPROVE``."""
    return render.Policy(
        approve=approve if config.review.approve is None else config.review.approve,
        pr_by_bot=is_bot_login(pull_context.author_login, identity),
        max_comments=config.review.max_comments,
        inline_min_severity=severity_named(config.review.inline_min_severity.value),
        max_nits=config.review.max_nits,
    )


def plan_for(
    result: ReviewResult,
    pull_context: PullContext,
    *,
    policy: render.Policy,
    trigger: Trigger,
    identity: BotIdentity,
    rereview: render.Rereview | None = None,
    inline: bool = True,
    earlier: Earlier | None = None,
) -> render.ReviewPlan:
    """The review to post; ``inline=False`` puts every finding in the body (the fallback for a
    review GitHub refused). ``earlier``: what the bot's earlier reviews left (open threads, not
    posted again; the lines changed since, alone commented on)."""
    patches = {f.path: parse_patch(f.patch) for f in pull_context.files if inline and f.patch is not None}
    return render.plan_review(
        result,
        head_sha=pull_context.head_sha,
        commentable={path: lines.right_lines for path, lines in patches.items()},
        policy=policy,
        trigger=trigger,
        bot_name=identity.slug,
        rereview=rereview,
        issued_at=time.time(),
        changed={path: lines.added for path, lines in patches.items()},
        threads=[t.finding for t in earlier.threads] if earlier else (),
        renames=earlier.renames if earlier else None,
        delta=earlier.delta if earlier else None,
    )


@dataclass(frozen=True, slots=True)
class Earlier:
    """What the bot's earlier reviews of this PR left, re-read from GitHub: its open threads, where
    their files went, and the lines changed since its last reviewed head."""

    threads: Sequence[OpenThread] = ()
    renames: Mapping[str, str] = field(default_factory=dict)
    delta: Delta = field(default_factory=lambda: Delta(Scope.FULL))


@dataclass(slots=True)
class CheckRun:
    """The review's check run: its id once started, and whether the review completed it."""

    id: int | None = None
    completed: bool = False


async def review_pull(
    gh: GitHubClient,
    bot: Bot,
    *,
    repo: str,
    pr_number: int,
    trigger: Trigger,
    received_at: float,
    force: bool = False,
    only_if_blocked: bool = False,
    only_if_unblocks: bool = False,
) -> None:
    """Review the PR's current head, re-reading everything from GitHub first. ``received_at``
    (epoch seconds) is when the delivery that asked for it reached the webhook endpoint.

    If the bot's latest decision on the PR requested changes, this is a re-review and must
    re-decide: request changes again, approve, or (approval disabled) dismiss the old block.
    ``only_if_unblocks`` (after a finding was overruled): post nothing unless the block goes.
    Findings overruled on this PR, or left out by the repository's learnings, are withdrawn
    before the verdict (and counted in the review and the check run). A paused pull request
    (``usecases.pause``) gets no review.

    Whatever fails, a check run this started is completed (a retry of the job starts it again):
    it never stays ``in_progress``; except while the job waits for GitHub's rate limits
    (``RetryLater``, which is never a failed attempt): its retry finishes it, and completing it
    would be one more write against the limit it waits for.
    """
    check = CheckRun()
    waiting = False
    try:
        await _review_pull(
            gh,
            bot,
            check,
            repo=repo,
            pr_number=pr_number,
            trigger=trigger,
            received_at=received_at,
            force=force,
            only_if_blocked=only_if_blocked,
            only_if_unblocks=only_if_unblocks,
        )
    except github.RetryLater:
        waiting = True
        raise
    finally:
        if check.id is not None and not check.completed and not waiting:
            await abandon_check_run(gh, repo=repo, check_run_id=check.id)


async def _review_pull(
    gh: GitHubClient,
    bot: Bot,
    check: CheckRun,
    *,
    repo: str,
    pr_number: int,
    trigger: Trigger,
    received_at: float,
    force: bool,
    only_if_blocked: bool,
    only_if_unblocks: bool,
) -> None:
    pull = await github.get_pull(gh, repo=repo, pr_number=pr_number)
    if pull.get("state") != "open":
        log.info("not reviewing: the pull request is %s", pull.get("state"))
        return
    head_sha = str(pull["head"]["sha"])
    mine = decide.bot_reviews(await github.list_reviews(gh, repo=repo, pr_number=pr_number), bot.identity)
    block = decide.blocking_review(mine)
    if only_if_blocked and block is None:
        return
    loaded = await bot.repo_configs.load(gh, repo=repo, slug=bot.identity.slug)
    config = loaded.config
    existing = decide.review_of_head(mine, head_sha)
    if decide.coalesces(
        existing,
        received_at=received_at,
        blocked=block is not None,
        force=force,
        window=config.review.coalesce_seconds,
    ):
        log.info("head %s already reviewed; trigger %s coalesces into it", head_sha[:12], trigger)
        if trigger == Trigger.DECOY:
            await drop_decoy(gh, bot, repo=repo, pr_number=pr_number, pull=pull)
        return
    paused = await read_paused_by(gh, bot, repo=repo, pr_number=pr_number)
    if paused is not None:
        log.info("not reviewing: paused by %s", paused)
        await note_paused(
            gh,
            bot,
            repo=repo,
            pr_number=pr_number,
            head_sha=head_sha,
            name=check_name(bot.identity),
            by=paused,
            details_url=str(pull.get("html_url") or ""),
        )
        return
    check_run_id = check.id = (
        None
        if only_if_unblocks
        else await start_check_run(gh, bot, repo=repo, pr_number=pr_number, head_sha=head_sha)
    )
    pull_context = await build_context(gh, repo=repo, pull=pull, config=config, slug=bot.identity.slug)
    learned = await bot.learnings.of_repo(repo)
    open_threads: list[OpenThread] | None = None

    async def read_model_inputs() -> ModelInputs:
        nonlocal open_threads
        open_threads = await open_bot_threads(gh, bot, repo=repo, pr_number=pr_number)
        return await model_inputs(gh, bot, pull_context, config=config, threads=open_threads, learned=learned)

    pull_context = await bot.reviewer.prepare(pull_context, read_model_inputs)
    overruled: list[Overrule] = []
    threads: list[OpenThread] = []
    renames: dict[str, str] = {}
    delta = Delta(Scope.FULL)
    if mine:  # overrules and threads are the bot's: none before its first review
        comments = await github.list_pull_review_comments(gh, repo=repo, pr_number=pr_number)
        if open_threads is None:
            open_threads = await open_bot_threads(gh, bot, repo=repo, pr_number=pr_number)
        overruled = recorded_overrules(comments, bot)
        overruled += await take_reactions(
            gh, bot, repo=repo, pr_number=pr_number, pull=pull, comments=comments, threads=open_threads
        )
        withdrawn = {o.thread for o in overruled}
        threads = [t for t in open_threads if t.thread.root_comment_id not in withdrawn]
        delta = await review_delta(gh, repo=repo, since=decide.last_reviewed_head(mine), head_sha=head_sha)
        recorded = [(t.finding.path, t.finding.head_sha) for t in threads]
        renames = await thread_renames(
            gh,
            repo=repo,
            head_sha=head_sha,
            files=pull_context.files,
            recorded=recorded + reported_at(comments, bot, overruled),
            known=delta.renames,
        )
    result = withdraw(
        await analyse(pull_context, reviewer=bot.reviewer, analyses=bot.analyses),
        overruled=overruled,
        learned=[item.key for item in learned],
        line_text={f.path: parse_patch(f.patch).added_text for f in pull_context.files},
        changed=len(pull_context.files),
        renames=renames,
    )
    if only_if_unblocks and (block is None or result.verdict is Verdict.REQUEST_CHANGES or result.incomplete):
        log.info("an overrule leaves the verdict as it was at %s; nothing to post", head_sha[:12])
        await recount_check_run(gh, bot, repo=repo, head_sha=head_sha, result=result, overruled=overruled)
        return
    if check_run_id is None:
        check_run_id = check.id = await start_check_run(
            gh, bot, repo=repo, pr_number=pr_number, head_sha=head_sha
        )
    policy = policy_for(
        pull_context, config=config, approve=bot.settings.review_approve, identity=bot.identity
    )
    rereview = None
    if block is not None and not policy.pr_by_bot:
        rereview = await prepare_rereview(
            gh,
            repo=repo,
            pr_number=pr_number,
            block=block,
            result=result,
            renames=renames,
            overruled=overruled,
        )
    plan_with = partial(
        plan_for,
        result,
        pull_context,
        policy=policy,
        trigger=trigger,
        identity=bot.identity,
        earlier=Earlier(threads, renames, delta),
    )
    plan = plan_with(rereview=rereview)
    if rereview is not None and plan.event == "COMMENT" and not result.holds_block:
        # No blockers remain but approval is disabled or withheld: only dismissing clears the
        # sticky block. (An approval withheld for the model's silence or steering keeps it: a
        # person should look at this PR.)
        outcome = await dismiss_blocks(
            gh,
            repo=repo,
            pr_number=pr_number,
            mine=mine,
            head_sha=head_sha,
            overruled=bool(rereview.overruled),
        )
        rereview = replace(rereview, dismissal=outcome)
        plan = plan_with(rereview=rereview)
    posted = await post_review(
        gh,
        repo=repo,
        pr_number=pr_number,
        head_sha=head_sha,
        plan=plan,
        fallback=plan_with(rereview=rereview, inline=False),
    )
    metrics.REVIEWS.labels(verdict=plan.event.lower()).inc()
    log.info(
        "posted review %s (%s, %d inline) at %s",
        posted.get("id"),
        posted.get("state"),
        len(plan.comments),
        head_sha[:12],
    )
    await finish_check_run(
        gh, repo=repo, check_run_id=check_run_id, result=result, plan=plan, note=loaded.problem_note()
    )
    check.completed = True
    if threads:
        # The threads read before posting (those this review opened hold current findings):
        # each follows its finding, resolved once it is verified gone at this head.
        await verify_threads(
            gh,
            bot,
            repo=repo,
            pr_number=pr_number,
            pull=pull,
            result=result,
            threads=threads,
            renames=renames,
        )


async def model_inputs(
    gh: GitHubClient,
    bot: Bot,
    pull_context: PullContext,
    *,
    config: RepoConfig,
    threads: Sequence[OpenThread],
    learned: Sequence[Learning] = (),
) -> ModelInputs:
    """What only a model reviewer reads (``Reviewer.prepare`` asks for it): the repository's
    options and review instructions (the config's ``review.instructions`` and
    ``.github/{slug}-instructions.md``, both from the default branch, never from the PR's head,
    and capped), the bot's open findings with the replies in their threads, and the
    repository's learnings (from the database)."""
    inline = (config.review.instructions or "")[:MAX_INSTRUCTIONS_CHARS]
    from_file = await github.get_file_text(
        gh, repo=pull_context.repo, path=f".github/{bot.identity.slug}-instructions.md"
    )
    instructions = "\n\n".join(
        part.strip() for part in (inline, (from_file or "")[:MAX_INSTRUCTIONS_CHARS]) if part
    )
    llm = config.review.llm
    prior: list[PriorFinding] = []
    if threads:
        comments = await github.list_pull_review_comments(
            gh, repo=pull_context.repo, pr_number=int(pull_context.pr_number or 0)
        )
        for item in threads:
            replies = tuple(
                thread_replies(
                    comments, item, bot.identity, pr_author=pull_context.author_login, config=config
                )
            )
            prior.append(
                PriorFinding(
                    rule=item.finding.rule,
                    path=item.finding.path,
                    line=item.thread.line or item.finding.line,
                    message=finding_text(item.thread.root_body),
                    replies=replies[-5:],
                )
            )
    return ModelInputs(
        model=ModelOptions(
            blockers=llm.blockers,
            max_findings=llm.max_findings,
            instructions=instructions,
            skip_drafts=llm.skip.drafts,
            skip_title_keywords=llm.skip.title_keywords,
            skip_labels=llm.skip.labels,
            skip_authors=llm.skip.authors,
            skip_paths=llm.skip.paths,
            learnings=prompt_context(learned),
        ),
        prior=tuple(prior),
    )


async def prepare_rereview(
    gh: GitHubClient,
    *,
    repo: str,
    pr_number: int,
    block: Mapping[str, Any],
    result: ReviewResult,
    renames: Mapping[str, str] | None = None,
    overruled: Sequence[Overrule] = (),
) -> render.Rereview:
    """What the blocking review asked for, and what of it is fixed or overruled (its findings
    followed through ``renames``)."""
    comments = await github.list_review_comments(
        gh, repo=repo, pr_number=pr_number, review_id=int(block["id"])
    )
    blockers = decide.prior_blockers(block.get("body"), (c.get("body") for c in comments))
    marker = ReviewMarker.read(block.get("body"))
    withdrawn = {m.fingerprint: o for m in blockers for o in overruled if overrules_marker(o, m)}
    # "unknown": not reported, but its file (or the one it was renamed to) was not looked at either
    status = {m.fingerprint: decide.thread_status(m, result, renames) for m in blockers}
    gone = [m for m in blockers if m.fingerprint not in withdrawn and status[m.fingerprint] != "present"]
    return render.Rereview(
        prior_head_sha=marker.head_sha if marker else str(block.get("commit_id") or ""),
        fixed=tuple(m for m in gone if status[m.fingerprint] == "fixed"),
        still_open=tuple(m for m in blockers if status[m.fingerprint] == "present"),
        unconfirmed=tuple(m for m in gone if status[m.fingerprint] == "unknown"),
        overruled=tuple(withdrawn.values()),
    )


async def review_delta(gh: GitHubClient, *, repo: str, since: str | None, head_sha: str) -> Delta:
    """What this review comments on inline: the lines changed since ``since`` (the bot's last
    reviewed head), from GitHub's comparison of the two; all of it after history was rewritten."""
    if not since or since == head_sha or not github.is_commit_sha(since):
        return Delta(Scope.FULL)
    comparison = await github.compare_commits(gh, repo=repo, base=since, head=head_sha)
    return delta_of(since, head_sha, comparison)


def overrules_marker(overrule: Overrule, marker: FindingMarker) -> bool:
    return overrule.fingerprint == marker.fingerprint or bool(overrule.key and overrule.key == marker.key)


async def dismiss_blocks(
    gh: GitHubClient,
    *,
    repo: str,
    pr_number: int,
    mine: Sequence[Mapping[str, Any]],
    head_sha: str,
    overruled: bool = False,
) -> render.Dismissal:
    """Dismiss every active request for changes of the bot: "dismissed", or "forbidden" when
    GitHub refuses (the installation may not dismiss reviews on this branch)."""
    how = "verified fixed or overruled" if overruled else "verified fixed"
    message = (
        f"The blockers of this review are {how} at {head_sha[:12]}; dismissing it (approval is disabled)."
    )
    for review in decide.active_blocks(mine):
        try:
            await github.dismiss_review(
                gh, repo=repo, pr_number=pr_number, review_id=int(review["id"]), message=message
            )
        except gidgethub.BadRequest as exc:
            if int(exc.status_code) in (403, 404):
                log.warning("may not dismiss review %s: %s", review.get("id"), exc)
                return render.Dismissal.FORBIDDEN
            raise
    return render.Dismissal.DISMISSED


async def post_review(
    gh: GitHubClient,
    *,
    repo: str,
    pr_number: int,
    head_sha: str,
    plan: render.ReviewPlan,
    fallback: render.ReviewPlan,
) -> Mapping[str, Any]:
    """Post the review; if GitHub refuses an inline comment anyway, post ``fallback`` (the same
    review with every finding in the body) once. The returned id and state prove it exists."""
    try:
        posted = await github.create_review(
            gh, repo=repo, pr_number=pr_number, payload=plan.payload(head_sha)
        )
    except gidgethub.BadRequest as exc:
        if int(exc.status_code) != 422 or not plan.comments:
            raise
        log.warning("GitHub refused the inline comments (%s); posting them in the body instead", exc)
        posted = await github.create_review(
            gh, repo=repo, pr_number=pr_number, payload=fallback.payload(head_sha)
        )
    if not posted.get("id") or not posted.get("state"):
        raise RuntimeError(f"GitHub did not confirm the review: {posted!r}")
    return posted


# ---------------------------------------------------------------------------------- check run
async def start_check_run(gh: GitHubClient, bot: Bot, *, repo: str, pr_number: int, head_sha: str) -> int:
    """The bot's check run for this head: reused if it exists (a retried job), else created."""
    name = check_name(bot.identity)
    existing = await github.find_check_run(
        gh, repo=repo, head_sha=head_sha, name=name, app_id=bot.settings.app_id
    )
    if existing is not None:
        await github.update_check_run(
            gh, repo=repo, check_run_id=int(existing["id"]), payload={"status": "in_progress"}
        )
        return int(existing["id"])
    created = await github.create_check_run(
        gh,
        repo=repo,
        payload={"name": name, "head_sha": head_sha, "status": "in_progress", "external_id": str(pr_number)},
    )
    return int(created["id"])


async def recount_check_run(
    gh: GitHubClient,
    bot: Bot,
    *,
    repo: str,
    head_sha: str,
    result: ReviewResult,
    overruled: Sequence[Overrule],
) -> None:
    """After an overrule that leaves the verdict: the head's check run counts it at once (title,
    conclusion, the overruled listed), not at the next review. Its annotations stay: GitHub only
    adds to them."""
    existing = await github.find_check_run(
        gh, repo=repo, head_sha=head_sha, name=check_name(bot.identity), app_id=bot.settings.app_id
    )
    if existing is None or existing.get("status") != "completed":
        return  # none yet, or a review is writing it now and will count the overrule itself
    shown = existing.get("output") or {}
    output = {
        "title": render.check_title(result),
        "summary": render.recounted_summary(str(shown.get("summary") or ""), overruled),
    }
    conclusion = render.check_conclusion(result)
    if (existing.get("conclusion"), shown.get("title"), shown.get("summary")) == (
        conclusion,
        output["title"],
        output["summary"],
    ):
        return
    await github.update_check_run(
        gh, repo=repo, check_run_id=int(existing["id"]), payload={"conclusion": conclusion, "output": output}
    )


async def abandon_check_run(gh: GitHubClient, *, repo: str, check_run_id: int) -> None:
    """Complete the check run of a review that failed before it could (the error itself goes
    on: the job is retried or fails). A failure: no review vouches for this head."""
    output = {
        "title": "The review could not be completed",
        "summary": "The review of this head failed before it could finish; ask again to retry.",
    }
    try:
        await github.update_check_run(
            gh,
            repo=repo,
            check_run_id=check_run_id,
            payload={"status": "completed", "conclusion": "failure", "output": output},
        )
    except Exception:  # the review's own error is the one raised
        log.exception("could not complete check run %s", check_run_id)


async def finish_check_run(
    gh: GitHubClient,
    *,
    repo: str,
    check_run_id: int,
    result: ReviewResult,
    plan: render.ReviewPlan,
    note: str | None = None,
) -> None:
    """Complete the check run; annotations go 50 per request, as the Checks API requires.
    ``note`` (an unusable settings file) leads the summary, where the repository's people look."""
    summary = render.check_summary(plan)
    if note is not None:
        summary = f"{note}\n\n{summary}"[: render.MAX_CHECK_TEXT]
    output = {"title": render.check_title(result), "summary": summary}
    notes = render.check_annotations(result)
    batches = [
        notes[i : i + ANNOTATIONS_PER_REQUEST] for i in range(0, len(notes), ANNOTATIONS_PER_REQUEST)
    ] or [[]]
    for index, batch in enumerate(batches):
        payload: dict[str, Any] = {"output": {**output, "annotations": batch} if batch else output}
        if index == len(batches) - 1:
            payload.update(status="completed", conclusion=render.check_conclusion(result))
        await github.update_check_run(gh, repo=repo, check_run_id=check_run_id, payload=payload)
