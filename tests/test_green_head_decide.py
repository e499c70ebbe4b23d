"""An approval is for a head: the pure decisions behind it, table-driven (the end-to-end stories
are in tests/test_green_head.py)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from app.events import ReviewState
from app.review.rounds.decide import stale_approval
from app.settings.repoconfig import ApprovalOnPush, RepoConfig, ReviewConfig
from app.usecases.pull import LoadedConfig
from app.usecases.readiness import decide as rd
from app.usecases.review.decide import ReviewMode, Step, step
from app.usecases.review.read import Head

OLD, NEW = "a" * 40, "b" * 40
ME = "revbot[bot]"


def review(state: str, commit: str, n: int) -> dict[str, Any]:
    return {
        "id": n,
        "state": state,
        "commit_id": commit,
        "user": {"login": ME},
        "submitted_at": f"2026-01-01T00:00:{n:02d}Z",
        "body": "",
    }


@pytest.mark.parametrize(
    ("mine", "stale"),
    [
        ([], False),
        ([review("APPROVED", NEW, 1)], False),  # of this head
        ([review("APPROVED", OLD, 1)], True),
        ([review("APPROVED", OLD, 1), review("COMMENTED", NEW, 2)], True),  # a comment decides nothing
        ([review("APPROVED", OLD, 1), review("CHANGES_REQUESTED", NEW, 2)], False),
        ([review("CHANGES_REQUESTED", OLD, 1)], False),
        ([review("DISMISSED", OLD, 1)], False),
        ([review("APPROVED", OLD, 1), review("APPROVED", NEW, 2)], False),
    ],
)
def test_a_stale_approval_is_the_bots_latest_decision_approving_another_commit(
    mine: list[dict[str, Any]], stale: bool
) -> None:
    assert (stale_approval(mine, NEW) is not None) is stale


def head(mine: list[dict[str, Any]], *, on_push: bool, approval_on_push: ApprovalOnPush) -> Head:
    config = RepoConfig(review=ReviewConfig(on_push=on_push, approval_on_push=approval_on_push))
    pull = {"number": 1, "state": "open", "head": {"sha": NEW}}
    return Head("o/r", pull, tuple(mine), LoadedConfig(config, None, None))


BLOCKED = [review("CHANGES_REQUESTED", OLD, 1)]
APPROVED = [review("APPROVED", OLD, 1)]


@pytest.mark.parametrize(
    ("mine", "on_push", "approval_on_push", "expected"),
    [
        ([], True, ApprovalOnPush.REVIEW, Step.NOT_BLOCKED),
        ([review("COMMENTED", OLD, 1)], True, ApprovalOnPush.REVIEW, Step.NOT_BLOCKED),
        (BLOCKED, True, ApprovalOnPush.REVIEW, Step.REVIEW),
        (BLOCKED, False, ApprovalOnPush.REVIEW, Step.NOT_ON_PUSH),
        (APPROVED, True, ApprovalOnPush.REVIEW, Step.REVIEW),
        (APPROVED, False, ApprovalOnPush.REVIEW, Step.REVIEW),  # on_push is about blocks
        (APPROVED, True, ApprovalOnPush.DISMISS, Step.DISMISS_APPROVAL),
        (APPROVED, False, ApprovalOnPush.DISMISS, Step.DISMISS_APPROVAL),
        ([review("APPROVED", NEW, 1)], True, ApprovalOnPush.DISMISS, Step.NOT_BLOCKED),  # already this head
    ],
)
def test_a_push_reviews_a_block_on_request_and_never_leaves_an_approval_standing(
    mine: list[dict[str, Any]], on_push: bool, approval_on_push: ApprovalOnPush, expected: Step
) -> None:
    found = step(head(mine, on_push=on_push, approval_on_push=approval_on_push), ReviewMode.PUSH)
    assert found is expected


def test_a_closed_pull_request_is_never_reviewed_or_dismissed_on_a_push() -> None:
    open_one = head(APPROVED, on_push=True, approval_on_push=ApprovalOnPush.DISMISS)
    closed = Head(open_one.repo, {**open_one.pull, "state": "closed"}, open_one.mine, open_one.loaded)
    assert step(closed, ReviewMode.PUSH) is Step.CLOSED


T0 = 1_800_000_000.0
READY = rd.Snapshot(
    head_sha=NEW,
    base_ref="main",
    author="alice",
    draft=False,
    head_pushed_at=T0,
    mergeable=True,
    mergeable_state=rd.MergeState.CLEAN,
    checks=(rd.Check("test", rd.CheckState.PASSED, "actions", T0),),
    last_activity=T0,
    me=ME,
)
LATER = T0 + 601


@pytest.mark.parametrize(
    ("reviews", "outcome", "words"),
    [
        ((), rd.Outcome.READY, "no approval required or given"),
        ((rd.Review(ME, ReviewState.APPROVED, NEW, T0),), rd.Outcome.READY, "approved by `revbot[bot]`"),
        (
            (rd.Review(ME, ReviewState.APPROVED, OLD, T0),),
            rd.Outcome.WAITING,
            f"my approval is of an earlier commit, `{OLD[:12]}`: this head needs my review",
        ),
        (
            (rd.Review(ME, ReviewState.COMMENTED, OLD, T0),),
            rd.Outcome.WAITING,
            f"my review is of an earlier commit, `{OLD[:12]}`: this head needs my review",
        ),
        (
            (rd.Review(ME, ReviewState.DISMISSED, OLD, T0),),
            rd.Outcome.WAITING,
            "this head needs my review",
        ),
        (
            (rd.Review(ME, ReviewState.APPROVED, OLD, T0), rd.Review(ME, ReviewState.COMMENTED, NEW, T0 + 1)),
            rd.Outcome.READY,
            "no approval required or given",  # the approval is of another commit: not evidence
        ),
    ],
)
def test_readiness_counts_the_bots_approval_only_at_the_head(
    reviews: tuple[rd.Review, ...], outcome: rd.Outcome, words: str
) -> None:
    verdict = rd.decide(replace(READY, reviews=reviews), rd.Settings(), now=LATER)
    assert verdict is not None
    assert verdict.outcome is outcome
    assert words in verdict.headline
    assert not (verdict.looks_ready and any(r.commit != NEW and r.login == ME for r in reviews[-1:]))


@pytest.mark.parametrize(
    ("check", "reviews", "outcome", "words"),
    [
        (
            rd.CheckState.PASSED,
            (rd.Review(ME, ReviewState.APPROVED, NEW, T0),),
            rd.Outcome.READY,
            "approved by",
        ),
        # the bot commented (not everything analysed): its check holds the call
        (
            rd.CheckState.FAILED,
            (rd.Review(ME, ReviewState.COMMENTED, NEW, T0),),
            rd.Outcome.BLOCKED,
            "does not pass",
        ),
        (rd.CheckState.PENDING, (), rd.Outcome.WAITING, "my review of this head is still running"),
        # a block is said once, by the request for changes
        (
            rd.CheckState.FAILED,
            (rd.Review(ME, ReviewState.CHANGES_REQUESTED, NEW, T0),),
            rd.Outcome.BLOCKED,
            "changes requested by `revbot[bot]`",
        ),
    ],
)
def test_readiness_never_calls_ready_past_the_bots_own_failing_check(
    check: rd.CheckState, reviews: tuple[rd.Review, ...], outcome: rd.Outcome, words: str
) -> None:
    verdict = rd.decide(replace(READY, reviews=reviews, my_review_check=check), rd.Settings(), now=LATER)
    assert verdict is not None and verdict.outcome is outcome
    assert words in verdict.headline
    assert "does not pass" not in verdict.headline or outcome is rd.Outcome.BLOCKED
    if reviews and reviews[0].state == ReviewState.CHANGES_REQUESTED:
        assert "does not pass" not in verdict.headline
