"""Readiness end to end: the bot serving against the fake GitHub, a fake clock for the quiet
window (no test waits minutes), and every timer a row of the durable queue."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from app.review.rounds.markers import decode
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
ALWAYS = "readiness:\n  comment: always\n"


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
        """The call at the current head: the readiness check run's title, which carries every
        state (the sticky comment only those a person must act on: ``said``)."""
        title = self.check(number)[1]
        assert title is not None
        return title

    def said(self, number: int) -> str:
        """The first line of the sticky comment."""
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


def comment_always(bot: Bot) -> None:
    """The base's settings put every state in the sticky comment (``readiness.comment``)."""
    bot.fake.push(REPO, "main", {"README.md": "# widgets\n", ".github/revbot.yml": ALWAYS})


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


@pytest.mark.slow
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


async def ready_but_quiet(bot: Bot) -> int:
    """Reviewed, fixed, approved and green: only the quiet window is left."""
    number = await reviewed_and_fixed(bot)
    await green(bot, number, "test")
    await bot.tick(SETTLED)
    assert bot.headline(number).startswith("⏳ Waiting — a quiet window")
    return number


@pytest.mark.slow
async def test_a_push_restarts_it_waiting_for_ci_then_blocked_on_the_failing_check_then_ready(
    bot: Bot,
) -> None:
    number = await ready_but_quiet(bot)
    await bot.tick(QUIET)
    assert bot.headline(number).startswith("✅ Looks merge-ready")

    bot.fake.push(REPO, "feature", {"src/app.py": "def handler():\n    return 2\n"})
    run = await bot.fake.start_check_run(REPO, bot.head(number), "test")
    await bot.h.drain()
    await bot.tick(SETTLED)
    assert bot.headline(number) == "⏳ Waiting — check(s) still running: `test`"
    assert bot.check(number)[0] == "neutral"  # the check run of the new head

    await bot.fake.complete_check_run(REPO, run, "failure")
    await bot.tick(SETTLED)
    assert bot.headline(number) == "⛔ Blocked — failing check(s): `test`: fix them or re-run"
    assert bot.check(number)[0] == "neutral"  # never failure

    bot.fake.push(REPO, "feature", {"src/app.py": "def handler():\n    return 3\n"})
    await green(bot, number, "test")
    await bot.fake.submit_review(REPO, number, by=REVIEWER, event="APPROVE")  # bob looks again
    await bot.tick(SETTLED)
    assert bot.headline(number).startswith("⏳ Waiting — a quiet window")
    await bot.tick(QUIET)
    assert bot.headline(number).startswith("✅ Looks merge-ready — 1 check(s) passed")
    assert bot.check(number)[0] == "success"
    assert len(bot.readiness_comments(number)) == 1  # one place, edited in place
    [body] = bot.readiness_comments(number)
    assert "Heads seen: 4" in body  # opened, fixed, then two more pushes
    assert "CI failures seen: `test` on " in body and "all green since" in body


@pytest.mark.slow
async def test_classic_branch_protection_names_the_checks_that_count(bot: Bot) -> None:
    bot.fake.protect_branch(REPO, "main", contexts=["build"])
    number = await reviewed_and_fixed(bot)
    await green(bot, number, "test")
    lint = await bot.fake.start_check_run(REPO, bot.head(number), "lint")
    await bot.fake.complete_check_run(REPO, lint, "failure")  # not required: does not block
    await bot.tick(SETTLED + QUIET)
    assert bot.headline(number) == "⏳ Waiting — required check(s) not reported yet: `build`"
    await green(bot, number, "build")
    await bot.tick(SETTLED + QUIET)
    assert bot.headline(number).startswith("✅ Looks merge-ready — 1 check(s) passed")
    assert bot.check(number)[0] == "success"
    # read, not refused (a 304: unchanged since the bot's earlier, conditional, read)
    assert [c.status for c in bot.fake.calls if c.path == f"/repos/{REPO}/branches/main"][-1] in (200, 304)


HOLDS = ["human thread", "conflict", "requested reviewer", "reviewer bot's eyes"]


@pytest.mark.slow
@pytest.mark.parametrize("hold", HOLDS)
async def test_each_hold_keeps_the_call_with_its_reason_named(bot: Bot, hold: str) -> None:
    number = await ready_but_quiet(bot)
    if hold == "human thread":
        comment = {"path": "src/app.py", "line": 2, "body": "Why return 1?"}
        await bot.fake.submit_review(REPO, number, by=REVIEWER, event="COMMENT", comments=[comment])
        expected = "⛔ Blocked — 1 unresolved thread(s): `src/app.py:2` (bob): resolve or answer them"
    elif hold == "conflict":
        bot.fake.set_conflicts(REPO, number)  # the base moved: GitHub sends no event for that
        expected = "⛔ Blocked — it conflicts with `main`: merge or rebase to resolve the conflict"
    elif hold == "requested reviewer":
        bot.fake.add_user("carol")
        await bot.fake.request_review(REPO, number, "carol", by=AUTHOR)
        expected = "⏳ Waiting — review requested from `carol`, not given yet"
    else:
        bot.fake.react_to_pull(REPO, number, "eyes", by="codex[bot]")  # no webhook for reactions
        expected = "⏳ Waiting — a review still in flight: codex[bot] reacted 👀 (a review under way)"
    await bot.h.drain()
    await bot.tick(QUIET + SETTLED)
    assert bot.headline(number) == expected
    assert bot.check(number)[0] == "neutral"
    if hold == "reviewer bot's eyes":  # looked at again at 15 quiet minutes, called at 30
        assert len(await bot.h.timers()) == 1
        await bot.tick(30 * 60)
        headline = bot.headline(number)
        assert headline.startswith("🟡 Cautiously looks ready — ")
        assert "codex[bot] reacted 👀" in headline and headline.endswith("Your call to merge.")
        assert bot.check(number)[0] == "success"


