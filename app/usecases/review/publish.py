"""The only writer of the review: what the plan says, done on GitHub (``GitHubPublisher``) or
kept for the command line and ``eval`` (``RecordingPublisher``), in this order: the overrules
the review found in reactions, the dismissal of a block no blocker holds, the check run, the
review (once; the body-only fallback if GitHub refuses an inline comment), and the threads that
follow their findings (resolved once verified gone at this head). The run goes before the
review because a retried job that finds the review posted does no more.

The check run is the review's from the moment it starts (``usecases.checks``, the lifecycle the
readiness run shares): whatever fails, a run this job started is completed as a failure, except
while the job waits for GitHub's rate limits.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import gidgethub

from ... import metrics
from ...github import calls as github
from ...github.client import GitHubClient
from ...review.core.model import Verdict
from ...review.output import render
from ...review.rounds import decide
from ...review.rounds.markers import Trigger
from ..bot import Bot
from ..checks import (
    StartedRun,
    completed_or_abandoned,
    finish_check_run,
    hold_paused_head,
    recount_check_run,
    review_run,
)
from ..decoy import drop_decoy, requested_logins
from ..overrules import record_overrule
from ..threads import verify_threads
from .decide import ReviewMode, Step
from .plan import Plan
from .read import Head

log = logging.getLogger(__name__)


class Publisher(Protocol):
    async def skip(self, head: Head, step: Step, trigger: Trigger) -> None:
        """No review: ``step`` says why."""
        ...

    async def paused(self, head: Head, by: str) -> None: ...

    async def dismiss_approval(self, head: Head) -> bool:
        """The bot's approval of an earlier head dismissed, saying why; False when GitHub refused
        (the new head is then reviewed, which supersedes it)."""
        ...

    def check_run(self, head: Head, mode: ReviewMode) -> AbstractAsyncContextManager[StartedRun]:
        """Around the review: its check run, completed whatever happens."""
        ...

    async def publish(self, plan: Plan, check: StartedRun) -> None: ...


@dataclass(frozen=True, slots=True)
class GitHubPublisher:
    gh: GitHubClient
    bot: Bot

    async def skip(self, head: Head, step: Step, trigger: Trigger) -> None:
        if step is Step.CLOSED:
            log.info("not reviewing: the pull request is %s", head.pull.get("state"))
        elif step is Step.COALESCED:
            log.info("head %s already reviewed; trigger %s coalesces into it", head.head_sha[:12], trigger)
            if trigger == Trigger.DECOY:
                await drop_decoy(
                    self.gh,
                    self.bot,
                    repo=head.repo,
                    pr_number=head.pr_number,
                    requested=requested_logins(head.pull),
                )

    async def dismiss_approval(self, head: Head) -> bool:
        return await self.dismiss_stale_approval(head, reviewed=False) is not render.Dismissal.FORBIDDEN

    async def dismiss_stale_approval(self, head: Head, *, reviewed: bool) -> render.Dismissal | None:
        """The bot's approval of an earlier head (re-read from GitHub with the head) goes; None
        when there is none."""
        approved = decide.stale_approval(head.mine, head.head_sha)
        if approved is None:
            return None
        message = stale_approval_message(
            approved, head.head_sha, slug=self.bot.identity.slug, reviewed=reviewed
        )
        log.info(
            "dismissing the approval of %s: the head is now %s", approved.get("commit_id"), head.head_sha
        )
        return await dismiss_reviews(
            self.gh,
            repo=head.repo,
            pr_number=head.pr_number,
            reviews=decide.active_approvals(head.mine),
            message=message,
        )

    async def paused(self, head: Head, by: str) -> None:
        log.info("not reviewing: paused by %s", by)
        await hold_paused_head(
            self.gh,
            self.bot,
            repo=head.repo,
            pr_number=head.pr_number,
            head_sha=head.head_sha,
            by=by,
            details_url=str(head.pull.get("html_url") or ""),
        )

    @asynccontextmanager
    async def check_run(self, head: Head, mode: ReviewMode) -> AsyncIterator[StartedRun]:
        """The head's run (found in what was read, or created when the review completes it),
        abandoned if the review fails; unless the review may post nothing (an overrule): then
        only once it posts."""
        async with completed_or_abandoned(self.gh, repo=head.repo) as run:
            if not mode.only_to_unblock:
                self.start(run, head)
            yield run

    def start(self, run: StartedRun, head: Head) -> None:
        if not run.started:
            found = review_run(self.bot, pr_number=head.pr_number, head_sha=head.head_sha, runs=head.runs)
            run.id, run.new = found.id, found.new

    async def record_overrules(self, plan: Plan) -> None:
        state = plan.state
        for pending in state.pending:
            await record_overrule(
                self.gh,
                self.bot,
                repo=state.head.repo,
                pr_number=state.head.pr_number,
                pending=pending,
                comments=state.comments,
                patch=next(
                    (f.patch for f in state.context.files if f.path == pending.item.finding.path), None
                ),
            )

    async def publish(self, plan: Plan, check: StartedRun) -> None:
        gh, state = self.gh, plan.state
        repo, pr_number, head_sha = state.head.repo, state.head.pr_number, state.context.head_sha
        await self.record_overrules(plan)
        if not plan.post:
            log.info("an overrule leaves the verdict as it was at %s; nothing to post", head_sha[:12])
            await recount_check_run(
                gh, self.bot, repo=repo, head_sha=head_sha, result=plan.result, overruled=state.overruled
            )
            return
        self.start(check, state.head)
        dismissal = None
        if plan.dismiss:
            overruled = plan.rereview is not None and bool(plan.rereview.overruled)
            dismissal = await dismiss_blocks(
                gh,
                repo=repo,
                pr_number=pr_number,
                mine=state.head.mine,
                head_sha=head_sha,
                overruled=overruled,
            )
        review = plan.review(dismissal)
        # A comment leaves the bot's earlier approval as its opinion on GitHub: it must go.
        commented = review.event is not Verdict.APPROVE and review.event is not Verdict.REQUEST_CHANGES
        if (
            commented
            and await self.dismiss_stale_approval(state.head, reviewed=True) is render.Dismissal.FORBIDDEN
        ):
            log.warning("GitHub refused to dismiss my approval of an earlier head of %s", head_sha[:12])
        # The run before the review: a job put back after the review posted would find it and do
        # no more, leaving the head without the run (which a branch may require); put back
        # after the run, it finds the run and edits it.
        await finish_check_run(
            gh,
            repo=repo,
            run=check,
            result=plan.result,
            plan=review,
            note=state.head.loaded.problem_note(),
            details_url=str(state.head.pull.get("html_url") or "") or None,
            blockers_unconfirmed=plan.rereview is not None and bool(plan.rereview.unconfirmed),
        )
        posted = await post_review(
            gh,
            repo=repo,
            pr_number=pr_number,
            head_sha=head_sha,
            plan=review,
            fallback=plan.review(dismissal, inline=False),
        )
        metrics.REVIEWS.labels(verdict=review.event.lower()).inc()
        log.info(
            "posted review %s (%s, %d inline) at %s",
            posted.get("id"),
            posted.get("state"),
            len(review.comments),
            head_sha[:12],
        )
        check.completed = True  # only now: a review that fails after its run was written fails the run
        if state.threads:
            # The threads read before posting (those this review opened hold current findings):
            # each follows its finding, resolved once it is verified gone at this head.
            await verify_threads(
                gh,
                self.bot,
                repo=repo,
                pr_number=pr_number,
                pull=state.head.pull,
                result=plan.result,
                threads=state.threads,
                renames=state.renames,
            )


@dataclass(slots=True)
class RecordingPublisher:
    """Posts nothing: keeps what would be posted (``review python -m app review``, ``eval``)."""

    plan: Plan | None = None
    review: render.ReviewPlan | None = None
    said: list[str] = field(default_factory=list)

    async def skip(self, head: Head, step: Step, trigger: Trigger) -> None:
        self.said.append(f"not reviewing: {step.value}")

    async def dismiss_approval(self, head: Head) -> bool:
        self.said.append("not reviewing: a push after my approval; the approval would be dismissed")
        return True

    async def paused(self, head: Head, by: str) -> None:
        self.said.append(f"not reviewing: paused by @{by}")

    @asynccontextmanager
    async def check_run(self, head: Head, mode: ReviewMode) -> AsyncIterator[StartedRun]:
        yield StartedRun()

    async def publish(self, plan: Plan, check: StartedRun) -> None:
        self.plan = plan
        if not plan.post:
            self.said.append("an overrule leaves the verdict as it was; nothing to post")
            return
        # What the bot posts once GitHub has dismissed the block (as it does, unless forbidden).
        self.review = plan.review(render.Dismissal.DISMISSED if plan.dismiss else None)


async def dismiss_blocks(
    gh: GitHubClient,
    *,
    repo: str,
    pr_number: int,
    mine: Sequence[Mapping[str, Any]],
    head_sha: str,
    overruled: bool = False,
) -> render.Dismissal:
    """Dismiss every active request for changes of the bot: DISMISSED, or FORBIDDEN when GitHub
    refuses (the installation may not dismiss reviews on this branch)."""
    how = "verified fixed or overruled" if overruled else "verified fixed"
    message = (
        f"The blockers of this review are {how} at {head_sha[:12]}; dismissing it (approval is disabled)."
    )
    return await dismiss_reviews(
        gh, repo=repo, pr_number=pr_number, reviews=decide.active_blocks(mine), message=message
    )


def stale_approval_message(approved: Mapping[str, Any], head_sha: str, *, slug: str, reviewed: bool) -> str:
    """One line: why the bot's approval of an earlier head no longer stands."""
    was = str(approved.get("commit_id") or "")[:12]
    then = (
        "its review does not approve it"
        if reviewed
        else f"comment `@{slug} review` to have it reviewed (an approval is for the head it judged)"
    )
    return f"This approval was for {was}; a new head, {head_sha[:12]}, was pushed since: {then}."


async def dismiss_reviews(
    gh: GitHubClient, *, repo: str, pr_number: int, reviews: Sequence[Mapping[str, Any]], message: str
) -> render.Dismissal:
    """Dismiss ``reviews`` (the bot's own): DISMISSED, or FORBIDDEN when GitHub refuses."""
    for review in reviews:
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
