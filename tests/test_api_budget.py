"""What a review and a readiness look spend of the installation's API budget (5,000 requests an
hour; content creation is capped per minute), read from the fake GitHub's call log: the pull
request's state in one GraphQL request, nothing read twice, a check run written once."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from app.sandbox import Call
from tests.conftest import FakeClock
from tests.harness import REPO, BotHarness

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

AUTHOR = "alice"
DECOY = "revbot"
SETTLE = 5.0
BROKEN = {"src/app.py": "def handler():\n    return undefined_thing + 1\n", "src/util.py": "X = 1\n"}


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[tuple[BotHarness, FakeClock]]:
    """The bot with a fake clock: a readiness look runs only when the test lets time pass."""
    clock = FakeClock(time.time())
    harness = BotHarness(tmp_path, clock=clock, env={"READINESS_SETTLE_SECONDS": str(SETTLE)})
    harness.fake.add_user(DECOY)
    yield harness, clock
    await harness.stop()
    harness.assert_conforms()


def kinds(calls: list[Call]) -> list[str]:
    return [
        f"{c.method} {c.path}"
        if c.path != "/graphql"
        else f"POST graphql {(c.graphql or '').split()[1].partition('(')[0]}"
        for c in calls
        if not c.path.startswith("/app")
    ]


async def test_a_review_reads_the_pull_request_once_and_writes_its_check_run_once(
    bot: tuple[BotHarness, FakeClock],
) -> None:
    harness, _ = bot
    number = harness.open_pull(BROKEN, base_files={"src/util.py": "X = 0\n"}, author=AUTHOR)
    await harness.start()
    first = len(harness.fake.calls)
    await harness.fake.request_review(REPO, number, DECOY, by=AUTHOR)
    await harness.drain()
    calls = harness.fake.calls[first:]
    [review] = [i for i, c in enumerate(calls) if c.method == "POST" and c.path.endswith("/reviews")]
    pull = f"/repos/{REPO}/pulls/{number}"
    head = harness.fake.world.pull(harness.fake.world.repo(REPO), number).head_sha
    assert kinds(calls[:review]) == [
        f"POST /repos/{REPO}/issues/{number}/reactions",  # 👀: the request is seen
        "POST graphql PullState",  # the pull request, reviews, conversation, threads, runs, settings
        f"GET {pull}/files",  # the patches: REST only
        f"GET /repos/{REPO}/git/trees/{head}",  # the layout, recursive: REST only
        "POST graphql Blobs",  # the changed files' contents
        f"POST /repos/{REPO}/check-runs",  # created completed, nothing pending before; then the review
    ]
    # Only the modified file is read: the added one is its patch, checked against its blob id
    [blobs] = [c for c in calls[:review] if c.graphql and "Blobs" in c.graphql]
    assert sorted((blobs.variables or {}).values()) == sorted(
        [REPO.split("/")[0], REPO.split("/")[1], f"{head}:src/util.py"]
    )
    assert f"PATCH /repos/{REPO}/check-runs" not in " ".join(kinds(calls))
    [created] = [c for c in calls if c.method == "POST" and c.path == f"/repos/{REPO}/check-runs"]
    assert (created.body["status"], created.body["conclusion"]) == ("completed", "failure")


async def test_a_readiness_look_at_an_unchanged_pull_request_spends_at_most_two_calls(
    bot: tuple[BotHarness, FakeClock],
) -> None:
    harness, clock = bot
    number = harness.open_pull(BROKEN, author=AUTHOR)
    await harness.start()
    await harness.fake.request_review(REPO, number, DECOY, by=AUTHOR)
    await harness.drain()
    clock.advance(2 * SETTLE)  # the first look: it writes the readiness check run
    await harness.drain()
    assert any(r.name == "revbot readiness" for r in harness.fake.world.check_runs.values())
    before = len(harness.fake.calls)
    installation = harness.fake.world.repo(REPO).installation_id
    assert harness.runtime is not None and installation is not None
    # Another look, with nothing changed since the last (as a timer's look at a quiet pull request).
    now = clock.now
    await harness.runtime.timers.look_again(
        repo=REPO, pr_number=number, installation_id=installation, at=now + SETTLE, since=now
    )
    clock.advance(2 * SETTLE)
    await harness.drain()
    look = [c for c in harness.fake.calls[before:] if not c.path.endswith("/access_tokens")]
    assert sum(c.path == "/graphql" and "query PullState" in (c.graphql or "") for c in look) == 1
    counted = [c for c in look if c.status != 304]  # a conditional read answered 304 is free
    assert len(counted) <= 2, kinds(look)