@pytest.mark.slow
async def test_a_burst_of_100_check_runs_is_one_edit_per_settled_state(bot: Bot) -> None:
    comment_always(bot)
    number = await ready_but_quiet(bot)
    edits = bot.comment_edits()
    runs = [await bot.fake.start_check_run(REPO, bot.head(number), f"shard {i:03}") for i in range(50)]
    for run in runs:
        await bot.fake.complete_check_run(REPO, run, "success")
    await bot.h.drain()
    soon = [at for at in await bot.h.timers() if at <= bot.clock.now + SETTLED]
    assert len(soon) == 1  # one look for the whole burst (the other timer: the quiet window's end)
    await bot.tick(SETTLED)
    assert bot.comment_edits() == edits + 1
    assert bot.headline(number).startswith("⏳ Waiting — a quiet window")
    await bot.tick(QUIET)
    assert bot.comment_edits() == edits + 2
    assert bot.headline(number).startswith("✅ Looks merge-ready — 51 check(s) passed")


@pytest.mark.slow
@pytest.mark.parametrize("how", ["closed", "merged"])
async def test_nothing_runs_for_a_closed_or_merged_pull_request(bot: Bot, how: str) -> None:
    number = await reviewed_and_fixed(bot)
    await green(bot, number, "test")
    await bot.fake.close_pull(REPO, number, by=AUTHOR, merged=how == "merged")
    await bot.fake.comment(REPO, number, "thanks all", by=AUTHOR)
    await bot.h.drain()
    before = len(bot.fake.calls)
    await bot.tick(QUIET + SETTLED)
    assert bot.readiness_comments(number) == []
    assert bot.check(number) == (None, None)
    reads = [c.path for c in bot.fake.calls[before:] if not c.path.endswith("/access_tokens")]
    assert reads == ["/graphql"]  # the timer of the open days: one read (the state), then nothing
    assert await bot.h.timers() == []


@pytest.mark.slow
async def test_its_own_check_run_and_comment_echoes_wake_nothing(bot: Bot) -> None:
    comment_always(bot)  # the comment is created and edited: both echoes
    number = await ready_but_quiet(bot)
    await bot.tick(QUIET)
    assert bot.headline(number).startswith("✅")
    jobs = await bot.h.store.all_jobs()
    sent = {d for e, d, p, _ in bot.fake.webhooks_sent if (p.get("sender") or {}).get("login") == BOT}
    echoes = [j for j in jobs if j["delivery_id"] in sent and j["event"] in ("issue_comment", "check_run")]
    assert {(j["event"], j["action"]) for j in echoes} >= {
        ("issue_comment", "created"),
        ("issue_comment", "edited"),
        ("check_run", "created"),
    }
    assert all(json.loads(j["done_handlers"]) == [] for j in echoes)  # no handler ran for them
    assert await bot.h.timers() == []
    edits = bot.comment_edits()
    await bot.tick(QUIET + SETTLED)
    assert bot.comment_edits() == edits


@pytest.mark.slow
async def test_status_answers_at_once_in_the_same_words(bot: Bot) -> None:
    number = await ready_but_quiet(bot)
    await bot.fake.comment(REPO, number, "@revbot status", by=AUTHOR)
    await bot.h.drain()  # no clock moved: the answer does not wait for a timer
    world = bot.fake.world
    replies = [
        c.body
        for c in world.issue_comments_of(world.repo(REPO), number)
        if c.user == BOT and "status:" in c.body
    ]
    [reply] = replies
    assert reply.split("\n", 1)[0] == bot.headline(number)
    assert reply.startswith("⏳ Waiting — a quiet window")  # asking is not activity


@pytest.mark.slow
async def test_a_missing_permission_is_said_instead_of_guessed(bot: Bot) -> None:
    del bot.fake.shapes.app_info.permissions["statuses"]
    number = await reviewed_and_fixed(bot)
    await green(bot, number, "test")
    await bot.tick(SETTLED + QUIET)
    assert bot.headline(number) == (
        "⏳ Waiting — I cannot read commit statuses (statuses: read): grant the App that permission so I can"
        " judge it"
    )


