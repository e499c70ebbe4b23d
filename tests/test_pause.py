"""``@revbot pause`` / ``@revbot resume`` (issue 29), end to end: while paused no review of any
trigger and no readiness comment, the check runs say who paused it; the state is the bot's own
comment on GitHub, so it survives a restart onto an empty database; only someone with write
access may change it, and a marker forged into someone else's comment means nothing."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from app.guards import BotIdentity
from app.review.rounds.markers import decode
from app.sandbox import Call
from app.usecases.pause import pause_marker, paused_by
from tests.conftest import FakeClock
from tests.harness import BOT, REPO, BotHarness

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

AUTHOR = "alice"
MAINTAINER = "maya"
DECOY = "revbot"
SETTLE = 5.0
BROKEN = {"src/app.py": "def handler():\n    return undefined_thing + 1\n"}
CONFIG = "review:\n  on_push: true\nreadiness:\n  enabled: true\n  comment: always\n"
PAUSED = "⏸ Paused by @maya: no reviews or readiness comments until `@revbot resume`"


class Pr:
    def __init__(self, harness: BotHarness, clock: FakeClock, tmp_path: Path) -> None:
        self.h = harness
        self.fake = harness.fake
        self.clock = clock
        self.tmp_path = tmp_path
        self.number = 0

    async def say(self, text: str, *, by: str) -> None:
        association = "MEMBER" if by == MAINTAINER else "CONTRIBUTOR"
        await self.fake.comment(REPO, self.number, text, by=by, author_association=association)
        await self.h.drain()

    async def tick(self, seconds: float) -> None:
        self.clock.advance(seconds)
        await self.h.drain()

    def reviews(self) -> list[Call]:
        return [
            c
            for c in self.fake.calls
            if c.method == "POST" and c.path.endswith(f"/pulls/{self.number}/reviews") and c.status == 200
        ]

    def bot_comments(self) -> list[str]:
        world = self.fake.world
        return [c.body for c in world.issue_comments_of(world.repo(REPO), self.number) if c.user == BOT]

    def readiness_comments(self) -> list[str]:
        return [b for b in self.bot_comments() if decode(b, "readiness") is not None]

    def check(self, name: str) -> tuple[str | None, str | None]:
        """The conclusion and title of the head's check run ``name``."""
        head = self.fake.world.pull(self.fake.world.repo(REPO), self.number).head_sha
        runs = [r for r in self.fake.world.check_runs.values() if r.name == name and r.head_sha == head]
        return (runs[-1].conclusion, runs[-1].title) if runs else (None, None)

    def check_title(self, name: str) -> str | None:
        return self.check(name)[1]

    async def restart_on_an_empty_database(self) -> None:
        """Another bot process with nothing of the first one's: a new database, new caches."""
        assert self.h.runtime is not None and self.h._runner is not None
        await self.h._runner.cleanup()
        self.h._runner = None
        await self.h.runtime.stop()
        self.h.database_path = self.tmp_path / "after-restart.sqlite3"
        self.h.start_fake = False
        await self.h.start()


@pytest.fixture
async def pr(tmp_path: Path) -> AsyncIterator[Pr]:
    clock = FakeClock(time.time())
    harness = BotHarness(tmp_path, clock=clock, env={"READINESS_SETTLE_SECONDS": str(SETTLE)})
    harness.fake.add_user(DECOY)
    harness.fake.add_user(MAINTAINER)
    harness.fake.set_association(REPO, MAINTAINER, "MEMBER")
    harness.fake.set_permission(REPO, MAINTAINER, "write")
    harness.fake.set_permission(REPO, AUTHOR, "read")
    state = Pr(harness, clock, tmp_path)
    state.number = harness.open_pull(
        BROKEN, base_files={"README.md": "# widgets\n", ".github/revbot.yml": CONFIG}, author=AUTHOR
    )
    await harness.start()
    yield state
    await harness.stop()
    harness.assert_conforms()


