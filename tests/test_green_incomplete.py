"""Incomplete never passes (issue 36, row 4): a file built to crash or exhaust a tool costs only
its own analysis (the stage runs again without it, every other file's findings stand), and an
analysis the pull request made incomplete gives the review check ``action_required``, or
``failure`` while an earlier blocker stands unconfirmed; never ``neutral`` or ``success``, which
GitHub counts as passing a required check."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from app.sandbox import Call
from tests.harness import REPO, BotHarness, harness_with_decoy
from tests.test_review_linters import PWN
from tests.test_trusted_verdict import STACK_OVERFLOW, UNDEFINED

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

AUTHOR = "mallory"
DECOY = "revbot"
NESTED = "on: push\njobs: " + "[" * 3_000 + "]" * 3_000 + "\n"  # 6 KB that exhaust a YAML parser
PASSING = ("success", "neutral", "skipped")


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[BotHarness]:
    async with harness_with_decoy(tmp_path, DECOY) as harness:
        yield harness


def reviews(bot: BotHarness) -> list[Call]:
    return [
        c for c in bot.fake.calls if c.method == "POST" and c.path.endswith("/reviews") and c.status == 200
    ]


def conclusion(bot: BotHarness, number: int) -> str | None:
    world = bot.fake.world
    head = world.pull(world.repo(REPO), number).head_sha
    [run] = [r for r in world.check_runs.values() if r.head_sha == head and r.name == "revbot review"]
    return run.conclusion


def rules(review: Call) -> dict[str, str]:
    """Every inline comment's text, by path (a path may have several)."""
    found: dict[str, str] = {}
    for comment in review.body.get("comments", []):
        found[comment["path"]] = found.get(comment["path"], "") + comment["body"]
    return found


async def reviewed(bot: BotHarness, files: dict[str, str | None]) -> tuple[int, Call]:
    number = bot.open_pull(files, author=AUTHOR)
    await bot.start()
    await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR)
    await bot.drain()
    return number, reviews(bot)[-1]


@pytest.mark.parametrize(
    ("crafted", "blocker_path", "rule"),
    [
        (
            {".github/workflows/nested.yml": NESTED},
            ".github/workflows/pwn.yml",
            "workflow/dangerous-triggers",
        ),
        ({"src/big.py": STACK_OVERFLOW}, "src/app.py", "python/F821"),
        ({".ruff.toml/x.py": "x = 1\n"}, "src/app.py", "python/F821"),
    ],
    ids=["nested-yaml", "ruff-stack-overflow", "dir-named-like-a-config"],
)
async def test_a_crafted_file_never_hides_the_blockers_of_the_others(
    bot: BotHarness, crafted: dict[str, str | None], blocker_path: str, rule: str
) -> None:
    files = {**crafted, "src/app.py": UNDEFINED, ".github/workflows/pwn.yml": PWN}
    number, review = await reviewed(bot, files)
    assert review.body["event"] == "REQUEST_CHANGES"
    assert rule in rules(review)[blocker_path]
    crafted_path = next(iter(crafted))
    assert f"`{crafted_path}`" in review.body["body"]  # listed as not analysed, with why
    assert conclusion(bot, number) == "failure"


@pytest.mark.parametrize(
    "crafted",
    [
        {".github/workflows/nested.yml": NESTED},
        {"src/big.py": STACK_OVERFLOW},
        {".ruff.toml/x.py": "x = 1\n"},
    ],
    ids=["nested-yaml", "ruff-stack-overflow", "dir-named-like-a-config"],
)
async def test_an_analysis_the_pull_request_made_incomplete_never_passes(
    bot: BotHarness, crafted: dict[str, str | None]
) -> None:
    number, review = await reviewed(bot, {**crafted, "src/ok.py": "x = 1\n"})
    assert review.body["event"] == "COMMENT"
    assert conclusion(bot, number) == "action_required"
    assert conclusion(bot, number) not in PASSING
    [run] = [r for r in bot.fake.world.check_runs.values() if r.name == "revbot review"]
    assert (run.details_url or "").endswith(f"/pull/{number}")  # where the review says what was not


async def test_a_re_review_that_cannot_judge_the_blockers_file_fails(bot: BotHarness) -> None:
    """Blocked on an undefined name; the push rewrites that file into one that crashes ruff: the
    blocker cannot be confirmed fixed, so the check goes from failure to failure, not neutral."""
    number, first = await reviewed(bot, {"src/app.py": UNDEFINED})
    assert first.body["event"] == "REQUEST_CHANGES" and conclusion(bot, number) == "failure"
    bot.fake.push(REPO, "feature", {"src/app.py": STACK_OVERFLOW})
    await bot.drain()
    await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR)
    await bot.drain()
    last = reviews(bot)[-1]
    assert last.body["event"] == "COMMENT"
    assert "**Not confirmed fixed**" in last.body["body"]
    assert bot.fake.review_decision(REPO, number) == "CHANGES_REQUESTED"
    assert conclusion(bot, number) == "failure"
