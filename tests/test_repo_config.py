"""``.github/revbot.yml``: the repository's own file, else the owner's ``.github`` repository (as
Probot's config plugin reads it); an unusable file is said in the check run's summary, where the
people who wrote it look, and the defaults apply."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from app.sandbox import Call
from tests.harness import INSTALLATION, REPO, BotHarness

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

AUTHOR = "alice"
DECOY = "revbot"
OWNER_DEFAULTS = "octo/.github"


def contents_reads(bot: BotHarness) -> list[str]:
    return [c.path for c in bot.fake.calls if "/contents/.github/" in c.path]


def reviews(bot: BotHarness) -> list[Call]:
    return [
        c for c in bot.fake.calls if c.method == "POST" and c.path.endswith("/reviews") and c.status == 200
    ]


def final_summary(bot: BotHarness) -> str:
    [done] = [
        c
        for c in bot.fake.calls
        if c.method in ("POST", "PATCH") and "/check-runs" in c.path and c.body.get("status") == "completed"
    ]
    return str(done.body["output"]["summary"])


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[BotHarness]:
    harness = BotHarness(tmp_path)
    harness.fake.add_user(DECOY)
    harness.fake.add_repo(OWNER_DEFAULTS, installation_id=INSTALLATION)
    yield harness
    await harness.stop()
    harness.assert_conforms()


async def test_the_owners_dot_github_repository_supplies_the_settings(bot: BotHarness) -> None:
    bot.fake.push(OWNER_DEFAULTS, "main", {".github/revbot.yml": "review:\n  auto: true\n"})
    await bot.start()
    bot.open_pull({"a.py": "x = 1\n"}, author=AUTHOR, notify=True)  # auto: reviewed unasked
    await bot.drain()
    assert len(reviews(bot)) == 1
    assert contents_reads(bot) == [
        f"/repos/{REPO}/contents/.github/revbot.yml",
        f"/repos/{OWNER_DEFAULTS}/contents/.github/revbot.yml",
    ]


async def test_the_repositorys_own_file_wins(bot: BotHarness) -> None:
    bot.fake.push(OWNER_DEFAULTS, "main", {".github/revbot.yml": "review:\n  auto: true\n"})
    bot.fake.push(REPO, "main", {".github/revbot.yml": "review:\n  auto: false\n"})
    await bot.start()
    bot.open_pull({"a.py": "x = 1\n"}, author=AUTHOR, notify=True)
    await bot.drain()
    assert reviews(bot) == []
    assert contents_reads(bot) == [f"/repos/{REPO}/contents/.github/revbot.yml"]


async def test_an_owner_defaults_repository_the_app_cannot_see_means_defaults(bot: BotHarness) -> None:
    bot.fake.add_installation(99, "someone-else")
    bot.fake.world.repos.pop(OWNER_DEFAULTS.lower(), None)
    bot.fake.add_repo(OWNER_DEFAULTS, installation_id=99)  # not in this installation: GitHub says 404
    bot.fake.push(OWNER_DEFAULTS, "main", {".github/revbot.yml": "review:\n  auto: true\n"})
    await bot.start()
    number = bot.open_pull({"a.py": "x = 1\n"}, author=AUTHOR, notify=True)
    await bot.drain()
    assert reviews(bot) == []
    await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR)
    await bot.drain()
    assert len(reviews(bot)) == 1 and "Settings ignored" not in final_summary(bot)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("review: [unclosed\n", "not valid YAML"),
        ("review:\n  max_comments: lots\n", "review.max_comments"),
        (
            "review:\n  inline_min_severity: loud\n",
            "review.inline_min_severity: Input should be 'nit', 'concern' or 'blocker'; using the defaults",
        ),
        ("review:\n  max_nits: -1\n", "review.max_nits: Input should be greater than or equal to 0"),
        (
            "readiness:\n  comment: sometimes\n",
            "readiness.comment: Input should be 'actionable', 'always' or 'never'",
        ),
    ],
)
async def test_an_unusable_file_is_reported_in_the_check_run(
    bot: BotHarness, text: str, problem: str
) -> None:
    bot.fake.push(REPO, "main", {".github/revbot.yml": text})
    number = bot.open_pull({"a.py": "x = 1\n"}, author=AUTHOR)
    await bot.start()
    await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR)
    await bot.drain()
    assert len(reviews(bot)) == 1  # the defaults applied; the review happened
    summary = final_summary(bot)
    assert summary.startswith(f"**Settings ignored:** `{REPO}:.github/revbot.yml`")
    assert problem in summary.split("\n", 1)[0]


async def test_an_unusable_owner_default_is_reported_with_its_source(bot: BotHarness) -> None:
    bot.fake.push(OWNER_DEFAULTS, "main", {".github/revbot.yml": "reviews: {}\n"})
    number = bot.open_pull({"a.py": "x = 1\n"}, author=AUTHOR)
    await bot.start()
    await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR)
    await bot.drain()
    assert final_summary(bot).startswith(f"**Settings ignored:** `{OWNER_DEFAULTS}:.github/revbot.yml`")
