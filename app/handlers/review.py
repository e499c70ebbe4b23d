"""Review: when asked, post ONE formal review with inline findings, and a check run beside it.

Triggers: a review request for the decoy user (or a configured team), an ``@slug review``
mention (dispatched by ``mentions.py``), the "Re-run" button of the bot's check run, and (when the repository
opts in) a PR being opened or marked ready, or pushed to after the bot blocked it. Whatever the
trigger, the work is the same: re-read the PR and the bot's earlier reviews from GitHub, decide
whether this is a new review, a re-review of a sticky request for changes, or a repeat of a
request already answered; analyse; post; finish the check run. Jobs of one PR run one at a
time, so triggers that arrive while a review of the same head is queued or running find it
done and coalesce into it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import gidgethub
from gidgethub import routing

from .. import github, metrics
from ..config import MAX_INSTRUCTIONS_CHARS, RepoConfig
from ..events import CheckRunEvent, PullRequestEvent
from ..guards import BotIdentity, is_bot_login
from ..review import decide, render
from ..review.diff import parse_patch
from ..review.llm import LlmReviewer
from ..review.markers import ReviewMarker
from ..review.model import ModelOptions, PriorFinding, PullContext, ReviewResult
from ..routing import Context
from .common import analyse, build_context
from .decoy import drop_decoy
from .threads import OpenThread, finding_text, open_bot_threads, thread_replies, verify_threads

log = logging.getLogger(__name__)

router = routing.Router()

ANNOTATIONS_PER_REQUEST = 50


def check_name(ctx: Context) -> str:
    return f"{ctx.identity.slug} review"


# ---------------------------------------------------------------------------------- triggers
@router.register("pull_request", action="review_requested")
async def on_review_requested(event: PullRequestEvent, ctx: Context) -> None:
    """GitHub sends one delivery per requested reviewer: act on this delivery's reviewer only."""
    if event.repo is None:
        return
    if event.requested_reviewer is not None:
        if event.requested_reviewer.casefold() != ctx.identity.decoy_login.casefold():
            return
        trigger = "decoy"
    elif event.requested_team is not None:
        config = await ctx.repo_configs.get(ctx.gh, repo=event.repo, slug=ctx.identity.slug)
        if event.requested_team.casefold() not in {t.casefold() for t in config.review.teams}:
            return
        trigger = "team"
    else:
        return
    await github.react(ctx.gh, repo=event.repo, target="pull", target_id=event.pr_number, content="eyes")
    await review_pull(ctx, repo=event.repo, pr_number=event.pr_number, trigger=trigger)


@router.register("pull_request", action="opened")
@router.register("pull_request", action="ready_for_review")
async def on_opened(event: PullRequestEvent, ctx: Context) -> None:
    """Automatic review, only when the repository asks for it, and never of a draft."""
    if event.draft or event.repo is None:
        return
    config = await ctx.repo_configs.get(ctx.gh, repo=event.repo, slug=ctx.identity.slug)
    if config.review.auto:
        await review_pull(ctx, repo=event.repo, pr_number=event.pr_number, trigger="auto")


@router.register("pull_request", action="synchronize")
async def on_push(event: PullRequestEvent, ctx: Context) -> None:
    """With ``review.on_push``, a push to a PR the bot has blocked re-reviews it."""
    if event.repo is None:
        return
    config = await ctx.repo_configs.get(ctx.gh, repo=event.repo, slug=ctx.identity.slug)
    if config.review.on_push:
        await review_pull(
            ctx, repo=event.repo, pr_number=event.pr_number, trigger="push", only_if_blocked=True
        )


@router.register("check_run", action="rerequested")
async def on_rerun(event: CheckRunEvent, ctx: Context) -> None:
    """The Checks tab's "Re-run" on the bot's own check run reviews that PR again."""
    if event.repo is None or event.app_slug != ctx.identity.slug or event.name != check_name(ctx):
        return
    numbers = set(event.pr_numbers)
    if event.external_id and event.external_id.isdigit():
        numbers.add(int(event.external_id))  # forks' check runs list no PRs; the bot noted it
    for pr_number in sorted(numbers):
        await review_pull(ctx, repo=event.repo, pr_number=pr_number, trigger="rerun", force=True)


# ---------------------------------------------------------------------------------- the review
def policy_for(
    context: PullContext, *, config: RepoConfig, approve: bool, identity: BotIdentity
) -> render.Policy:
    """The repository's ``review.approve`` overrides the deployment's ``REVIEW_APPROVE``."""
    return render.Policy(
        approve=approve if config.review.approve is None else config.review.approve,
        pr_by_bot=is_bot_login(context.author_login, identity),
        max_comments=config.review.max_comments,
    )


