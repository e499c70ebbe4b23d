"""What a trigger asks of the review, and whether this job reviews at all: pure decisions.

``ReviewMode`` is derived once from the trigger; ``step`` decides from the head read from GitHub
whether the review goes on (a closed PR, a push to a PR the bot neither blocks nor approved, a
trigger a review of this head already answers do not). A push to a PR the bot approved is never
left alone: an approval is for the head it judged, so the new head is reviewed or, where the
repository says so (``review.approval_on_push: dismiss``), the approval is dismissed.
"""

from __future__ import annotations

import enum

from ...review.rounds import decide
from ...review.rounds.markers import Trigger
from ...settings.repoconfig import ApprovalOnPush
from .read import Head


class ReviewMode(enum.Enum):
    """What the trigger asks: the same review, with different reasons to stop or to stay quiet."""

    ASKED = "asked"  # a request, a mention, an automatic review: one review of a head answers it
    RERUN = "rerun"  # the check run's "Re-run": reviews again, whatever was posted
    PUSH = "push"  # new commits: a pull request the bot blocks (``on_push``) or approved
    OVERRULE = "overrule"  # a finding was overruled: a review is posted only if the block goes

    @classmethod
    def of(cls, trigger: Trigger) -> ReviewMode:
        return {Trigger.RERUN: cls.RERUN, Trigger.PUSH: cls.PUSH, Trigger.OVERRULE: cls.OVERRULE}.get(
            trigger, cls.ASKED
        )

    @property
    def forced(self) -> bool:
        """A review of this head posted before never answers it."""
        return self in (ReviewMode.RERUN, ReviewMode.OVERRULE)

    @property
    def only_to_unblock(self) -> bool:
        """Posts nothing unless the sticky block goes (the check run counts the overrule)."""
        return self is ReviewMode.OVERRULE


class Step(enum.Enum):
    REVIEW = "review"
    CLOSED = "closed"  # the pull request is closed or merged
    NOT_BLOCKED = "not blocked"  # a push to a pull request the bot neither blocks nor approved
    NOT_ON_PUSH = "not on push"  # a push to a blocked pull request, ``review.on_push`` off
    DISMISS_APPROVAL = "approval dismissed"  # a push after the bot's approval, which is dismissed
    COALESCED = "coalesced"  # the bot's review of this head answers the trigger (blocked or not)


def step(head: Head, mode: ReviewMode) -> Step:
    """Whether this job reviews the head."""
    if head.pull.get("state") != "open":
        return Step.CLOSED
    if mode is ReviewMode.PUSH:
        pushed = on_push(head)
        if pushed is not Step.REVIEW:
            return pushed
    if decide.coalesces(decide.review_of_head(head.mine, head.head_sha), force=mode.forced):
        return Step.COALESCED
    return Step.REVIEW


def on_push(head: Head) -> Step:
    """A push: the bot's block is re-decided when the repository asks (``review.on_push``); its
    approval of an earlier head is never left standing (reviewed again, or dismissed)."""
    if head.block is not None:
        return Step.REVIEW if head.config.review.on_push else Step.NOT_ON_PUSH
    if decide.stale_approval(head.mine, head.head_sha) is None:
        return Step.NOT_BLOCKED
    if head.config.review.approval_on_push is ApprovalOnPush.DISMISS:
        return Step.DISMISS_APPROVAL
    return Step.REVIEW
