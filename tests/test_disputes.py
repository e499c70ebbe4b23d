"""Overruling the bot, end to end through the bot's runtime and the fake GitHub: a dispute in a
thread withdraws the finding and re-decides the verdict (one review), the author alone cannot
overrule a blocker, a 👎 counts when the bot next looks, and learnings carry a dispute to the
repository's next pull requests until ``forget``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from app.review.rounds.overrule import Overrule
from app.sandbox import Call
from tests.harness import BOT, REPO, BotHarness

AUTHOR = "alice"
MAINTAINER = "mia"  # write access
PASSER_BY = "pat"  # read access
DECOY = "revbot"

BROKEN = {"src/app.py": "def handler():\n    return undefined_thing + 1\n"}
# The same code line in another file of the same directory: what a learning recognises.
SAME_LINE = {"src/other.py": "def handler():\n    return undefined_thing + 1\n"}
CONCERN = {"src/debug.py": "def handler():\n    breakpoint()\n    return 1\n"}


def reviews_posted(bot: BotHarness) -> list[Call]:
    return [
        c for c in bot.fake.calls if c.method == "POST" and c.path.endswith("/reviews") and c.status == 200
    ]


def replies(bot: BotHarness) -> list[Call]:
    return [c for c in bot.fake.calls if c.method == "POST" and c.path.endswith("/replies")]


def dismissals(bot: BotHarness) -> list[Call]:
    return [c for c in bot.fake.calls if c.method == "PUT" and c.path.endswith("/dismissals")]


def bot_thread(bot: BotHarness, number: int) -> tuple[str, int, bool]:
    """(node id, root comment id, resolved) of the bot's first thread on the PR."""
    world = bot.fake.world
    for thread in world.threads_of(world.pull(world.repo(REPO), number)):
        root = world.review_comments[thread.comment_ids[0]]
        if root.user == BOT:
            return thread.node_id, root.id, thread.is_resolved
    raise AssertionError("the bot has no thread")


def last_check_run_title(bot: BotHarness, number: int) -> str | None:
    runs = [r for r in bot.fake.world.check_runs.values() if r.head_sha == head_of(bot, number)]
    return runs[-1].title


def head_of(bot: BotHarness, number: int) -> str:
    return bot.fake.world.pull(bot.fake.world.repo(REPO), number).head_sha


async def start(tmp_path: Path, config: str | None = None, **env: str) -> BotHarness:
    bot = BotHarness(tmp_path, env=env)
    for login in (DECOY, MAINTAINER, PASSER_BY):
        bot.fake.add_user(login)
    bot.fake.set_permission(REPO, MAINTAINER, "write")
    bot.fake.set_permission(REPO, PASSER_BY, "read")
    bot.fake.push(
        REPO, "main", {"README.md": "# widgets\n", **({".github/revbot.yml": config} if config else {})}
    )
    await bot.start()
    return bot


async def open_and_review(bot: BotHarness, files: dict[str, str], *, branch: str = "feature") -> int:
    number = bot.open_pull(files, author=AUTHOR, branch=branch)
    await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR)
    await bot.drain()
    return number


