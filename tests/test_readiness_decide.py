"""The readiness decision, table-driven: every gate alone, their weights, and the quiet window."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.events import ReviewState
from app.settings.repoconfig import ReadinessComment
from app.usecases.readiness.decide import (
    STALL_GIVE_UP,
    STALL_LOOK_AGAIN,
    Block,
    Check,
    CheckState,
    MergeState,
    Note,
    OpenThread,
    Outcome,
    Review,
    ReviewDecision,
    Rules,
    Settings,
    Snapshot,
    Verdict,
    decide,
    latest_reviews,
    reviews_in_flight,
    says_in_progress,
    speaks,
)

T0 = 1_800_000_000.0
HEAD = "h2"
QUIET = Settings(quiet_seconds=600.0)

READY = Snapshot(
    head_sha=HEAD,
    base_ref="main",
    author="alice",
    draft=False,
    head_pushed_at=T0,
    mergeable=True,
    mergeable_state=MergeState.CLEAN,
    checks=(Check("test", CheckState.PASSED, "actions", T0), Check("ci/lint", CheckState.PASSED, None, T0)),
    reviews=(Review("bob", ReviewState.APPROVED, HEAD, T0),),
    last_activity=T0,
)
LATER = T0 + 601


def test_the_ready_snapshot_is_ready_with_its_evidence() -> None:
    verdict = decide(READY, QUIET, now=LATER)
    assert verdict is not None and verdict.outcome == Outcome.READY
    assert verdict.headline == (
        "✅ Looks merge-ready — 2 check(s) passed, approved by `bob`, no unresolved threads, "
        "quiet for 10 min or more. Your call to merge."
    )
    assert verdict.look_again_at is None and verdict.looks_ready


CASES: list[tuple[str, Snapshot, Outcome, str]] = [
    (
        "failing check",
        replace(READY, checks=(Check("test", CheckState.FAILED, "actions", T0),)),
        Outcome.BLOCKED,
        "⛔ Blocked — failing check(s): `test`: fix them or re-run",
    ),
    (
        "failing status",
        replace(READY, checks=(Check("ci/lint", CheckState.FAILED, None, T0),)),
        Outcome.BLOCKED,
        "⛔ Blocked — failing check(s): `ci/lint`",
    ),
    (
        "running check",
        replace(READY, checks=(Check("test", CheckState.PENDING, "actions", T0),)),
        Outcome.WAITING,
        "⏳ Waiting — check(s) still running: `test`",
    ),
    (
        "changes requested",
        replace(READY, reviews=(Review("carol", ReviewState.CHANGES_REQUESTED, HEAD, T0),)),
        Outcome.BLOCKED,
        "⛔ Blocked — changes requested by `carol`",
    ),
    (
        "approval required",
        replace(READY, reviews=(), review_decision=ReviewDecision.REVIEW_REQUIRED),
        Outcome.BLOCKED,
        "⛔ Blocked — the branch rules require an approving review",
    ),
    (
        "pending requested reviewer",
        replace(READY, requested=("dave",)),
        Outcome.WAITING,
        "⏳ Waiting — review requested from `dave`, not given yet",
    ),
    (
        "unresolved human thread",
        replace(READY, threads=(OpenThread("app.py", 3, "erin"),)),
        Outcome.BLOCKED,
        "⛔ Blocked — 1 unresolved thread(s): `app.py:3` (erin)",
    ),
    (
        "conflict",
        replace(READY, mergeable=False, mergeable_state=MergeState.DIRTY),
        Outcome.BLOCKED,
        "⛔ Blocked — it conflicts with `main`: merge or rebase",
    ),
    (
        "mergeability not computed",
        replace(READY, mergeable=None, mergeable_state=MergeState.UNKNOWN),
        Outcome.WAITING,
        "⏳ Waiting — GitHub is still computing whether it merges cleanly",
    ),
    (
        "behind, rules strict",
        replace(READY, mergeable_state=MergeState.BEHIND, rules=Rules(known=True, strict=True)),
        Outcome.BLOCKED,
        "⛔ Blocked — it is behind `main` and the branch rules require it up to date",
    ),
    (
        "behind, rules lax",
        replace(READY, mergeable_state=MergeState.BEHIND, rules=Rules(known=True, strict=False)),
        Outcome.READY,
        "✅ Looks merge-ready — 2 check(s) passed, approved by `bob`, no unresolved threads, behind `main`"
        " (the rules do not require it up to date)",
    ),
    (
        "behind, strictness unreadable",
        replace(READY, mergeable_state=MergeState.BEHIND, rules=Rules(known=True, strict=None)),
        Outcome.READY,
        "✅ Looks merge-ready — 2 check(s) passed, approved by `bob`, no unresolved threads, behind `main`"
        " (I cannot read whether the rules require it up to date)",
    ),
    (
        "required check absent",
        replace(READY, rules=Rules(known=True, required_checks=frozenset({"build"}))),
        Outcome.WAITING,
        "⏳ Waiting — required check(s) not reported yet: `build`",
    ),
    (
        "a failing check that is not required",
        replace(
            READY,
            checks=(*READY.checks, Check("flaky", CheckState.FAILED, "actions", T0)),
            rules=Rules(known=True, required_checks=frozenset({"test"})),
        ),
        Outcome.READY,
        "✅ Looks merge-ready — 1 check(s) passed",
    ),
    (
        "missing permission",
        replace(READY, missing_permissions=("commit statuses (statuses: read)",)),
        Outcome.WAITING,
        "⏳ Waiting — I cannot read commit statuses (statuses: read)",
    ),
    (
        "not quiet yet",
        replace(READY, last_activity=LATER - 60),
        Outcome.WAITING,
        "⏳ Waiting — a quiet window of 10 min without activity (until ",
    ),
    (
        "a draft, opted in",
        replace(READY, draft=True),
        Outcome.BLOCKED,
        "⛔ Blocked — it is a draft: mark it ready for review",
    ),
    (
        "blocked outweighs waiting",
        replace(READY, requested=("dave",), threads=(OpenThread("a.py", None, "erin"),)),
        Outcome.BLOCKED,
        "⛔ Blocked — 1 unresolved thread(s): `a.py` (erin)",
    ),
]


@pytest.mark.parametrize(("name", "snapshot", "outcome", "start"), CASES, ids=[c[0] for c in CASES])
def test_each_gate(name: str, snapshot: Snapshot, outcome: Outcome, start: str) -> None:
    settings = replace(QUIET, drafts=True)
    verdict = decide(snapshot, settings, now=LATER)
    assert verdict is not None
    assert verdict.outcome == outcome, verdict.headline
    assert verdict.headline.startswith(start), verdict.headline


def test_a_draft_is_not_reported_unless_the_repository_asks() -> None:
    assert decide(replace(READY, draft=True), QUIET, now=LATER) is None


def test_ignored_checks_do_not_count() -> None:
    snapshot = replace(READY, checks=(*READY.checks, Check("slow-e2e", CheckState.FAILED, "x", T0)))
    assert decide(snapshot, QUIET, now=LATER).outcome == Outcome.BLOCKED  # type: ignore[union-attr]
    lenient = replace(QUIET, ignore_checks=frozenset({"slow-e2e"}))
    assert decide(snapshot, lenient, now=LATER).outcome == Outcome.READY  # type: ignore[union-attr]


def test_the_quiet_window_ends_at_last_activity_plus_the_window() -> None:
    verdict = decide(replace(READY, last_activity=T0 + 100), QUIET, now=T0 + 200)
    assert verdict is not None and verdict.outcome == Outcome.WAITING
    assert verdict.look_again_at == T0 + 700
    assert decide(replace(READY, last_activity=T0 + 100), QUIET, now=T0 + 700).outcome == Outcome.READY  # type: ignore[union-attr]


IN_FLIGHT: list[tuple[str, Snapshot, str]] = [
    (
        "a reviewer of an earlier head",
        replace(READY, reviews=(*READY.reviews, Review("gina", ReviewState.COMMENTED, "h1", T0 - 50))),
        "gina reviewed an earlier commit, not this one",
    ),
    (
        "a reviewer bot's eyes",
        replace(READY, notes=(Note("codex[bot]", True, T0 - 500),)),
        "codex[bot] reacted 👀",
    ),
    (
        "a reviewer bot's in-progress comment",
        replace(READY, notes=(Note("rabbit[bot]", True, T0 + 1, "Review in progress…"),)),
        "rabbit[bot] says its review is in progress",
    ),
    (
        "a reviewer bot's running check",
        replace(
            READY,
            checks=(*READY.checks, Check("Rabbit review", CheckState.PENDING, "rabbit", T0)),
            notes=(Note("rabbit[bot]", True, T0 - 900, "Summary of the last review"),),
        ),
        "rabbit's check `Rabbit review` is still running",
    ),
]


@pytest.mark.parametrize(("name", "snapshot", "sign"), IN_FLIGHT, ids=[c[0] for c in IN_FLIGHT])
def test_a_review_in_flight_holds_the_call_then_is_named_after_30_minutes(
    name: str, snapshot: Snapshot, sign: str
) -> None:
    at_window = decide(snapshot, QUIET, now=LATER)
    assert at_window is not None and at_window.outcome == Outcome.WAITING
    assert sign in at_window.headline
    assert at_window.look_again_at == T0 + STALL_LOOK_AGAIN
    at_15 = decide(snapshot, QUIET, now=T0 + STALL_LOOK_AGAIN)
    assert at_15 is not None and at_15.outcome == Outcome.WAITING
    assert at_15.look_again_at == T0 + STALL_GIVE_UP
    at_30 = decide(snapshot, QUIET, now=T0 + STALL_GIVE_UP)
    assert at_30 is not None and at_30.outcome == Outcome.CAUTIOUS
    assert at_30.headline.startswith("🟡 Cautiously looks ready — ")
    assert sign in at_30.headline and at_30.headline.endswith("Your call to merge.")


def test_signs_that_are_not_a_review_in_flight() -> None:
    done = replace(
        READY,
        reviews=(*READY.reviews, Review("codex[bot]", ReviewState.COMMENTED, HEAD, T0)),
        notes=(Note("codex[bot]", True, T0 - 500), Note("human", False, T0 + 1, "reviewing now")),
    )
    assert reviews_in_flight(done) == []
    old_comment = replace(READY, notes=(Note("rabbit[bot]", True, T0 - 1, "Review in progress"),))
    assert reviews_in_flight(old_comment) == []  # said about an earlier head


def test_a_later_comment_does_not_undo_an_approval_but_a_later_block_does() -> None:
    reviews = [
        Review("bob", ReviewState.APPROVED, "h1", T0),
        Review("bob", ReviewState.COMMENTED, "h2", T0 + 1),
        Review("carol", ReviewState.APPROVED, "h1", T0),
        Review("carol", ReviewState.CHANGES_REQUESTED, "h2", T0 + 1),
        Review("dan", ReviewState.PENDING, "h2", T0 + 1),
    ]
    latest = latest_reviews(reviews)
    assert {k: r.state for k, r in latest.items()} == {
        "bob": ReviewState.APPROVED,
        "carol": ReviewState.CHANGES_REQUESTED,
    }


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("Reviewing your changes…", True),
        ("⏳ Review in progress", True),
        ("Started a review of 3 files", True),
        ("All good, no issues found", False),
        ("Summary: two findings", False),
    ],
)
def test_in_progress_words(text: str, says: bool) -> None:
    assert says_in_progress(text) is says


ME = "revbot[bot]"
MINE = replace(READY, me=ME)
BOT_BLOCKS = replace(
    MINE,
    reviews=(Review(ME, ReviewState.CHANGES_REQUESTED, HEAD, T0),),
    threads=(OpenThread("a.py", 3, ME),),
)


@pytest.mark.parametrize(
    ("name", "snapshot", "blocks", "actionable"),
    [
        ("ready", MINE, frozenset(), True),
        ("the bot's own review and threads", BOT_BLOCKS, {Block.BOT_REVIEW, Block.BOT_THREADS}, False),
        (
            "a person's request for changes",
            replace(MINE, reviews=(Review("bob", ReviewState.CHANGES_REQUESTED, HEAD, T0),)),
            {Block.CHANGES_REQUESTED},
            True,
        ),
        (
            "the bot's review and a failing check",
            replace(BOT_BLOCKS, checks=(Check("test", CheckState.FAILED, "actions", T0),)),
            {Block.BOT_REVIEW, Block.BOT_THREADS, Block.FAILING_CHECKS},
            True,
        ),
        (
            "the bot's review and a human thread",
            replace(BOT_BLOCKS, threads=(OpenThread("a.py", 3, ME), OpenThread("b.py", 1, "bob"))),
            {Block.BOT_REVIEW, Block.BOT_THREADS, Block.THREADS},
            True,
        ),
        (
            "the bot's review and a conflict",
            replace(BOT_BLOCKS, mergeable=False, mergeable_state=MergeState.DIRTY),
            {Block.BOT_REVIEW, Block.BOT_THREADS, Block.CONFLICT},
            True,
        ),
        (
            "behind a base the rules want current",
            replace(MINE, mergeable_state=MergeState.BEHIND, rules=Rules(known=True, strict=True)),
            {Block.BEHIND},
            True,
        ),
        (
            "an approval the rules require",
            replace(MINE, reviews=(), review_decision=ReviewDecision.REVIEW_REQUIRED),
            {Block.APPROVAL_REQUIRED},
            True,
        ),
        (
            "checks still running",
            replace(MINE, checks=(Check("test", CheckState.PENDING, "actions", T0),)),
            frozenset(),
            False,
        ),
    ],
)
def test_what_holds_the_call_and_whether_a_person_must_act(
    name: str, snapshot: Snapshot, blocks: frozenset[Block], actionable: bool
) -> None:
    verdict = decide(snapshot, QUIET, now=LATER)
    assert verdict is not None
    assert verdict.blocks == blocks
    assert verdict.actionable is actionable


WAITING_CALL = Verdict(Outcome.WAITING, "⏳ Waiting — x", ())
BOT_BLOCKED = Verdict(Outcome.BLOCKED, "⛔ Blocked — x", (), blocks=frozenset({Block.BOT_REVIEW}))
CI_BLOCKED = Verdict(Outcome.BLOCKED, "⛔ Blocked — x", (), blocks=frozenset({Block.FAILING_CHECKS}))
READY_CALL = Verdict(Outcome.READY, "✅ Looks merge-ready — x", ())
CAUTIOUS_CALL = Verdict(Outcome.CAUTIOUS, "🟡 Cautiously looks ready — x", ())
PAUSED_CALL = Verdict(Outcome.PAUSED, "⏸ Paused by @maya", ())


@pytest.mark.parametrize(
    ("verdict", "actionable", "always", "never"),
    [
        (WAITING_CALL, False, True, False),
        (BOT_BLOCKED, False, True, False),
        (CI_BLOCKED, True, True, False),
        (READY_CALL, True, True, False),
        (CAUTIOUS_CALL, True, True, False),
        (PAUSED_CALL, False, False, False),  # paused: never a word in the conversation
    ],
)
def test_when_the_call_goes_into_the_comment(
    verdict: Verdict, actionable: bool, always: bool, never: bool
) -> None:
    assert speaks(verdict, ReadinessComment.ACTIONABLE) is actionable
    assert speaks(verdict, ReadinessComment.ALWAYS) is always
    assert speaks(verdict, ReadinessComment.NEVER) is never
