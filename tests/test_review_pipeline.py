"""One review pipeline (issue 28): the command line prints exactly what the bot posts, and a
review reads what it needs from GitHub once."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from app.sandbox import Call
from tests.fake_llm import FakeModelServer, flag_marked_lines
from tests.harness import BOT, REPO, BotHarness
from tests.test_review_cli import cli_review_json as cli_review

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
AUTHOR = "alice"
MAINTAINER = "mia"
DECOY = "revbot"

CHANGE = {
    "src/app.py": (
        "import os\n\n\ndef handler():\n    return undefined_thing + 1\n\n\ndef debug():\n    print(os.sep)\n"
    ),
    "src/service.py": "def total(items):\n    return sum(items[:-1])  # BUG\n",
    "notes.md": "a note\n",
}
# The repository's own rules, read from the base: fewer inline comments, nits left out, no approval.
SETTINGS = "review:\n  approve: false\n  max_comments: 1\n  inline_min_severity: concern\n"
# The review's moment: the one value of a review that is not a function of the pull request.
ISSUED_AT = re.compile(r'"issued_at":\s*[0-9.]+')


def reviews_posted(bot: BotHarness) -> list[Call]:
    return [
        c for c in bot.fake.calls if c.method == "POST" and c.path.endswith("/reviews") and c.status == 200
    ]


def unstamped(text: str) -> str:
    return ISSUED_AT.sub('"issued_at": 0', text)


@pytest.fixture
async def model() -> AsyncIterator[FakeModelServer]:
    server = await FakeModelServer(flag_marked_lines).start()
    yield server
    await server.stop()


def reviewer_env(reviewer: str, model: FakeModelServer) -> dict[str, str]:
    if reviewer == "builtin":
        return {"REVIEWER": "builtin"}
    return {
        "REVIEWER": "llm",
        "LLM_BASE_URL": model.openai_url,
        "LLM_MODEL": "fake-model",
        "LLM_API_KEY": "sk-test-not-a-real-key",
    }


@pytest.mark.parametrize("settings", [None, SETTINGS], ids=["defaults", "repository settings"])
@pytest.mark.parametrize("reviewer", ["builtin", "llm"])
async def test_the_command_line_prints_exactly_the_review_the_bot_posts(
    tmp_path: Path, model: FakeModelServer, reviewer: str, settings: str | None
) -> None:
    env = {**reviewer_env(reviewer, model), "REVIEW_APPROVE": "true", "APP_SLUG": "revbot"}
    bot = BotHarness(tmp_path, env=env)
    bot.fake.add_user(DECOY)
    base = {"README.md": "# widgets\n", **({".github/revbot.yml": settings} if settings else {})}
    number = bot.open_pull(CHANGE, base_files=base, author=AUTHOR)
    await bot.start()
    try:
        printed, _ = await cli_review(bot, number, env)
        assert bot.fake.writes() == []  # printed, nothing posted
        await bot.fake.comment(REPO, number, "@revbot review", by=AUTHOR, author_association="OWNER")
        await bot.drain()
        [posted] = reviews_posted(bot)
    finally:
        await bot.stop()
    bot.assert_conforms()
    assert printed["event"] == posted.body["event"]
    assert unstamped(printed["body"]) == unstamped(posted.body["body"])
    assert printed["comments"] == posted.body.get("comments", [])
    assert printed["said"] == []
    if settings is not None:  # the repository's rules, not the defaults, made this review
        assert printed["event"] == "REQUEST_CHANGES" and len(printed["comments"]) == 1


async def test_asked_again_about_a_head_it_answered_the_command_line_says_it_would_not_post(
    tmp_path: Path,
) -> None:
    bot = BotHarness(tmp_path)
    bot.fake.add_user(DECOY)
    number = bot.open_pull({"src/ok.py": "X = 1\n"}, author=AUTHOR)
    await bot.start()
    try:
        await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR)
        await bot.drain()
        assert [r.body["event"] for r in reviews_posted(bot)] == ["APPROVE"]
        printed, _ = await cli_review(bot, number)
    finally:
        await bot.stop()
    assert (printed["event"], printed["said"]) == (None, ["not reviewing: coalesced"])


BROKEN = {"src/app.py": "def handler():\n    return undefined_thing + 1\n\n\ndef other():\n    return nope\n"}


@pytest.mark.parametrize("reviewer", ["builtin", "llm"])
async def test_a_rereview_reads_the_threads_and_the_comments_once(
    tmp_path: Path, model: FakeModelServer, reviewer: str
) -> None:
    """A re-review with open threads, one of them 👎'd by a maintainer (an overrule the review
    records): one GraphQL query of the threads, one listing of the review comments."""
    bot = BotHarness(tmp_path, env=reviewer_env(reviewer, model))
    for login in (DECOY, MAINTAINER):
        bot.fake.add_user(login)
    bot.fake.set_permission(REPO, MAINTAINER, "write")
    number = bot.open_pull(BROKEN, author=AUTHOR)
    await bot.start()
    try:
        await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR)
        await bot.drain()
        world = bot.fake.world
        roots = [
            world.review_comments[t.comment_ids[0]]
            for t in world.threads_of(world.pull(world.repo(REPO), number))
        ]
        assert [r.user for r in roots] == [BOT, BOT]
        bot.fake.actions.react(world.repo(REPO), ("review_comment", roots[0].id), MAINTAINER, "-1")
        [run] = [r for r in world.check_runs.values() if r.name == "revbot review"]
        before = len(bot.fake.calls)
        await bot.fake.rerequest_check_run(REPO, run.id, by=AUTHOR)  # "Re-run": reviews again
        await bot.drain()
        calls = bot.fake.calls[before:]
    finally:
        await bot.stop()
    bot.assert_conforms()
    thread_queries = [c for c in calls if c.path == "/graphql" and "reviewThreads" in (c.graphql or "")]
    listings = [c for c in calls if c.method == "GET" and c.path == f"/repos/{REPO}/pulls/{number}/comments"]
    assert (len(thread_queries), len(listings)) == (1, 1), [(c.method, c.path, c.status) for c in calls]
    [rereview] = [c for c in calls if c.method == "POST" and c.path.endswith("/reviews")]
    assert rereview.body["event"] == "REQUEST_CHANGES"  # one blocker overruled, one still there
    assert "overruled" in rereview.body["body"].lower()