def plan_for(
    result: ReviewResult,
    context: PullContext,
    *,
    policy: render.Policy,
    trigger: str,
    identity: BotIdentity,
    rereview: render.Rereview | None = None,
    inline: bool = True,
) -> render.ReviewPlan:
    """The review to post; ``inline=False`` puts every finding in the body (the fallback for a
    review GitHub refused)."""
    patches = {f.path: parse_patch(f.patch) for f in context.files if inline and f.patch is not None}
    return render.plan_review(
        result,
        head_sha=context.head_sha,
        commentable={path: lines.right_lines for path, lines in patches.items()},
        policy=policy,
        trigger=trigger,
        bot_name=identity.slug,
        rereview=rereview,
        issued_at=time.time(),
        changed={path: lines.added for path, lines in patches.items()},
    )


async def review_pull(
    ctx: Context,
    *,
    repo: str,
    pr_number: int,
    trigger: str,
    force: bool = False,
    only_if_blocked: bool = False,
) -> None:
    """Review the PR's current head, re-reading everything from GitHub first.

    If the bot's latest decision on the PR requested changes, this is a re-review and must
    re-decide: request changes again, approve, or (approval disabled) dismiss the old block.
    """
    pull = await github.get_pull(ctx.gh, repo=repo, pr_number=pr_number)
    if pull.get("state") != "open":
        log.info("not reviewing: the pull request is %s", pull.get("state"))
        return
    head_sha = str(pull["head"]["sha"])
    mine = decide.bot_reviews(await github.list_reviews(ctx.gh, repo=repo, pr_number=pr_number), ctx.identity)
    block = decide.blocking_review(mine)
    if only_if_blocked and block is None:
        return
    loaded = await ctx.repo_configs.load(ctx.gh, repo=repo, slug=ctx.identity.slug)
    config = loaded.config
    existing = decide.review_of_head(mine, head_sha)
    if decide.coalesces(
        existing,
        received_at=ctx.received_at,
        blocked=block is not None,
        force=force,
        window=config.review.coalesce_seconds,
    ):
        log.info("head %s already reviewed; trigger %s coalesces into it", head_sha[:12], trigger)
        if trigger == "decoy":
            await drop_decoy(ctx, repo=repo, pr_number=pr_number, pull=pull)
        return
    check_run_id = await start_check_run(ctx, repo=repo, pr_number=pr_number, head_sha=head_sha)
    context = await build_context(ctx.gh, repo=repo, pull=pull, config=config)
    open_threads: list[OpenThread] | None = None
    if isinstance(ctx.reviewer, LlmReviewer):
        open_threads = await open_bot_threads(ctx, repo=repo, pr_number=pr_number)
        context = await with_model_inputs(ctx, context, config=config, threads=open_threads)
    result = await analyse(ctx, context)
    policy = policy_for(context, config=config, approve=ctx.settings.review_approve, identity=ctx.identity)
    rereview = None
    if block is not None and not policy.pr_by_bot:
        if open_threads is None:
            open_threads = await open_bot_threads(ctx, repo=repo, pr_number=pr_number)
        rereview = await prepare_rereview(
            ctx, repo=repo, pr_number=pr_number, block=block, result=result, open_threads=open_threads
        )
    plan = plan_for(result, context, policy=policy, trigger=trigger, identity=ctx.identity, rereview=rereview)
    if rereview is not None and plan.event == "COMMENT" and result.withhold_approval is None:
        # No blockers remain but approval is disabled: only dismissing clears the sticky block.
        # (Withheld approval keeps the block too: a person should look at this PR.)
        outcome = await dismiss_blocks(ctx, repo=repo, pr_number=pr_number, mine=mine, head_sha=head_sha)
        rereview = replace(rereview, dismissal=outcome)
        plan = plan_for(
            result, context, policy=policy, trigger=trigger, identity=ctx.identity, rereview=rereview
        )
    posted = await post_review(
        ctx,
        repo=repo,
        pr_number=pr_number,
        head_sha=head_sha,
        plan=plan,
        fallback=plan_for(
            result,
            context,
            policy=policy,
            trigger=trigger,
            identity=ctx.identity,
            rereview=rereview,
            inline=False,
        ),
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
        ctx, repo=repo, check_run_id=check_run_id, result=result, plan=plan, note=loaded.problem_note()
    )
    if rereview is not None:
        # The threads read before posting; those this review opened hold current findings.
        await verify_threads(
            ctx, repo=repo, pr_number=pr_number, pull=pull, result=result, threads=open_threads or []
        )


