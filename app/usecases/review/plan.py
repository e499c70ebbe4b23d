"""The review to post, decided from the state and the findings alone (no I/O): the verdict under
the repository's and the deployment's policy, which findings go inline, what a re-review of the
bot's sticky request for changes says about each of its blockers, whether the block must be
dismissed (approval disabled or withheld), and the fallback with every finding in the body.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ...guards import BotIdentity, is_bot_login
from ...review.core.model import PullContext, ReviewResult, ThreadStatus, Verdict
from ...review.output import render
from ...review.rounds import decide
from ...review.rounds.markers import FindingMarker, ReviewMarker, Trigger
from ...review.rounds.overrule import Overrule, recorded_severity, severity_named
from ...settings.repoconfig import RepoConfig
from .decide import ReviewMode
from .read import PullState


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


@dataclass(frozen=True, slots=True)
class Plan:
    """What to publish. ``post``: False when an overrule leaves the verdict as it was (the check
    run counts it, nothing is posted). ``dismiss``: no blocker remains but the review is a
    comment, so only dismissing clears the sticky block. ``review`` renders the review itself,
    told what became of that dismissal."""

    state: PullState
    result: ReviewResult
    policy: render.Policy
    trigger: Trigger
    slug: str
    issued_at: float
    rereview: render.Rereview | None
    post: bool
    dismiss: bool

    def review(self, dismissal: render.Dismissal | None = None, *, inline: bool = True) -> render.ReviewPlan:
        """The review; ``inline=False`` puts every finding in the body (the fallback for a review
        GitHub refused)."""
        rereview = self.rereview if self.rereview is None else replace(self.rereview, dismissal=dismissal)
        return review_plan(self, rereview, inline=inline)


def plan_review(
    state: PullState,
    result: ReviewResult,
    *,
    mode: ReviewMode,
    trigger: Trigger,
    identity: BotIdentity,
    approve: bool,
    issued_at: float,
) -> Plan:
    """``approve``: the deployment's ``REVIEW_APPROVE``; ``issued_at``: the review's stamp."""
    block = state.head.block
    policy = policy_for(state.context, config=state.head.config, approve=approve, identity=identity)
    stays = block is None or result.verdict is Verdict.REQUEST_CHANGES or result.incomplete
    rereview = rereview_of(state, result) if block is not None and not policy.pr_by_bot else None
    plan = Plan(
        state,
        result,
        policy,
        trigger,
        identity.slug,
        issued_at,
        rereview,
        post=not (mode.only_to_unblock and stays),
        dismiss=False,
    )
    dismiss = rereview is not None and plan.review().event is Verdict.COMMENT and not result.holds_block
    # An approval withheld for the model's silence or steering keeps the block: a person should look.
    return replace(plan, dismiss=dismiss)


def review_plan(plan: Plan, rereview: render.Rereview | None, *, inline: bool) -> render.ReviewPlan:
    state = plan.state
    patches = {f.path: state.patches[f.path] for f in state.context.files if inline and f.patch is not None}
    return render.plan_review(
        plan.result,
        head_sha=state.context.head_sha,
        commentable={path: lines.right_lines for path, lines in patches.items()},
        policy=plan.policy,
        trigger=plan.trigger,
        bot_name=plan.slug,
        rereview=rereview,
        issued_at=plan.issued_at,
        changed={path: lines.added for path, lines in patches.items()},
        threads=[m for t in state.threads for m in t.markers],
        renames=state.renames,
        delta=state.delta,
    )


def rereview_of(state: PullState, result: ReviewResult) -> render.Rereview:
    """What the blocking review asked for, and what of it is fixed or overruled (its findings
    followed through the state's renames)."""
    block = state.head.block or {}
    blockers = decide.prior_blockers(block.get("body"), (c.get("body") for c in state.block_comments))
    marker = ReviewMarker.read(block.get("body"))
    withdrawn = {m.fingerprint: o for m in blockers for o in state.overruled if overrules_marker(o, m)}
    # CANNOT_TELL: not reported, but its file (or the one it was renamed to) was not looked at either
    status = {m.fingerprint: decide.thread_status(m, result, state.renames) for m in blockers}
    gone = [
        m
        for m in blockers
        if m.fingerprint not in withdrawn and status[m.fingerprint] is not ThreadStatus.NOT_FIXED
    ]
    return render.Rereview(
        prior_head_sha=marker.head_sha if marker else str(block.get("commit_id") or ""),
        fixed=tuple(m for m in gone if status[m.fingerprint] is ThreadStatus.FIXED),
        still_open=tuple(m for m in blockers if status[m.fingerprint] is ThreadStatus.NOT_FIXED),
        unconfirmed=tuple(m for m in gone if status[m.fingerprint] is ThreadStatus.CANNOT_TELL),
        overruled=tuple(withdrawn.values()),
    )


def overrules_marker(overrule: Overrule, marker: FindingMarker) -> bool:
    """Whether ``overrule`` withdrew the blocker ``marker`` recorded: the same finding, and never
    one more severe than the overrule was recorded for."""
    same = overrule.fingerprint == marker.fingerprint or bool(overrule.key and overrule.key == marker.key)
    return same and severity_named(marker.severity) <= recorded_severity(overrule.severity)
