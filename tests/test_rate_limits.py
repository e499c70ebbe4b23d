"""GitHub's rate limits against the real bot: the fake enforces them, the bot paces itself
below them, and when a lowered limit still refuses a write it is retried after ``Retry-After``,
nothing lost and nothing posted twice. Every clock here is one fake clock: the fake's windows,
the bot's pacing, its sleeps and its queue."""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import and_, func, or_, select

from app.events import TIMER_EVENT
from app.github.graphql import RESOLVE_THREAD
from app.github.ratelimit import Cost, PaceLimits, Pacer, Resource, Window, cost_of, is_mutation
from app.sandbox.ratelimits import RateLimits
from app.sandbox.ratelimits import Resource as FakeResource
from app.store import deliveries
from tests.conftest import FakeClock
from tests.harness import BOT, FAST_WORKER, INSTALLATION, METRICS_TOKEN, REPO, REVIEW_CHECK, BotHarness
from tests.test_metrics import scrape, value

DECOY = "revbot"
AUTHOR = "alice"
QUIET_INSTALLATION, QUIET_REPO = 88, "quiet/app"
# Leases far longer than any advance of the fake clock: the one worker never claims its own jobs.
WORKER = replace(FAST_WORKER, lease_seconds=86_400.0)


def paced_bot(tmp_path: Path, clock: FakeClock, limits: PaceLimits | None = None) -> BotHarness:
    bot = BotHarness(tmp_path, clock=clock, worker_options=WORKER)
    bot.fake.add_user(DECOY)
    bot.fake.limiter.clock = clock

    async def sleep(seconds: float) -> None:
        clock.advance(seconds)
        await asyncio.sleep(0)

    bot.pacer = Pacer(limits, clock=clock, wall=clock, sleep=sleep)
    return bot


async def queued_for_later(bot: BotHarness) -> int:
    """Jobs put back to wait for GitHub's limits (readiness timers, due in a day, aside)."""
    d = deliveries.c
    waiting = select(func.count()).where(d.status.in_(("queued", "waiting")), d.event != TIMER_EVENT)
    async with bot.store.backend.read() as conn:
        return int((await conn.execute(waiting)).scalar_one())


async def settle(bot: BotHarness, clock: FakeClock) -> int:
    """Until every job is done, moving the clock on by a minute whenever all that is left waits
    for a rate limit; how many minutes that took."""
    d = deliveries.c
    minutes = 0
    for _ in range(5000):
        await bot.fake.settle(timeout=60)
        now = clock()
        due = or_(d.status == "running", and_(d.status == "queued", d.run_after <= now))
        async with bot.store.backend.read() as conn:
            busy = int((await conn.execute(select(func.count()).where(due))).scalar_one())
        if busy == 0:
            if not await queued_for_later(bot):
                return minutes
            minutes += 1
            assert minutes < 200, "the jobs never got through the rate limits"
            clock.advance(60)
            assert bot.runtime is not None and bot.runtime.worker is not None
            bot.runtime.worker.wake()
        await asyncio.sleep(0.02)
    raise AssertionError("the bot never settled")


async def review_each(bot: BotHarness, clock: FakeClock, numbers: list[int]) -> dict[str, int]:
    """Start the bot, ask the decoy to review each pull request, and settle (moving the clock on
    past the rate limits); the jobs by status, read before the bot stops."""
    await bot.start()
    try:
        for number in numbers:
            await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR)
        await settle(bot, clock)
        statuses: dict[str, int] = await bot.store.jobs_by_status()
    finally:
        await bot.stop()
    return statuses


def open_pulls(bot: BotHarness, count: int) -> list[int]:
    bot.fake.push(REPO, "main", {"README.md": "# widgets\n"})
    return [
        bot.open_pull({f"src/m{n}.py": f"def f{n}():\n    return {n}\n"}, branch=f"b{n}")
        for n in range(count)
    ]


ISSUED_AT = re.compile(r'"issued_at":[0-9.e+-]+')


