"""Thread resolution: the bot closes only its own threads, only when the fix is there at head."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from app.commands import claims_fix
from app.guards import BotIdentity, is_bot_author
from app.review.core.model import Finding, ReviewResult, Severity, Verdict
from app.review.rounds.decide import is_fixed
from app.review.rounds.markers import FindingMarker, problem_key
from app.sandbox import Call
from tests.harness import BOT, REPO, BotHarness

AUTHOR = "alice"
REVIEWER = "rita"
DECOY = "revbot"

THREE_PROBLEMS = {
    "src/a.py": "def one():\n    return missing_one\n",
    "src/b.py": "def two():\n    return missing_two\n",
    "src/c.py": "def three():\n    return missing_three\n",
}


def resolutions(bot: BotHarness) -> list[Call]:
    return [c for c in bot.fake.calls if c.path == "/graphql" and "resolveReviewThread" in (c.graphql or "")]


def replies(bot: BotHarness) -> list[Call]:
    return [c for c in bot.fake.calls if c.method == "POST" and c.path.endswith("/replies")]


@dataclass(frozen=True)
class Thread:
    id: str
    root: int
    resolved: bool


def bot_thread(bot: BotHarness, number: int, path: str) -> Thread:
    """The (first) thread on ``path``, as the fake holds it now."""
    pull = bot.fake.world.pull(bot.fake.world.repo(REPO), number)
    for thread in bot.fake.world.threads_of(pull):
        root = bot.fake.world.review_comments[thread.comment_ids[0]]
        if root.path == path:
            return Thread(id=thread.node_id, root=thread.comment_ids[0], resolved=thread.is_resolved)
    raise AssertionError(f"no thread on {path}")


@pytest.fixture
async def reviewed(tmp_path: Path) -> AsyncIterator[tuple[BotHarness, int]]:
    """Three findings of the bot, in three threads, and one thread of a human reviewer."""
    bot = BotHarness(tmp_path)
    bot.fake.add_user(DECOY)
    bot.fake.add_user(REVIEWER)
    number = bot.open_pull({**THREE_PROBLEMS, "docs/notes.md": "notes\n"}, author=AUTHOR)
    await bot.start()
    await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR)
    await bot.fake.submit_review(
        REPO,
        number,
        by=REVIEWER,
        event="COMMENT",
        body="",
        comments=[{"path": "docs/notes.md", "line": 1, "side": "RIGHT", "body": "Please expand."}],
    )
    await bot.drain()
    yield bot, number
    await bot.stop()
    bot.assert_conforms()


@pytest.mark.e2e
@pytest.mark.slow
async def test_a_fix_pushed_and_claimed_resolves_only_the_fixed_bot_thread(
    reviewed: tuple[BotHarness, int],
) -> None:
    bot, number = reviewed
    bot.fake.push(REPO, "feature", {"src/a.py": "def one():\n    return 1\n"})
    await bot.drain()
    a, b = bot_thread(bot, number, "src/a.py"), bot_thread(bot, number, "src/b.py")
    human = bot_thread(bot, number, "docs/notes.md")
    await bot.fake.reply(REPO, number, a.root, "fixed", by=AUTHOR)
    await bot.fake.reply(REPO, number, b.root, "fixed", by=AUTHOR)
    await bot.fake.reply(REPO, number, human.root, "done, fixed", by=AUTHOR)
    await bot.drain()

    [resolve] = resolutions(bot)
    assert resolve.variables == {"threadId": a.id}
    assert resolve.response["data"]["resolveReviewThread"]["thread"]["isResolved"] is True
    assert bot_thread(bot, number, "src/a.py").resolved is True
    assert bot_thread(bot, number, "src/b.py").resolved is False
    assert bot_thread(bot, number, "docs/notes.md").resolved is False
    [answer] = replies(bot)
    assert answer.path.endswith(f"/comments/{b.root}/replies")
    assert "Still there at" in answer.body["body"] and "src/b.py" in answer.body["body"]


@pytest.mark.e2e
@pytest.mark.slow
async def test_a_second_claim_for_the_same_head_gets_no_second_answer(
    reviewed: tuple[BotHarness, int],
) -> None:
    bot, number = reviewed
    b = bot_thread(bot, number, "src/b.py")
    await bot.fake.reply(REPO, number, b.root, "fixed", by=AUTHOR)
    await bot.fake.reply(REPO, number, b.root, "really, it is fixed now", by=AUTHOR)
    await bot.drain()
    assert len(replies(bot)) == 1
    assert resolutions(bot) == []


@pytest.mark.e2e
@pytest.mark.slow
async def test_an_argument_is_not_a_fix(reviewed: tuple[BotHarness, int]) -> None:
    bot, number = reviewed
    c = bot_thread(bot, number, "src/c.py")
    await bot.fake.reply(REPO, number, c.root, "I disagree, the plugin loader defines it.", by=AUTHOR)
    await bot.drain()
    assert replies(bot) == [] and resolutions(bot) == []


@pytest.mark.slow
async def test_the_author_disputing_a_blocker_is_told_once_who_can_overrule_it(
    reviewed: tuple[BotHarness, int],
) -> None:
    bot, number = reviewed
    c = bot_thread(bot, number, "src/c.py")
    await bot.fake.reply(REPO, number, c.root, "This is intentional because of the plugin loader.", by=AUTHOR)
    await bot.fake.reply(REPO, number, c.root, "Really, it is on purpose.", by=AUTHOR)
    await bot.drain()
    [answer] = replies(bot)
    assert "cannot overrule a blocker" in answer.body["body"]
    assert resolutions(bot) == [] and bot_thread(bot, number, "src/c.py").resolved is False


@pytest.mark.e2e
@pytest.mark.slow
async def test_a_push_that_fixes_a_finding_resolves_its_thread_silently(
    reviewed: tuple[BotHarness, int],
) -> None:
    bot, number = reviewed
    bot.fake.push(REPO, "feature", {"src/c.py": None})
    await bot.drain()
    [resolve] = resolutions(bot)
    assert resolve.variables == {"threadId": bot_thread(bot, number, "src/c.py").id}
    assert replies(bot) == []
    echoes = [p for e, _, p, _ in bot.fake.webhooks_sent if e == "pull_request_review_thread"]
    assert [p["action"] for p in echoes] == ["resolved"] and echoes[0]["sender"]["login"] == BOT


@pytest.mark.e2e
@pytest.mark.slow
async def test_resolve_command_checks_every_open_thread(reviewed: tuple[BotHarness, int]) -> None:
    bot, number = reviewed
    await bot.fake.comment(REPO, number, "@revbot resolve", by=AUTHOR)
    await bot.drain()
    assert resolutions(bot) == []
    assert len(replies(bot)) == 3  # all three problems are still there; each thread says so once


@pytest.mark.e2e
@pytest.mark.slow
async def test_150_threads_the_bots_on_the_second_page(tmp_path: Path) -> None:
    bot = BotHarness(tmp_path)
    bot.fake.add_user(DECOY)
    bot.fake.add_user(REVIEWER)
    lines = "".join(f"value_{n} = {n}\n" for n in range(1, 150))
    number = bot.open_pull(
        {"data/values.py": lines, "src/z.py": "def z():\n    return missing_z\n"}, author=AUTHOR
    )
    await bot.start()
    try:
        await bot.fake.submit_review(
            REPO,
            number,
            by=REVIEWER,
            event="COMMENT",
            body="",
            comments=[
                {"path": "data/values.py", "line": n, "side": "RIGHT", "body": f"why {n}?"}
                for n in range(1, 150)
            ],
        )
        await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR)
        await bot.drain()
        assert len(bot.fake.threads(REPO, number)) == 150
        bot.fake.push(REPO, "feature", {"src/z.py": "def z():\n    return 0\n"})
        await bot.drain()
    finally:
        await bot.stop()
    bot.assert_conforms()
    pages = [c for c in bot.fake.calls if c.path == "/graphql" and "ReviewThreads" in (c.graphql or "")]
    assert any(c.variables and c.variables.get("after") for c in pages)
    [resolve] = resolutions(bot)
    assert resolve.variables == {"threadId": bot_thread(bot, number, "src/z.py").id}
    assert sum(t["is_resolved"] for t in bot.fake.threads(REPO, number)) == 1


IDENTITY = BotIdentity.from_slug("revbot")


@pytest.mark.parametrize(
    ("typename", "login", "is_bot"),
    [
        ("Bot", "revbot", True),  # GraphQL: an App's login without [bot]
        ("User", "revbot", False),  # the decoy user
        (None, "revbot[bot]", True),  # REST spelling
        ("Bot", "RevBot", True),
        ("Bot", "otherbot", False),
        ("User", "alice", False),
        (None, None, False),
    ],
)
def test_who_authored_a_thread(typename: str | None, login: str | None, is_bot: bool) -> None:
    assert is_bot_author(typename, login, IDENTITY) is is_bot


@pytest.mark.parametrize(
    ("reply", "claim"),
    [
        ("fixed", True),
        ("Fixed in the last commit, PTAL", True),
        ("done", True),
        ("✅", True),
        ("should be good now", True),
        ("This is intentional because of X", False),
        ("not a bug, it is fixed by design", False),
        ("why is this a problem?", False),
        ("> fixed\nI don't think so", False),
    ],
)
def test_what_counts_as_a_claimed_fix(reply: str, claim: bool) -> None:
    assert claims_fix(reply) is claim


MARKER = FindingMarker(
    head_sha="h", rule="python/F821", fingerprint="fp", path="a.py", line=2, severity="blocker", key="k"
)


def _found(fingerprint: str, message: str = "m", path: str = "a.py") -> Finding:
    return Finding(path, 9, Severity.BLOCKER, "python/F821", message, fingerprint)


@pytest.mark.parametrize(
    ("current", "fixed"),
    [
        ((), True),
        ((_found("fp"),), False),
        ((_found("other"),), True),
    ],
)
def test_is_fixed(current: tuple[Finding, ...], fixed: bool) -> None:
    assert is_fixed(MARKER, ReviewResult(Verdict.COMMENT, "s", current)) is fixed


def test_is_fixed_knows_the_problem_key_after_the_text_was_edited() -> None:
    keyed = replace(MARKER, key=problem_key("python/F821", "a.py", "m"))
    assert is_fixed(keyed, ReviewResult(Verdict.COMMENT, "s", (_found("edited"),))) is False


def test_a_thread_on_a_file_the_analysis_skipped_is_left_alone() -> None:
    from app.review.core.model import Finding, ReviewResult, Severity, Skipped, ThreadStatus, Verdict
    from app.review.rounds.decide import thread_status

    def result(
        skipped: tuple[Skipped, ...] = (), analysed: tuple[str, ...] = (), *findings: Finding
    ) -> ReviewResult:
        return ReviewResult(Verdict.APPROVE, "s", findings, skipped=skipped, analysed=analysed)

    assert (
        thread_status(MARKER, result((Skipped("a.py", "over the limit of 300 files (review.max_files)"),)))
        is ThreadStatus.CANNOT_TELL
    )
    assert thread_status(MARKER, result((Skipped("a.py", "file removed"),))) is ThreadStatus.FIXED
    assert thread_status(MARKER, result((), ("a.py",))) is ThreadStatus.FIXED
    still = Finding("a.py", 2, Severity.BLOCKER, "python/F821", "m", "fp")
    assert thread_status(MARKER, result((), ("a.py",), still)) is ThreadStatus.NOT_FIXED