async def with_model_inputs(
    ctx: Context, context: PullContext, *, config: RepoConfig, threads: Sequence[OpenThread]
) -> PullContext:
    """What only the model reviewer needs: the repository's options and review instructions (the
    config's ``review.instructions`` and ``.github/{slug}-instructions.md``, both from the default
    branch, never from the PR's head, and capped), and the bot's open findings with the replies in
    their threads."""
    inline = (config.review.instructions or "")[:MAX_INSTRUCTIONS_CHARS]
    from_file = await github.get_file_text(
        ctx.gh, repo=context.repo, path=f".github/{ctx.identity.slug}-instructions.md"
    )
    instructions = "\n\n".join(
        part.strip() for part in (inline, (from_file or "")[:MAX_INSTRUCTIONS_CHARS]) if part
    )
    llm = config.review.llm
    prior: list[PriorFinding] = []
    if threads:
        comments = await github.list_pull_review_comments(
            ctx.gh, repo=context.repo, pr_number=int(context.pr_number or 0)
        )
        for item in threads:
            replies = tuple(thread_replies(comments, item, ctx.identity))
            prior.append(
                PriorFinding(
                    rule=item.finding.rule,
                    path=item.finding.path,
                    line=item.thread.line or item.finding.line,
                    message=finding_text(item.thread.root_body),
                    replies=replies[-5:],
                )
            )
    return replace(
        context,
        model=ModelOptions(
            blockers=llm.blockers,
            max_findings=llm.max_findings,
            instructions=instructions,
            skip_drafts=llm.skip.drafts,
            skip_title_keywords=llm.skip.title_keywords,
            skip_labels=llm.skip.labels,
            skip_authors=llm.skip.authors,
            skip_paths=llm.skip.paths,
        ),
        prior=tuple(prior),
    )


async def prepare_rereview(
    ctx: Context,
    *,
    repo: str,
    pr_number: int,
    block: Mapping[str, Any],
    result: ReviewResult,
    open_threads: Sequence[OpenThread],
) -> render.Rereview:
    """What the blocking review asked for, what of it is fixed, and which findings already have
    an open thread of the bot (not to be posted again)."""
    comments = await github.list_review_comments(
        ctx.gh, repo=repo, pr_number=pr_number, review_id=int(block["id"])
    )
    blockers = decide.prior_blockers(block.get("body"), (c.get("body") for c in comments))
    current = decide.reported(result)
    marker = ReviewMarker.read(block.get("body"))
    return render.Rereview(
        prior_head_sha=marker.head_sha if marker else str(block.get("commit_id") or ""),
        fixed=tuple(m for m in blockers if decide.is_fixed(m, current)),
        still_open=tuple(m for m in blockers if not decide.is_fixed(m, current)),
        open_thread_fingerprints=frozenset(t.finding.fingerprint for t in open_threads),
    )


async def dismiss_blocks(
    ctx: Context, *, repo: str, pr_number: int, mine: Sequence[Mapping[str, Any]], head_sha: str
) -> str:
    """Dismiss every active request for changes of the bot: "dismissed", or "forbidden" when
    GitHub refuses (the installation may not dismiss reviews on this branch)."""
    message = (
        f"The blockers of this review are verified fixed at {head_sha[:12]}; "
        "dismissing it (approval is disabled)."
    )
    for review in decide.active_blocks(mine):
        try:
            await github.dismiss_review(
                ctx.gh, repo=repo, pr_number=pr_number, review_id=int(review["id"]), message=message
            )
        except gidgethub.BadRequest as exc:
            if int(exc.status_code) in (403, 404):
                log.warning("may not dismiss review %s: %s", review.get("id"), exc)
                return "forbidden"
            raise
    return "dismissed"


async def post_review(
    ctx: Context,
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
            ctx.gh, repo=repo, pr_number=pr_number, payload=plan.payload(head_sha)
        )
    except gidgethub.BadRequest as exc:
        if int(exc.status_code) != 422 or not plan.comments:
            raise
        log.warning("GitHub refused the inline comments (%s); posting them in the body instead", exc)
        posted = await github.create_review(
            ctx.gh, repo=repo, pr_number=pr_number, payload=fallback.payload(head_sha)
        )
    if not posted.get("id") or not posted.get("state"):
        raise RuntimeError(f"GitHub did not confirm the review: {posted!r}")
    return posted


# ---------------------------------------------------------------------------------- check run
async def start_check_run(ctx: Context, *, repo: str, pr_number: int, head_sha: str) -> int:
    """The bot's check run for this head: reused if it exists (a retried job), else created."""
    name = check_name(ctx)
    existing = await github.find_check_run(ctx.gh, repo=repo, head_sha=head_sha, name=name)
    if existing is not None:
        await github.update_check_run(
            ctx.gh, repo=repo, check_run_id=int(existing["id"]), payload={"status": "in_progress"}
        )
        return int(existing["id"])
    created = await github.create_check_run(
        ctx.gh,
        repo=repo,
        payload={"name": name, "head_sha": head_sha, "status": "in_progress", "external_id": str(pr_number)},
    )
    return int(created["id"])


async def finish_check_run(
    ctx: Context,
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
        await github.update_check_run(ctx.gh, repo=repo, check_run_id=check_run_id, payload=payload)
