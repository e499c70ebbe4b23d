"""An approval is for a head (issue 36, row 1): the bot approved a clean head, then the author
pushed a blocker. Its APPROVE must not stand on the new head, its review check must not pass
there, and readiness must not call the new head ready on the strength of the old approval."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from app.review.rounds.markers import ReviewMarker
from app.settings.repoconfig import ApprovalOnPush
from tests.conftest import FakeClock
from tests.harness import BOT, REPO, BotHarness
from tests.test_readiness_e2e import QUIET, SETTLED, Bot, green
from tests.test_review_linters import PWN

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

AUTHOR = "mallory"  # a stranger with a fork, as far as the bot can tell
MAINTAINER = "maria"
DECOY = "revbot"
CLEAN = {"src/app.py": "def handler():\n    return 1\n"}
BLOCKERS = {
    "src/app.py": "def handler():\n    return undefined_thing + 1\n",
    ".github/workflows/pwn.yml": PWN,
}
REVIEW_CHECK = "revbot review"


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[Bot]:
    clock = FakeClock(time.time())
    harness = BotHarness(tmp_path, clock=clock, env={"READINESS_SETTLE_SECONDS": "5"})
    harness.fake.add_user(DECOY)
    harness.fake.add_user(MAINTAINER)
    harness.fake.set_association(REPO, MAINTAINER, "MEMBER")
    yield Bot(harness, clock)
    await harness.stop()
    harness.assert_conforms()


def settings(on_push: bool, approval_on_push: ApprovalOnPush) -> dict[str, str | None]:
    text = f"review:\n  on_push: {str(on_push).lower()}\n  approval_on_push: {approval_on_push.value}\n"
    return {"README.md": "# widgets\n", ".github/revbot.yml": text}


def bot_reviews(bot: Bot, number: int) -> list[Any]:
    world = bot.fake.world
    return [r for r in world.reviews_of(world.pull(world.repo(REPO), number)) if r.user == BOT]


def review_check(bot: Bot, number: int) -> str | None:
    runs = [
        r
        for r in bot.fake.world.check_runs.values()
        if r.name == REVIEW_CHECK and r.head_sha == bot.head(number)
    ]
    return runs[-1].conclusion if runs else None


async def approved_then_pushed(bot: Bot, *, on_push: bool, approval_on_push: ApprovalOnPush) -> int:
    """The bot approves a clean head; then the author pushes blockers, and CI goes green."""
    bot.fake.push(REPO, "main", settings(on_push, approval_on_push))
    number = bot.h.open_pull(CLEAN, author=AUTHOR)
    await bot.h.start()
    await bot.fake.request_review(REPO, number, DECOY, by=MAINTAINER)
    await bot.h.drain()
    [approval] = bot_reviews(bot, number)
    assert (approval.state, approval.commit_id) == ("APPROVED", bot.head(number))
    bot.fake.push(REPO, "feature", BLOCKERS)
    await bot.h.drain()
    await green(bot, number, "test")
    await bot.tick(SETTLED + QUIET)
    return number


def assert_no_green(bot: Bot, number: int) -> None:
    head = bot.head(number)
    deciding = [r for r in bot_reviews(bot, number) if r.state in ("APPROVED", "CHANGES_REQUESTED")]
    standing = deciding[-1] if deciding else None  # the bot's opinion on GitHub: its latest decision
    assert standing is None or standing.state != "APPROVED", (
        f"the APPROVE of {standing.commit_id} stands on {head}"
    )
    assert bot.fake.review_decision(REPO, number) != "APPROVED"
    assert review_check(bot, number) not in ("success", "neutral", "skipped")
    conclusion, title = bot.check(number)
    assert conclusion != "success", title
    assert "Looks merge-ready" not in (title or "")


@pytest.mark.parametrize("on_push", [True, False], ids=["on_push", "no on_push"])
async def test_a_push_after_the_approval_is_reviewed_at_the_new_head(bot: Bot, on_push: bool) -> None:
    number = await approved_then_pushed(bot, on_push=on_push, approval_on_push=ApprovalOnPush.REVIEW)
    latest = bot_reviews(bot, number)[-1]
    assert (latest.state, latest.commit_id) == ("CHANGES_REQUESTED", bot.head(number))
    marker = ReviewMarker.read(latest.body)
    assert marker is not None and marker.trigger == "push"
    world = bot.fake.world
    inline = [
        c.body
        for c in world.review_comments_of(world.pull(world.repo(REPO), number))
        if c.review_id == latest.id
    ]
    assert "python/F821" in latest.body + "".join(inline)
    assert review_check(bot, number) == "failure"
    assert_no_green(bot, number)
    assert bot.headline(number).startswith("⛔ Blocked")


@pytest.mark.parametrize("on_push", [True, False], ids=["on_push", "no on_push"])
async def test_where_the_repository_says_dismiss_the_approval_goes_with_one_line(
    bot: Bot, on_push: bool
) -> None:
    number = await approved_then_pushed(bot, on_push=on_push, approval_on_push=ApprovalOnPush.DISMISS)
    [approval] = bot_reviews(bot, number)  # no new review: nobody asked for one
    assert approval.state == "DISMISSED"
    message = approval.dismissal_message
    assert bot.head(number)[:12] in message and "@revbot review" in message
    assert "\n" not in message
    assert review_check(bot, number) is None  # the new head is not judged: nothing passes
    assert_no_green(bot, number)
    assert "this head needs my review" in bot.headline(number)

    # A replay of the push finds nothing more to dismiss and posts nothing.
    writes = len(bot.fake.writes())
    payload = bot.fake.pull_request_payload(REPO, number, "synchronize", sender=AUTHOR)
    await bot.fake.send_webhook(
        "pull_request", {**payload, "before": approval.commit_id, "after": bot.head(number)}
    )
    await bot.h.drain()
    assert [c for c in bot.fake.writes()[writes:] if "/reviews" in c.path] == []


async def test_a_re_review_that_only_comments_does_not_leave_the_old_approval_standing(bot: Bot) -> None:
    """A COMMENT leaves a reviewer's earlier approval as its opinion on GitHub: it is dismissed."""
    bot.fake.push(REPO, "main", settings(False, ApprovalOnPush.REVIEW))
    number = bot.h.open_pull(CLEAN, author=AUTHOR)
    await bot.h.start()
    await bot.fake.request_review(REPO, number, DECOY, by=MAINTAINER)
    await bot.h.drain()
    safe_target = PWN.replace("          ref: ${{ github.event.pull_request.head.sha }}\n", "")
    bot.fake.push(REPO, "feature", {".github/workflows/label.yml": safe_target})
    await bot.h.drain()
    first, latest = bot_reviews(bot, number)
    assert latest.state == "COMMENTED" and latest.commit_id == bot.head(number)
    assert first.state == "DISMISSED" and "its review does not approve it" in first.dismissal_message
    assert bot.fake.review_decision(REPO, number) is None