@pytest.mark.slow
async def test_a_pull_request_turned_draft_again_does_not_keep_a_ready_call(bot: Bot) -> None:
    number = await ready_but_quiet(bot)
    await bot.tick(QUIET)
    assert bot.headline(number).startswith("✅")
    pull = bot.fake.world.pull(bot.fake.world.repo(REPO), number)
    pull.draft = True
    await bot.fake.send_webhook(
        "pull_request", bot.fake.pull_request_payload(REPO, number, "converted_to_draft", sender=AUTHOR)
    )
    await bot.tick(SETTLED)
    assert (
        bot.headline(number) == "⏳ Waiting — it is a draft again: I look again once it is ready for review"
    )
    assert bot.check(number)[0] == "neutral"


@pytest.mark.slow
async def test_mergeability_github_has_not_computed_is_waited_for_then_read_again(bot: Bot) -> None:
    number = await reviewed_and_fixed(bot)
    await green(bot, number, "test")
    bot.fake.set_mergeability_pending(REPO, number)  # the next read of the pull request is null
    await bot.tick(SETTLED)
    assert bot.headline(number) == "⏳ Waiting — GitHub is still computing whether it merges cleanly"
    await bot.tick(SETTLED)  # looked at again a settle time later: computed by then
    assert bot.headline(number).startswith("⏳ Waiting — a quiet window")


def comment_writes(bot: Bot, number: int) -> list[str]:
    """The sticky comment's writes, in order: ``post`` or ``edit``."""
    return [
        "post" if c.method == "POST" else "edit"
        for c in bot.fake.writes()
        if (
            c.method == "POST"
            and c.path.endswith(f"/issues/{number}/comments")
            and "readiness" in str(c.body)
        )
        or (c.method == "PATCH" and "/issues/comments/" in c.path and "readiness" in str(c.body))
    ]


@pytest.mark.slow
async def test_the_conversation_hears_only_what_a_person_must_act_on(bot: Bot) -> None:
    """Issue 29: the check run carries every state; the sticky comment appears for a block
    beyond the bot's own review and for "looks ready", and goes quiet (once) in between."""
    number = bot.h.open_pull(BROKEN, author=AUTHOR)
    await bot.h.start()
    await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR)
    await bot.tick(SETTLED)
    assert bot.headline(number).startswith("⛔ Blocked — changes requested by `revbot[bot]`")
    assert bot.readiness_comments(number) == []  # the review already says it

    bot.fake.push(REPO, "feature", FIXED)
    await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR)
    run = await bot.fake.start_check_run(REPO, bot.head(number), "test")
    await bot.tick(SETTLED)
    assert bot.headline(number) == "⏳ Waiting — check(s) still running: `test`"
    assert bot.readiness_comments(number) == []  # it may clear by itself

    await bot.fake.complete_check_run(REPO, run, "failure")
    await bot.tick(SETTLED)
    assert bot.said(number) == "⛔ Blocked — failing check(s): `test`: fix them or re-run"

    bot.fake.push(REPO, "feature", {"src/app.py": "def handler():\n    return 2\n"})
    await green(bot, number, "test")
    await bot.tick(SETTLED)
    assert bot.headline(number).startswith("⏳ Waiting — a quiet window")
    assert bot.said(number) == (
        "⏳ Not ready yet; the `revbot readiness` check run has the current state. "
        "I say here when it looks ready, or when something besides my review needs someone."
    )
    await bot.fake.comment(REPO, number, "CI is green now", by=REVIEWER)
    await bot.tick(SETTLED)  # another waiting state: the quiet comment stays as it is
    await bot.tick(QUIET)
    assert bot.said(number).startswith("✅ Looks merge-ready — 1 check(s) passed")
    assert bot.check(number) == ("success", bot.said(number))
    assert comment_writes(bot, number) == ["post", "edit", "edit"]
    [body] = bot.readiness_comments(number)
    assert "CI failures seen: `test` on " in body and "all green since" in body


@pytest.mark.slow
async def test_readiness_comment_never_keeps_the_conversation_silent(bot: Bot) -> None:
    bot.fake.push(
        REPO, "main", {"README.md": "# widgets\n", ".github/revbot.yml": "readiness:\n  comment: never\n"}
    )
    number = await ready_but_quiet(bot)
    await bot.tick(QUIET)
    assert bot.headline(number).startswith("✅ Looks merge-ready")
    assert bot.check(number)[0] == "success"
    assert bot.readiness_comments(number) == []


@pytest.mark.slow
async def test_a_pull_request_cannot_choose_how_readiness_talks(bot: Bot) -> None:
    """The fork's own settings file asks for every state in the conversation: the base's
    (default) rule applies, so waiting says nothing there."""
    number = bot.h.open_pull({**BROKEN, ".github/revbot.yml": ALWAYS}, author=AUTHOR)
    await bot.h.start()
    await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR)
    await bot.tick(SETTLED)
    assert bot.headline(number).startswith("⛔ Blocked — changes requested by `revbot[bot]`")
    assert bot.readiness_comments(number) == []