def content_posts(bot: BotHarness) -> list[tuple[str, str, int]]:
    """Each content write: path, body, status. A review's marker records the moment it was issued,
    which a retry after Retry-After issues again: set aside, so the retry is the same write
    whichever of the writes the lowered limit happened to refuse."""
    out = []
    for c in bot.fake.calls:
        if c.method == "POST" and c.auth == "token" and c.path != "/graphql":
            body = dict(c.body) if isinstance(c.body, dict) else c.body
            if isinstance(body, dict) and isinstance(body.get("body"), str):
                body["body"] = ISSUED_AT.sub('"issued_at":0', body["body"])
            out.append((c.path, json.dumps(body, sort_keys=True), c.status))
    return out


def created_writes(posts: list[tuple[str, str, int]]) -> Counter[tuple[str, str]]:
    """How often each content write created something: a reaction that exists is answered 200
    and created again by nobody; a review is answered 200."""
    return Counter(
        (path, body)
        for path, body, status in posts
        if status == 201 or (path.endswith("/reviews") and 200 <= status < 300)
    )


def test_costs_as_github_counts_them() -> None:
    assert cost_of("GET", "http://h/repos/o/r/pulls/1?per_page=100", graphql=False, mutation=False) == Cost(
        Resource.REST, 1, False
    )
    assert cost_of("POST", "http://h/repos/o/r/issues/1/comments", graphql=False, mutation=False) == Cost(
        Resource.REST, 5, True
    )
    assert cost_of("PATCH", "http://h/repos/o/r/check-runs/1", graphql=False, mutation=False) == Cost(
        Resource.REST, 5, False
    )
    assert cost_of(
        "POST", "http://h/app/installations/7/access_tokens", graphql=False, mutation=False
    ) == Cost(Resource.REST, 5, False)
    assert cost_of("POST", "http://h/graphql", graphql=True, mutation=True) == Cost(Resource.GRAPHQL, 5, True)
    assert is_mutation(json.dumps({"query": RESOLVE_THREAD, "variables": {"threadId": "x"}}).encode())
    assert not is_mutation(b'{"query": "query Blobs { mutation }"}')
    # A pull request's text travels in variables: it never makes a query count as a write.
    hostile = {"query": "query Blobs($e0: String!) { x }", "variables": {"e0": "mutation { x }"}}
    assert not is_mutation(json.dumps(hostile).encode())


def test_a_sliding_window_says_when_the_next_request_fits() -> None:
    window = Window(60.0, 3)
    for at in (0.0, 10.0, 20.0):
        assert window.wait(at, 1) == 0.0
        window.add(at, 1)
    assert window.wait(30.0, 1) == 30.0  # the first leaves at 60
    assert window.wait(30.0, 2) == 40.0  # the second too, at 70
    assert window.wait(60.0, 1) == 0.0


def test_a_spent_installation_gives_each_deferred_job_its_own_turn() -> None:
    clock = FakeClock(0.0)
    pacer = Pacer(PaceLimits(content_per_minute=2), clock=clock)
    assert pacer.admission(1, "first") == 0.0
    content = Cost(Resource.REST, 5, True)
    for _ in range(2):
        pacer._of(1).content[0].add(clock(), 1)
    # 30 s apart: 2 a minute; each job keeps its turn however often it asks.
    assert [pacer.admission(1, job) for job in ("a", "b", "c", "b")] == [60.0, 90.0, 120.0, 90.0]
    assert pacer.admission(2, "other") == 0.0  # another installation is not held by it
    assert pacer.wait_before(1, content) == 60.0
    clock.advance(90)
    assert pacer.admission(1, "b") == 0.0  # back at its turn
    assert pacer.admission(1, "d") == 60.0  # a newcomer goes behind c's turn
    pacer.hold(2, 5.0)  # GitHub's Retry-After holds every request of that installation
    assert pacer.wait_before(2, Cost(Resource.REST, 1, False)) == 5.0


