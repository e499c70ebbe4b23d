"""Readiness end to end: the bot serving against the fake GitHub, a fake clock for the quiet
window (no test waits minutes), and every timer a row of the durable queue."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from app.review.markers import decode
from tests.conftest import FakeClock
from tests.harness import BOT, REPO, BotHarness

AUTHOR = "alice"
REVIEWER = "bob"
DECOY = "revbot"
SETTLE = 5.0
SETTLED = 2 * SETTLE  # a timer runs at the end of its slot: at most two settle times after its cause
QUIET = 600.0
BROKEN = {"src/app.py": "def handler():\n    return undefined_thing + 1\n"}
FIXED = {"src/app.py": "def handler():\n    return 1\n"}
CHECK = "revbot readiness"


class Bot:
    """The harness with its clock and what the tests read back."""

    def __init__(self, harness: BotHarness, clock: FakeClock) -> None:
        self.h = harness
        self.clock = clock
        self.fake = harness.fake

    async def tick(self, seconds: float) -> None:
        """Let ``seconds`` pass on the bot's and GitHub's clock, then let the bot finish its work."""
        self.clock.advance(seconds)
        await self.h.drain()

    def head(self, number: int) -> str:
        return self.fake.world.pull(self.fake.world.repo(REPO), number).head_sha

    def readiness_comments(self, number: int) -> list[str]:
        world = self.fake.world
        return [
            c.body
            for c in world.issue_comments_of(world.repo(REPO), number)
            if c.user == BOT and decode(c.body, "readiness") is not None
        ]

    def headline(self, number: int) -> str:
        [body] = self.readiness_comments(number)
        return body.split("\n", 1)[0]

    def check(self, number: int) -> tuple[str | None, str | None]:
        runs = [
            r
            for r in self.fake.world.check_runs.values()
            if r.name == CHECK and r.head_sha == self.head(number)
        ]
        if not runs:
            return None, None
        [run] = runs
        return run.conclusion, run.title

    def comment_edits(self) -> int:
        return len([c for c in self.fake.calls if c.method == "PATCH" and "/issues/comments/" in c.path])

    def readiness_writes(self) -> list[tuple[str, str]]:
        return [
            (c.method, c.path)
            for c in self.fake.writes()
            if "/issues/comments/" in c.path
            or (c.path.endswith("/issues/1/comments") and c.method == "POST")
            or "/check-runs" in c.path
        ]


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[Bot]:
    clock = FakeClock(time.time())
    harness = BotHarness(tmp_path, clock=clock, env={"READINESS_SETTLE_SECONDS": str(SETTLE)})
    harness.fake.add_user(DECOY)
    harness.fake.add_user(REVIEWER)
    harness.fake.set_association(REPO, REVIEWER, "MEMBER")
    yield Bot(harness, clock)
    await harness.stop()
    harness.assert_conforms()


async def reviewed_and_fixed(bot: Bot) -> int:
    """A PR the bot blocked, fixed, re-reviewed and approved by the bot and by a person."""
    number = bot.h.open_pull(BROKEN, author=AUTHOR)
    await bot.h.start()
    await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR)
    await bot.h.drain()
    bot.fake.push(REPO, "feature", FIXED)
    await bot.h.drain()
    await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR)
    await bot.h.drain()
    await bot.fake.submit_review(REPO, number, by=REVIEWER, event="APPROVE")
    await bot.h.drain()
    return number


async def green(bot: Bot, number: int, *names: str) -> None:
    for name in names:
        run = await bot.fake.start_check_run(REPO, bot.head(number), name)
        await bot.fake.complete_check_run(REPO, run, "success")
    await bot.h.drain()


async def test_reviewed_fixed_approved_green_and_quiet_is_one_ready_comment_and_a_success_check(
    bot: Bot,
) -> None:
    number = await reviewed_and_fixed(bot)
    await green(bot, number, "test", "lint")
    assert bot.readiness_comments(number) == []  # nothing before the burst settled
    await bot.tick(SETTLED)
    assert bot.headline(number).startswith("⏳ Waiting — a quiet window of 10 min")
    assert bot.check(number)[0] == "neutral"
    await bot.tick(QUIET)
    headline = bot.headline(number)
    assert headline.startswith("✅ Looks merge-ready — 2 check(s) passed, approved by ")
    assert "`bob`" in headline and "`revbot[bot]`" in headline
    assert headline.endswith("Your call to merge.")
    assert bot.check(number) == ("success", headline)
    [body] = bot.readiness_comments(number)
    assert "My reviews: 2 round(s), 1 finding(s); 1 of my 1 thread(s) verified fixed and resolved." in body
    assert not any(c.method == "PUT" and c.path.endswith("/merge") for c in bot.fake.calls)  # never merges
    assert await bot.h.timers() == []  # nothing left to look at