@pytest.fixture
async def blocked(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[tuple[BotHarness, int]]:
    """A PR whose one blocker has the bot at CHANGES_REQUESTED."""
    bot = await start(tmp_path, **dict(getattr(request, "param", {})))
    number = await open_and_review(bot, BROKEN)
    assert bot.fake.review_decision(REPO, number) == "CHANGES_REQUESTED"
    yield bot, number
    await bot.stop()
    bot.assert_conforms()


@pytest.mark.slow
async def test_a_maintainer_overruling_the_last_blocker_gets_one_approval(
    blocked: tuple[BotHarness, int],
) -> None:
    bot, number = blocked
    _, root, _ = bot_thread(bot, number)
    await bot.fake.reply(REPO, number, root, "False positive: the plugin loader defines it.", by=MAINTAINER)
    await bot.drain()

    assert [r.body["event"] for r in reviews_posted(bot)] == ["REQUEST_CHANGES", "APPROVE"]
    assert bot.fake.review_decision(REPO, number) == "APPROVED"
    approval = reviews_posted(bot)[-1].body["body"]
    assert "**Overruled** on this pull request" in approval and "`mia`" in approval
    assert "1 finding overruled on this pull request" in approval
    assert "**Verified fixed**" not in approval  # overruled is not fixed
    [said] = replies(bot)
    assert said.body["body"].startswith("Overruled by @mia: False positive: the plugin loader defines it.")
    [recorded] = Overrule.read_all(said.body["body"])
    assert (recorded.by, recorded.rule, recorded.severity) == (MAINTAINER, "python/F821", "blocker")
    assert bot_thread(bot, number)[2] is True
    assert last_check_run_title(bot, number) == "No problems found (1 overruled)"
    # The permission was read from GitHub, for the person who replied.
    assert any(c.path == f"/repos/{REPO}/collaborators/{MAINTAINER}/permission" for c in bot.fake.calls)


@pytest.mark.slow
async def test_the_same_dispute_by_the_author_alone_changes_nothing(blocked: tuple[BotHarness, int]) -> None:
    bot, number = blocked
    _, root, _ = bot_thread(bot, number)
    await bot.fake.reply(REPO, number, root, "False positive: the plugin loader defines it.", by=AUTHOR)
    await bot.fake.reply(REPO, number, root, "@revbot dismiss it is intentional", by=AUTHOR)
    await bot.drain()

    assert [r.body["event"] for r in reviews_posted(bot)] == ["REQUEST_CHANGES"]
    assert bot.fake.review_decision(REPO, number) == "CHANGES_REQUESTED"
    [said] = replies(bot)  # one answer per person and thread
    assert "cannot overrule a blocker" in said.body["body"]
    assert Overrule.read_all(said.body["body"]) == []
    assert bot_thread(bot, number)[2] is False


@pytest.mark.slow
async def test_someone_without_write_access_cannot_overrule(blocked: tuple[BotHarness, int]) -> None:
    bot, number = blocked
    _, root, _ = bot_thread(bot, number)
    await bot.fake.reply(REPO, number, root, "won't fix", by=PASSER_BY)
    await bot.drain()
    assert bot.fake.review_decision(REPO, number) == "CHANGES_REQUESTED"
    [said] = replies(bot)
    assert "only people with write access" in said.body["body"]


@pytest.mark.slow
@pytest.mark.parametrize("blocked", [{"REVIEW_APPROVE": "false"}], indirect=True)
async def test_with_approval_disabled_the_overruled_block_is_dismissed(
    blocked: tuple[BotHarness, int],
) -> None:
    bot, number = blocked
    _, root, _ = bot_thread(bot, number)
    await bot.fake.reply(REPO, number, root, "@revbot dismiss generated at import time", by=MAINTAINER)
    await bot.drain()
    assert [r.body["event"] for r in reviews_posted(bot)] == ["REQUEST_CHANGES", "COMMENT"]
    [dismissal] = dismissals(bot)
    assert "verified fixed or overruled" in dismissal.body["message"]
    assert bot.fake.review_decision(REPO, number) is None


@pytest.mark.slow
async def test_a_thumbs_down_counts_when_the_bot_next_looks_at_its_threads(
    blocked: tuple[BotHarness, int],
) -> None:
    bot, number = blocked
    _, root, _ = bot_thread(bot, number)
    repo = bot.fake.world.repo(REPO)
    bot.fake.actions.react(repo, ("review_comment", root), AUTHOR, "-1")  # the author's: not enough
    await bot.fake.comment(REPO, number, "@revbot resolve", by=AUTHOR)
    await bot.drain()
    assert bot.fake.review_decision(REPO, number) == "CHANGES_REQUESTED"
    [still] = replies(bot)  # resolve's own answer: the problem is still there
    assert "Still there" in still.body["body"] and Overrule.read_all(still.body["body"]) == []

    bot.fake.actions.react(repo, ("review_comment", root), MAINTAINER, "-1")
    await bot.fake.comment(REPO, number, "@revbot resolve", by=AUTHOR)
    await bot.drain()
    assert [r.body["event"] for r in reviews_posted(bot)] == ["REQUEST_CHANGES", "APPROVE"]
    said = replies(bot)[-1]
    assert said.body["body"].startswith("Overruled by @mia (👎, no reason given).")
    assert len(replies(bot)) == 2
    assert bot_thread(bot, number)[2] is True


@pytest.mark.slow
async def test_a_dispute_in_a_comment_holding_two_findings_withdraws_both(tmp_path: Path) -> None:
    """A blocker and a nit on one line are one comment: disputed, the thread is resolved, so
    both are withdrawn (who may overrule it is decided by the blocker), and neither is posted
    again."""
    bot = await start(tmp_path)
    try:
        number = await open_and_review(bot, {"src/app.py": "def handler():\n    print(undefined_thing)\n"})
        _, root, _ = bot_thread(bot, number)
        await bot.fake.reply(REPO, number, root, "Intentional: the loader defines it.", by=MAINTAINER)
        await bot.drain()
        [said] = replies(bot)
        assert "`python/F821`, `debug/print` are withdrawn on this pull request." in said.body["body"]
        assert [o.rule for o in Overrule.read_all(said.body["body"])] == ["python/F821", "debug/print"]
        assert bot_thread(bot, number)[2] is True
        roots = [c for c in bot.fake.world.review_comments.values() if c.user == BOT and not c.in_reply_to_id]
        assert len(roots) == 1  # the print is not posted again
        approval = reviews_posted(bot)[-1].body
        assert (
            approval["event"] == "APPROVE" and "2 findings overruled on this pull request" in approval["body"]
        )
    finally:
        await bot.stop()
    bot.assert_conforms()


@pytest.mark.slow
async def test_the_author_may_overrule_a_concern_without_a_new_review(tmp_path: Path) -> None:
    bot = await start(tmp_path)
    try:
        number = await open_and_review(bot, CONCERN)
        assert [r.body["event"] for r in reviews_posted(bot)] == ["COMMENT"]
        _, root, _ = bot_thread(bot, number)
        await bot.fake.reply(REPO, number, root, "Intentional, this is a debugging helper.", by=AUTHOR)
        await bot.drain()
        assert bot_thread(bot, number)[2] is True
        assert [r.body["event"] for r in reviews_posted(bot)] == ["COMMENT"]  # nothing blocked: no review
        # Counted at once on the head's check run, not at the next review; never silently.
        [run] = [r for r in bot.fake.world.check_runs.values() if r.head_sha == head_of(bot, number)]
        assert (run.title, run.conclusion) == ("No problems found (1 overruled)", "success")
        assert run.summary is not None and run.summary.endswith(
            f"**Overruled since this review**:\n- `debug/breakpoint` `src/debug.py:2` by `{AUTHOR}`"
        )
        assert len(run.annotations) == 1  # the review's, not sent again
        # The next review of the PR leaves it out, and says so.
        bot.fake.push(REPO, "feature", {"README.md": "# widgets, again\n"})
        await bot.fake.comment(REPO, number, "@revbot review", by=AUTHOR)
        await bot.drain()
        last = reviews_posted(bot)[-1].body
        assert last["event"] == "APPROVE" and "1 finding overruled on this pull request" in last["body"]
    finally:
        await bot.stop()
    bot.assert_conforms()


@pytest.mark.slow
async def test_a_remembered_dispute_keeps_the_finding_out_of_the_next_pull_request_until_forgotten(
    tmp_path: Path,
) -> None:
    bot = await start(tmp_path)
    try:
        first = await open_and_review(bot, BROKEN)
        _, root, _ = bot_thread(bot, first)
        await bot.fake.reply(
            REPO, first, root, "@revbot dismiss --always defined by the loader", by=MAINTAINER
        )
        await bot.drain()
        assert bot.fake.review_decision(REPO, first) == "APPROVED"
        assert "Remembered for this repository as learning #1." in replies(bot)[-1].body["body"]
        [learning] = await bot.runtime.learnings.of_repo(REPO)  # type: ignore[union-attr]
        assert (learning.key.rule, str(learning.key.pattern)) == ("python/F821", "src/*.py")

        second = await open_and_review(bot, SAME_LINE, branch="second")
        review = reviews_posted(bot)[-1].body
        assert review["event"] == "APPROVE"
        assert "1 finding left out by the repository's learnings" in review["body"]

        await bot.fake.comment(REPO, second, "@revbot learnings", by=AUTHOR)
        await bot.drain()
        listing = bot.fake.world.issue_comments_of(bot.fake.world.repo(REPO), second)[-1].body
        assert "#\u20601 python/F821 in `src/*.py`" in listing  # the number is no link to issue 1

        await bot.fake.comment(REPO, second, "@revbot forget 1", by=AUTHOR)  # the author may not
        await bot.drain()
        assert len(await bot.runtime.learnings.of_repo(REPO)) == 1  # type: ignore[union-attr]
        await bot.fake.comment(REPO, second, "@revbot forget 1", by=MAINTAINER, author_association="MEMBER")
        await bot.drain()
        assert await bot.runtime.learnings.of_repo(REPO) == []  # type: ignore[union-attr]

        third = await open_and_review(bot, SAME_LINE, branch="third")
        assert reviews_posted(bot)[-1].body["event"] == "REQUEST_CHANGES"
        assert bot.fake.review_decision(REPO, third) == "CHANGES_REQUESTED"
    finally:
        await bot.stop()
    bot.assert_conforms()
