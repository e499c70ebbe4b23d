"""Re-review: GitHub's request for changes is sticky, so a re-review always re-decides it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from pathlib import Path

import pytest

from app.review.rounds.markers import ReviewMarker
from app.sandbox import Call
from tests.harness import BOT, REPO, BotHarness

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

AUTHOR = "alice"
DECOY = "revbot"
OTHERS = ["bob", "carol", "dave"]

BROKEN = {"src/app.py": "def handler():\n    return undefined_thing + 1\n"}
STILL_BROKEN = {
    "src/app.py": "def handler():\n    return undefined_thing + 2\n\n\ndef more():\n    return 1\n"
}
FIXED = {"src/app.py": "def handler():\n    return 1\n"}


def reviews_posted(bot: BotHarness) -> list[Call]:
    return [
        c for c in bot.fake.calls if c.method == "POST" and c.path.endswith("/reviews") and c.status == 200
    ]


def dismissals(bot: BotHarness) -> list[Call]:
    return [c for c in bot.fake.calls if c.method == "PUT" and c.path.endswith("/dismissals")]


async def harness(tmp_path: Path, **env: str) -> BotHarness:
    bot = BotHarness(tmp_path, env=env)
    bot.fake.add_user(DECOY)
    for login in OTHERS:
        bot.fake.add_user(login)
    return bot


@pytest.fixture
async def blocked(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[tuple[BotHarness, int]]:
    """A PR the bot has blocked (REQUEST_CHANGES at its first head)."""
    env = dict(getattr(request, "param", {}))
    config = env.pop("config", None)
    bot = await harness(tmp_path, **env)
    number = bot.open_pull(
        BROKEN, author=AUTHOR, base_files={".github/revbot.yml": config} if config else None
    )
    await bot.start()
    await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR)
    await bot.drain()
    assert bot.fake.review_decision(REPO, number) == "CHANGES_REQUESTED"
    yield bot, number
    await bot.stop()
    bot.assert_conforms()


async def push_and_rerequest(bot: BotHarness, number: int, files: Mapping[str, str | None]) -> None:
    bot.fake.push(REPO, "feature", files)
    await bot.drain()
    await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR)
    await bot.drain()


async def test_fixing_the_blockers_and_asking_again_gets_an_approval(blocked: tuple[BotHarness, int]) -> None:
    bot, number = blocked
    await push_and_rerequest(bot, number, FIXED)
    first, second = reviews_posted(bot)
    assert second.body["event"] == "APPROVE"
    assert "**Verified fixed**" in second.body["body"] and "python/F821" in second.body["body"]
    assert bot.fake.review_decision(REPO, number) == "APPROVED"
    assert dismissals(bot) == []
    assert ReviewMarker.read(second.body["body"]).head_sha != ReviewMarker.read(first.body["body"]).head_sha  # type: ignore[union-attr]


@pytest.mark.parametrize("blocked", [{"REVIEW_APPROVE": "false"}], indirect=True)
async def test_with_approval_disabled_every_block_is_dismissed_then_a_comment_posted(
    blocked: tuple[BotHarness, int],
) -> None:
    bot, number = blocked
    await push_and_rerequest(bot, number, STILL_BROKEN)
    assert [r.body["event"] for r in reviews_posted(bot)] == ["REQUEST_CHANGES", "REQUEST_CHANGES"]
    await push_and_rerequest(bot, number, FIXED)
    posted = reviews_posted(bot)
    assert posted[-1].body["event"] == "COMMENT"
    assert "I dismissed my request for changes" in posted[-1].body["body"]
    assert len(dismissals(bot)) == 2
    assert all(
        d.body["event"] == "DISMISS" and "verified fixed" in d.body["message"] for d in dismissals(bot)
    )
    assert bot.fake.review_decision(REPO, number) is None
    order = [(c.method, c.path.rsplit("/", 1)[-1]) for c in bot.fake.writes()]
    last_review = max(i for i, write in enumerate(order) if write == ("POST", "reviews"))
    assert all(i < last_review for i, write in enumerate(order) if write == ("PUT", "dismissals"))


@pytest.mark.parametrize("blocked", [{"REVIEW_APPROVE": "false"}], indirect=True)
async def test_a_refused_dismissal_says_plainly_that_the_block_stands(
    blocked: tuple[BotHarness, int],
) -> None:
    bot, number = blocked
    bot.fake.set_dismissal_forbidden(REPO)
    await push_and_rerequest(bot, number, FIXED)
    last = reviews_posted(bot)[-1]
    assert last.body["event"] == "COMMENT"
    assert "My earlier request for changes still stands." in last.body["body"]
    assert [d.status for d in dismissals(bot)] == [403]
    assert bot.fake.review_decision(REPO, number) == "CHANGES_REQUESTED"


async def test_a_block_buried_under_many_comment_reviews_is_still_found(
    blocked: tuple[BotHarness, int],
) -> None:
    bot, number = blocked
    for n in range(35):
        await bot.fake.submit_review(REPO, number, by=OTHERS[n % 3], event="COMMENT", body=f"note {n}")
    await bot.fake.submit_review(REPO, number, by=BOT, event="COMMENT", body="a comment by the bot")
    await bot.drain()
    assert bot.fake.review_decision(REPO, number) == "CHANGES_REQUESTED"
    await push_and_rerequest(bot, number, FIXED)
    last = reviews_posted(bot)[-1]
    assert last.body["event"] == "APPROVE"
    assert "Re-review:" in last.body["body"]
    assert bot.fake.review_decision(REPO, number) == "APPROVED"


async def test_blockers_still_present_request_changes_again_without_dismissing(
    blocked: tuple[BotHarness, int],
) -> None:
    bot, number = blocked
    await push_and_rerequest(bot, number, STILL_BROKEN)
    last = reviews_posted(bot)[-1]
    assert last.body["event"] == "REQUEST_CHANGES"
    assert "**Blockers still present**" in last.body["body"] or "**Still open**" in last.body["body"]
    assert dismissals(bot) == []
    assert bot.fake.review_decision(REPO, number) == "CHANGES_REQUESTED"


@pytest.mark.parametrize("blocked", [{"config": "review:\n  coalesce_seconds: 0\n"}], indirect=True)
async def test_asking_again_without_changes_posts_nothing_new(
    blocked: tuple[BotHarness, int],
) -> None:
    bot, number = blocked
    blob_reads = len([c for c in bot.fake.calls if c.path == "/graphql" and "Blobs" in (c.graphql or "")])
    await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR)
    await bot.drain()
    [first] = reviews_posted(bot)  # the head's review answers the ask: nothing new is posted
    assert first.body["event"] == "REQUEST_CHANGES"
    again = len([c for c in bot.fake.calls if c.path == "/graphql" and "Blobs" in (c.graphql or "")])
    assert again == blob_reads, "the unchanged head was analysed again"


@pytest.mark.parametrize("blocked", [{"config": "review:\n  on_push: true\n"}], indirect=True)
async def test_a_push_re_reviews_a_blocked_pr_when_the_repo_asks_for_it(
    blocked: tuple[BotHarness, int],
) -> None:
    bot, _ = blocked
    bot.fake.push(REPO, "feature", FIXED)
    await bot.drain()
    last = reviews_posted(bot)[-1]
    assert (last.body["event"], ReviewMarker.read(last.body["body"]).trigger) == ("APPROVE", "push")  # type: ignore[union-attr]


async def test_a_push_without_on_push_is_not_re_reviewed_but_its_fixed_threads_resolve(
    blocked: tuple[BotHarness, int],
) -> None:
    bot, _ = blocked
    before = len(bot.fake.writes())
    bot.fake.push(REPO, "feature", FIXED)
    await bot.drain()
    assert len(reviews_posted(bot)) == 1
    new_writes = bot.fake.writes()[before:]
    assert [(c.method, c.path) for c in new_writes] == [("POST", "/graphql")]
    assert "resolveReviewThread" in (new_writes[0].graphql or "")


@pytest.mark.parametrize("blocked", [{"config": "review:\n  coalesce_seconds: 0\n"}], indirect=True)
async def test_resolve_on_a_blocked_pr_checks_threads_and_posts_no_second_review(
    blocked: tuple[BotHarness, int],
) -> None:
    """Outside the coalescing window nothing but the command itself can keep a review from being
    posted: ``resolve`` must only check threads (it used to re-review as well)."""
    bot, number = blocked
    await bot.fake.comment(REPO, number, "@revbot resolve", by=AUTHOR)
    await bot.drain()
    assert len(reviews_posted(bot)) == 1
    replies = [c for c in bot.fake.calls if c.method == "POST" and c.path.endswith("/replies")]
    assert len(replies) == 1 and "Still there at" in replies[0].body["body"]
    eyes = [c for c in bot.fake.calls if c.method == "POST" and c.path.endswith("/reactions")]
    assert [c.body for c in eyes][-1] == {"content": "eyes"}
    assert len([c for c in eyes if "/issues/comments/" in c.path]) == 1  # reacted to once