async def test_paused_means_no_review_and_no_readiness_comment_until_resumed_even_after_a_restart(
    pr: Pr,
) -> None:
    await pr.say("@revbot pause", by=MAINTAINER)
    [answer] = pr.bot_comments()
    assert answer.startswith("Paused by @maya: no reviews, re-reviews or readiness comments")

    await pr.fake.request_review(REPO, pr.number, DECOY, by=AUTHOR)
    await pr.say("@revbot review", by=AUTHOR)
    await pr.tick(2 * SETTLE)
    assert pr.reviews() == []
    assert pr.check_title("revbot review") == PAUSED
    assert pr.check_title("revbot readiness") == PAUSED  # followed (enabled), but silent
    assert pr.readiness_comments() == []

    await pr.restart_on_an_empty_database()
    pr.fake.push(REPO, "feature", {"src/app.py": "def handler():\n    return undefined_other + 1\n"})
    await pr.h.drain()
    await pr.say("@revbot review", by=MAINTAINER)
    await pr.tick(2 * SETTLE)
    assert pr.reviews() == []
    assert pr.check_title("revbot review") == PAUSED  # the new head's, after the restart
    assert pr.readiness_comments() == []

    await pr.say("@revbot resume", by=MAINTAINER)
    assert pr.bot_comments()[-1].startswith("Resumed by @maya.")
    await pr.say("@revbot review", by=AUTHOR)
    [review] = pr.reviews()
    assert review.body["event"] == "REQUEST_CHANGES"
    await pr.tick(2 * SETTLE)
    assert len(pr.readiness_comments()) == 1
    assert pr.check_title("revbot readiness") != PAUSED


async def test_an_author_without_write_access_can_neither_pause_nor_resume(pr: Pr) -> None:
    await pr.say("@revbot pause", by=AUTHOR)
    assert pr.bot_comments()[-1].startswith("@alice only people with write access")
    await pr.say("@revbot review", by=AUTHOR)
    assert len(pr.reviews()) == 1  # not paused

    await pr.say("@revbot pause", by=MAINTAINER)
    await pr.say("@revbot review", by=MAINTAINER)  # the blocked head again, while paused
    assert len(pr.reviews()) == 1
    assert pr.check("revbot review") == ("failure", "1 blocker")  # pausing never changes a verdict
    await pr.say("@revbot resume", by=AUTHOR)
    assert pr.bot_comments()[-1].startswith("@alice only people with write access")
    pr.fake.push(REPO, "feature", {"src/app.py": "def handler():\n    return undefined_other + 1\n"})
    await pr.h.drain()  # on_push would re-review the blocked PR: still paused, so it does not
    assert len(pr.reviews()) == 1
    assert pr.check("revbot review") == ("action_required", PAUSED)  # an unreviewed head holds


async def test_a_pause_marker_forged_into_someone_elses_comment_means_nothing(pr: Pr) -> None:
    forged = f"Pausing the bot, honest.\n\n{pause_marker(paused=True, by=MAINTAINER)}"
    await pr.say(forged, by=AUTHOR)
    await pr.fake.request_review(REPO, pr.number, DECOY, by=AUTHOR)
    await pr.h.drain()
    assert len(pr.reviews()) == 1
    assert pr.check_title("revbot review") != PAUSED


async def test_help_lists_pause_and_resume(pr: Pr) -> None:
    await pr.say("@revbot help", by=AUTHOR)
    [help_text] = pr.bot_comments()
    assert "| `@revbot pause` |" in help_text and "| `@revbot resume` |" in help_text


# ------------------------------------------------------------------------------- pure decisions
IDENTITY = BotIdentity(slug="revbot", decoy_login="revbot")


def said(comment_id: int, body: str, login: str = BOT) -> dict[str, object]:
    return {"id": comment_id, "user": {"login": login}, "body": body}


PAUSE = f"Paused.\n\n{pause_marker(paused=True, by=MAINTAINER)}"
RESUME = f"Resumed.\n\n{pause_marker(paused=False, by=MAINTAINER)}"


@pytest.mark.parametrize(
    ("comments", "by"),
    [
        ([], None),
        ([said(1, PAUSE)], MAINTAINER),
        ([said(1, PAUSE), said(2, RESUME)], None),
        ([said(2, RESUME), said(1, PAUSE)], None),  # the latest by id, whatever the listing order
        ([said(1, PAUSE), said(2, RESUME), said(3, PAUSE)], MAINTAINER),
        ([said(1, PAUSE, login=AUTHOR)], None),  # not the bot's words
        ([said(1, "> " + PAUSE.replace("\n", "\n> "))], None),  # quoted: not in the trailer
        ([said(1, PAUSE), said(2, RESUME, login=AUTHOR)], MAINTAINER),
    ],
)
def test_paused_by(comments: list[dict[str, object]], by: str | None) -> None:
    assert paused_by(comments, IDENTITY) == by
