"""What a trigger asks of the review, and whether this job reviews at all: pure decisions.

``ReviewMode`` is derived once from the trigger; ``step`` decides from the head read from GitHub
whether the review goes on (a closed PR, a push to a PR the bot does not block, a trigger a
review of this head already answers do not).
"""

from __future__ import annotations

import enum

from ...review.rounds import decide
from ...review.rounds.markers import Trigger
from .read import Head


class ReviewMode(enum.Enum):
    """What the trigger asks: the same review, with different reasons to stop or to stay quiet."""

    ASKED = "asked"  # a request, a mention, an automatic review: one review of a head answers it
    RERUN = "rerun"  # the check run's "Re-run": reviews again, whatever was posted
    PUSH = "push"  # new commits: only a pull request the bot blocks is re-reviewed
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
    def needs_block(self) -> bool:
        return self is ReviewMode.PUSH

    @property
    def only_to_unblock(self) -> bool:
        """Posts nothing unless the sticky block goes (the check run counts the overrule)."""
        return self is ReviewMode.OVERRULE


class Step(enum.Enum):
    REVIEW = "review"
    CLOSED = "closed"  # the pull request is closed or merged
    NOT_BLOCKED = "not blocked"  # a push to a pull request the bot does not block
    COALESCED = "coalesced"  # a review of this head answers the trigger


def step(head: Head, mode: ReviewMode, *, received_at: float) -> Step:
    """Whether this job reviews the head. ``received_at``: when its delivery arrived."""
    if head.pull.get("state") != "open":
        return Step.CLOSED
    if mode.needs_block and head.block is None:
        return Step.NOT_BLOCKED
    if decide.coalesces(
        decide.review_of_head(head.mine, head.head_sha),
        received_at=received_at,
        blocked=head.block is not None,
        force=mode.forced,
        window=head.config.review.coalesce_seconds,
    ):
        return Step.COALESCED
    return Step.REVIEW