async def test_readiness_never_counts_the_bots_approval_of_an_earlier_head(bot: Bot) -> None:
    """Between the push and the bot's review of the new head, the old approval is no evidence."""
    bot.fake.push(REPO, "main", settings(False, ApprovalOnPush.REVIEW))
    number = bot.h.open_pull(CLEAN, author=AUTHOR)
    await bot.h.start()
    await bot.fake.request_review(REPO, number, DECOY, by=MAINTAINER)
    await bot.h.drain()
    # A push whose delivery has not reached the bot yet (queued, or lost and not yet recovered).
    world = bot.fake.world
    pull = world.pull(world.repo(REPO), number)
    sha = bot.fake.add_commit(REPO, {"src/other.py": "x = undefined\n"}, parent=pull.head_sha)
    bot.fake.set_branch(REPO, "feature", sha)
    pull.head_sha = sha
    await green(bot, number, "test")
    await bot.tick(SETTLED + QUIET)
    conclusion, title = bot.check(number)
    assert conclusion != "success"
    assert title is not None and "my approval is of an earlier commit" in title


async def test_where_github_refuses_the_dismissal_the_new_head_is_reviewed_instead(bot: Bot) -> None:
    """A branch rule may keep the App from dismissing reviews: the approval must not stand on the
    new head all the same, so the bot reviews it, and its request for changes supersedes it."""
    bot.fake.set_dismissal_forbidden(REPO)
    number = await approved_then_pushed(bot, on_push=False, approval_on_push=ApprovalOnPush.DISMISS)
    latest = bot_reviews(bot, number)[-1]
    assert (latest.state, latest.commit_id) == ("CHANGES_REQUESTED", bot.head(number))
    assert_no_green(bot, number)