@pytest.mark.parametrize(
    ("headers", "held"),
    [
        ({"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "1030"}, 30.0),  # spent: until its reset
        ({"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1000"}, 1.0),  # reset now: a second
        ({"X-RateLimit-Remaining": "1", "X-RateLimit-Reset": "1030"}, 0.0),  # one left: no hold
        ({"X-RateLimit-Remaining": "0"}, 0.0),  # no reset to wait for
        ({}, 0.0),
    ],
)
def test_a_spent_primary_limit_holds_the_installation_until_its_reset(
    headers: dict[str, str], held: float
) -> None:
    clock = FakeClock(0.0)
    pacer = Pacer(clock=clock, wall=lambda: 1000.0)
    pacer.answered(1, headers)
    assert pacer.wait_before(1, Cost(Resource.REST, 1, False)) == held
    assert pacer.wait_before(2, Cost(Resource.REST, 1, False)) == 0.0  # another installation: free


async def test_a_lowered_limit_refuses_writes_and_each_is_retried_once_after_retry_after(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    bot = paced_bot(tmp_path, clock)  # the bot paces at GitHub's real limits ...
    bot.fake.limiter.limits = RateLimits(content_per_minute=2)  # ... which this fake lowered
    numbers = open_pulls(bot, 4)
    statuses = await review_each(bot, clock, numbers)
    bot.assert_conforms()

    posts = content_posts(bot)
    refused = [(path, body) for path, body, status in posts if status == 403]
    assert refused, "the lowered limit was never reached"
    accepted = Counter((path, body) for path, body, status in posts if 200 <= status < 300)
    for write in refused:
        assert accepted[write] >= 1  # retried, and got through
    created = created_writes(posts)
    assert all(count == 1 for count in created.values()), created
    assert {(path, body) for path, body, _ in posts} == set(created)  # every write created once
    reviews = Counter(path for path, _, status in posts if path.endswith("/reviews") and status == 200)
    assert reviews == Counter({f"/repos/{REPO}/pulls/{n}/reviews": 1 for n in numbers})
    assert set(statuses) <= {"done", "queued"}  # queued: the readiness timers, due in a day
    assert statuses.get("failed", 0) == 0


@pytest.mark.parametrize("refused", [r"check-runs", r"pulls/\d+/reviews"])
async def test_a_write_refused_for_minutes_mid_review_is_done_by_the_retry(
    tmp_path: Path, refused: str
) -> None:
    """The review and its check run are two writes: whichever GitHub's secondary limit refuses
    for minutes (the job waits, put back), the retry still does it, once. A head must never
    keep the bot's review without its check run, which a branch may require."""
    clock = FakeClock()
    bot = paced_bot(tmp_path, clock)
    [number] = open_pulls(bot, 1)
    bot.fake.fail_next(
        "POST",
        rf"/repos/{REPO}/{refused}$",
        status=403,
        headers={"Retry-After": "120"},
        body={"message": "You have exceeded a secondary rate limit. Please wait a few minutes."},
    )
    statuses = await review_each(bot, clock, [number])
    bot.assert_conforms()
    written = [status for path, _, status in content_posts(bot) if re.search(f"{refused}$", path)]
    assert written[0] == 403 and len(written) == 2 and 200 <= written[1] < 300  # refused, then done
    world = bot.fake.world
    head = world.pull(world.repo(REPO), number).head_sha
    reviews = [r for r in world.reviews_of(world.pull(world.repo(REPO), number)) if r.user == BOT]
    assert [(r.state, r.commit_id) for r in reviews] == [("APPROVED", head)]
    runs = [r for r in world.check_runs.values() if r.head_sha == head and r.name == REVIEW_CHECK]
    assert [(r.status, r.conclusion) for r in runs] == [("completed", "success")]
    created = created_writes(content_posts(bot))
    assert all(count == 1 for count in created.values()), created
    assert statuses.get("failed", 0) == 0


async def test_under_the_bots_own_pace_the_fake_refuses_nothing(tmp_path: Path) -> None:
    clock = FakeClock()
    # Both lowered alike: the fake at a tenth of GitHub's limits, the bot at nine tenths of those.
    bot = paced_bot(
        tmp_path, clock, PaceLimits(content_per_minute=7, content_per_hour=45, rest_points_per_minute=81)
    )
    bot.fake.limiter.limits = RateLimits(content_per_minute=8, content_per_hour=50, rest_points_per_minute=90)
    numbers = open_pulls(bot, 6)
    await review_each(bot, clock, numbers)
    bot.assert_conforms()
    assert bot.fake.limiter.refused == []
    assert [c for c in bot.fake.calls if c.status in (403, 429)] == []
    posts = content_posts(bot)
    assert Counter(path for path, _, _ in posts if path.endswith("/reviews")) == Counter(
        {f"/repos/{REPO}/pulls/{n}/reviews": 1 for n in numbers}
    )
    assert len(posts) > 2 * 8  # more than two minutes' worth of writes: it was paced
    assert bot.pacer is not None and bot.pacer.waited >= 60


async def test_metrics_show_each_installations_remaining_budget(tmp_path: Path) -> None:
    bot = BotHarness(tmp_path)
    bot.fake.add_user(DECOY)
    bot.fake.add_installation(QUIET_INSTALLATION, "quiet")
    bot.fake.add_repo(QUIET_REPO, installation_id=QUIET_INSTALLATION)
    bot.fake.push(QUIET_REPO, "main", {"README.md": "# quiet\n"})
    bot.fake.push(QUIET_REPO, "fix", {"a.py": "x = 1\n"})
    quiet = int(bot.fake.open_pull(QUIET_REPO, head="fix", author=AUTHOR)["number"])
    [busy] = open_pulls(bot, 1)
    await bot.start()
    try:
        await bot.fake.request_review(REPO, busy, DECOY, by=AUTHOR)
        await bot.fake.request_review(QUIET_REPO, quiet, DECOY, by=AUTHOR)
        await bot.drain()
        status, samples = await scrape(bot, METRICS_TOKEN)
    finally:
        await bot.stop()
    assert status == 200
    for installation in (INSTALLATION, QUIET_INSTALLATION):
        fake_says = bot.fake.limiter.headers(f"installation ID {installation}", FakeResource.CORE)
        shown = value(
            samples, "revbot_github_rate_limit_remaining", installation=str(installation), resource="core"
        )
        assert shown == int(fake_says["X-RateLimit-Remaining"]), installation
        assert 0 < shown < 5000


async def test_a_refusal_is_uncounted_and_only_a_full_window_lowers_the_budget() -> None:
    clock = FakeClock(0.0)
    pacer = Pacer(PaceLimits(content_per_minute=10), clock=clock)
    write = Cost(Resource.REST, 5, True)
    for _ in range(4):
        async with pacer.request(1, write):
            pass
    pacer.refused(1, write, 1.0)  # a blip: the refused write is uncounted, the budget stays
    assert pacer._of(1).content[0].total == 3 and pacer._of(1).content[0].limit == 10
    assert pacer.wait_before(1, write) == 1.0  # Retry-After holds the installation
    pacer.refused(1, write, 40.0)  # a full window: at most what got through, for an hour
    assert pacer._of(1).content[0].limit == 2
    clock.advance(3600)
    assert pacer.wait_before(1, write) == 0.0
    assert pacer._of(1).content[0].limit == 10


@pytest.mark.parametrize(
    ("spent", "reserve", "spare"),
    [(0, 0.25, True), (53, 0.25, True), (54, 0.25, False), (71, 0.0, True), (72, 0.0, False)],
)
async def test_commands_get_only_the_writes_reviews_do_not_keep(
    spent: int, reserve: float, spare: bool
) -> None:
    """Of 72 content-creating requests a minute, ``reserve`` is kept for reviews: a command's
    answer is left out once one more would eat into it."""
    now = [0.0]
    pacer = Pacer(clock=lambda: now[0])
    for _ in range(spent):
        async with pacer.request(7, Cost(Resource.REST, 5, creates_content=True)):
            pass
    assert pacer.spare(7, reserve=reserve) is spare
    now[0] += 61.0  # the minute passes: the window is free again
    assert pacer.spare(7, reserve=reserve) is (spent < 450 * (1 - reserve))
