"""Commands cannot drain an installation (issue 36, row 7): a person's commands on a pull request
are budgeted (over it: silence, not even a reaction), a repeated question is answered once, a
review of an unchanged head is not posted again, and commands never spend the share of the
installation's content-creating budget kept for reviews."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from app.github.ratelimit import Cost, Resource
from app.sandbox import Call
from tests.harness import BOT, REPO, BotHarness, harness_with_decoy

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

AUTHOR = "mallory"
DECOY = "revbot"
BROKEN = {"src/app.py": "def handler():\n    return undefined_thing + 1\n"}


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[BotHarness]:
    async with harness_with_decoy(tmp_path, DECOY) as harness:
        yield harness


def writes(bot: BotHarness, since: int, suffix: str) -> list[Call]:
    return [
        c for c in bot.fake.calls[since:] if c.method == "POST" and c.path.endswith(suffix) and c.status < 300
    ]


def bot_comments(bot: BotHarness, number: int) -> list[str]:
    world = bot.fake.world
    return [c.body for c in world.issue_comments_of(world.repo(REPO), number) if c.user == BOT]


async def test_a_flood_of_help_is_answered_once_and_acknowledged_within_the_budget(bot: BotHarness) -> None:
    number = bot.open_pull({"src/ok.py": "x = 1\n"}, author=AUTHOR)
    await bot.start()
    before = len(bot.fake.calls)
    for _ in range(20):
        await bot.fake.comment(REPO, number, "@revbot help", by=AUTHOR)
    await bot.drain()
    assert len([b for b in bot_comments(bot, number) if "revbot review" in b]) == 1  # one answer
    reactions = writes(bot, before, "/reactions")
    assert 1 <= len(reactions) <= 5  # the person's budget on this pull request, then silence


async def test_asking_again_for_a_review_of_an_unchanged_head_posts_nothing_new(bot: BotHarness) -> None:
    # Not even the old coalescing window saves it: every ask after it used to post a full review.
    base = {"README.md": "# widgets\n", ".github/revbot.yml": "review:\n  coalesce_seconds: 0\n"}
    number = bot.open_pull(BROKEN, base_files=base, author=AUTHOR)
    await bot.start()
    await bot.fake.comment(REPO, number, "@revbot review", by=AUTHOR)
    await bot.drain()
    before = len(bot.fake.calls)
    for _ in range(3):
        await bot.fake.comment(REPO, number, "@revbot review", by=AUTHOR)
        await bot.drain()
    assert writes(bot, before, "/reviews") == []  # the blocked head's review stands: nothing new
    bot.fake.push(REPO, "feature", {"src/app.py": "def handler():\n    return 1\n"})
    await bot.drain()
    await bot.fake.comment(REPO, number, "@revbot review", by=AUTHOR)
    await bot.drain()
    assert len(writes(bot, before, "/reviews")) == 1  # a new head is reviewed


async def test_commands_leave_the_share_of_writes_kept_for_reviews(bot: BotHarness) -> None:
    number = bot.open_pull(BROKEN, author=AUTHOR)
    await bot.start()
    assert bot.runtime is not None
    pacer, installation = bot.runtime.pacer, next(iter(bot.fake.world.installations))
    # Other pull requests' writes have spent all but the reviews' share of this minute.
    spent = int(pacer.limits.content_per_minute * 0.75) + 1
    for _ in range(spent):
        async with pacer.request(installation, Cost(Resource.REST, 5, creates_content=True)):
            pass
    before = len(bot.fake.calls)
    await bot.fake.comment(REPO, number, "@revbot help", by=AUTHOR)
    await bot.drain()
    assert writes(bot, before, "/comments") == [] and writes(bot, before, "/reactions") == []
    await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR)  # a review still goes out
    await bot.drain()
    assert len(writes(bot, before, "/reviews")) == 1


@pytest.mark.parametrize("command", ["@revbot status", "@revbot learnings", "@revbot help"])
async def test_the_same_question_on_an_unchanged_pull_request_is_answered_once(
    bot: BotHarness, command: str
) -> None:
    number = bot.open_pull({"src/ok.py": "x = 1\n"}, author=AUTHOR)
    await bot.start()
    for _ in range(3):
        await bot.fake.comment(REPO, number, command, by=AUTHOR)
        await bot.drain()
    assert len(bot_comments(bot, number)) == 1
