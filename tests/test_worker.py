"""The worker end to end: signed deliveries in, the fake GitHub answering, the queue underneath.

The handlers here are test concerns built like the real ones (a router, flat events, calls
through ``ctx.gh``), so the foundation is exercised without depending on any review logic.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from app.demo.harness import FAST_WORKER
from app.events import IssueCommentEvent
from app.guards import BotIdentity
from app.handlers.concern import OrderedRouter
from app.handlers.context import Context, accepts_own_events
from app.jobs.pacing import AckFirst
from app.jobs.worker import Worker, WorkerOptions
from app.store import Store, decompress_payload
from tests.conftest import until
from tests.harness import BOT, INSTALLATION, REPO, BotHarness, free_port

ROOT = Path(__file__).resolve().parents[1]
HUMAN = "alice"


class Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str | None]] = []


def echo_router(recorder: Recorder) -> OrderedRouter:
    """Answers every new PR comment with a comment of its own: without the self-loop guard,
    the echo of that answer would be answered again, forever."""
    router = OrderedRouter()

    @router.register("issue_comment", action="created")
    async def answer(event: IssueCommentEvent, ctx: Context) -> None:
        recorder.seen.append(("answer", event.body, event.sender_login))
        await ctx.gh.post(
            f"/repos/{event.repo}/issues/{event.issue_number}/comments", data={"body": f"echo: {event.body}"}
        )

    @router.register("issue_comment", action="created")
    @accepts_own_events
    async def audit(event: IssueCommentEvent, ctx: Context) -> None:
        recorder.seen.append(("audit", event.body, event.sender_login))

    return router


@pytest.fixture
async def pull(tmp_path: Path) -> AsyncIterator[tuple[BotHarness, Recorder, int]]:
    recorder = Recorder()
    bot = BotHarness(tmp_path, router=echo_router(recorder))
    number = bot.open_pull({"src/widget.py": "print('hi')\n"}, author=HUMAN)
    await bot.start()
    yield bot, recorder, number
    await bot.stop()
    bot.assert_conforms()


def comment_posts(bot: BotHarness, number: int) -> list[Any]:
    return [
        c
        for c in bot.fake.calls
        if c.method == "POST" and c.path == f"/repos/{REPO}/issues/{number}/comments"
    ]


@pytest.mark.e2e
@pytest.mark.slow
async def test_the_echo_of_the_bots_own_write_wakes_only_opted_in_handlers(
    pull: tuple[BotHarness, Recorder, int],
) -> None:
    bot, recorder, number = pull
    await bot.fake.comment(REPO, number, "hello", by=HUMAN)
    await bot.drain()
    assert recorder.seen == [
        ("answer", "hello", HUMAN),
        ("audit", "hello", HUMAN),
        ("audit", "echo: hello", BOT),
    ]
    assert [c.body for c in comment_posts(bot, number)] == [{"body": "echo: hello"}]
    assert [event for event, *_ in bot.fake.webhooks_sent].count("issue_comment") == 2


@pytest.mark.e2e
@pytest.mark.slow
async def test_a_comment_by_the_decoy_user_is_an_own_event_too(
    pull: tuple[BotHarness, Recorder, int],
) -> None:
    bot, recorder, number = pull
    bot.fake.add_user("revbot")
    await bot.fake.comment(REPO, number, "from the decoy", by="revbot")
    await bot.drain()
    assert recorder.seen == [("audit", "from the decoy", "revbot")]
    assert comment_posts(bot, number) == []


@pytest.mark.e2e
@pytest.mark.slow
async def test_one_installation_token_serves_many_deliveries(pull: tuple[BotHarness, Recorder, int]) -> None:
    bot, _, number = pull
    for n in range(3):
        await bot.fake.comment(REPO, number, f"comment {n}", by=HUMAN)
    await bot.drain()
    assert len(comment_posts(bot, number)) == 3
    assert [installation for installation, *_ in bot.fake.tokens_issued] == [INSTALLATION]


@pytest.mark.e2e
@pytest.mark.slow
async def test_a_502_is_retried_with_backoff_and_posts_once(pull: tuple[BotHarness, Recorder, int]) -> None:
    bot, _, number = pull
    bot.fake.fail_next(
        "POST", rf"/repos/{REPO}/issues/{number}/comments", status=502, body={"message": "Bad Gateway"}
    )
    await bot.fake.comment(REPO, number, "flaky", by=HUMAN)
    await bot.drain()
    posts = comment_posts(bot, number)
    assert [p.status for p in posts] == [502, 201]
    [job] = [j for j in await bot.store.all_jobs() if j["event"] == "issue_comment" and j["attempts"] == 2]
    assert (job["status"], job["error"]) == ("done", "GitHubBroken: Bad Gateway")


@pytest.mark.e2e
@pytest.mark.slow
async def test_a_short_secondary_rate_limit_is_waited_out_in_place(
    pull: tuple[BotHarness, Recorder, int],
) -> None:
    bot, _, number = pull
    bot.fake.fail_next(
        "POST",
        rf"/repos/{REPO}/issues/{number}/comments",
        status=403,
        headers={"Retry-After": "1"},
        body={
            "message": "You have exceeded a secondary rate limit. "
            "Please wait a few minutes before you try again."
        },
    )
    started = time.monotonic()
    await bot.fake.comment(REPO, number, "busy", by=HUMAN)
    await bot.drain()
    assert time.monotonic() - started >= 1.0
    assert [p.status for p in comment_posts(bot, number)] == [403, 201]
    jobs = [j for j in await bot.store.all_jobs() if j["event"] == "issue_comment"]
    assert {(j["status"], j["attempts"]) for j in jobs} == {("done", 1)}


@pytest.mark.e2e
@pytest.mark.slow
async def test_a_long_retry_after_puts_the_job_back_until_then(
    pull: tuple[BotHarness, Recorder, int],
) -> None:
    bot, _, number = pull
    bot.fake.fail_next(
        "POST",
        rf"/repos/{REPO}/issues/{number}/comments",
        status=429,
        headers={"Retry-After": "120"},
        body={"message": "secondary rate limit"},
    )
    await bot.fake.comment(REPO, number, "later", by=HUMAN)
    await bot.fake.settle()
    deadline = time.monotonic() + 60
    while not (
        (jobs := [j for j in await bot.store.all_jobs() if j["event"] == "issue_comment"])
        and jobs[0]["error"]
    ):
        assert time.monotonic() < deadline, "the job was never put back"
        await asyncio.sleep(0.05)
    [job] = jobs
    assert job["status"] == "queued"
    assert job["run_after"] - time.time() > 100
    assert job["error"].startswith("RetryLater: GitHub rate limit on POST")


@pytest.mark.e2e
@pytest.mark.slow
async def test_a_revoked_token_is_dropped_and_the_call_retried_once(
    pull: tuple[BotHarness, Recorder, int],
) -> None:
    bot, _, number = pull
    await bot.fake.comment(REPO, number, "first", by=HUMAN)
    await bot.drain()
    bot.fake.revoke_tokens()
    await bot.fake.comment(REPO, number, "second", by=HUMAN)
    await bot.drain()
    assert [p.status for p in comment_posts(bot, number)] == [201, 401, 201]
    assert len(bot.fake.tokens_issued) == 2


@pytest.mark.e2e
@pytest.mark.slow
async def test_an_installation_the_app_lost_is_recorded_and_skipped(
    pull: tuple[BotHarness, Recorder, int],
) -> None:
    bot, _, number = pull
    comment = await bot.fake.comment(REPO, number, "seed", by=HUMAN)
    await bot.drain()
    payload = bot.fake.issue_comment_payload(REPO, number, int(comment["id"]), sender=HUMAN)
    payload["installation"] = {"id": 999999, "node_id": "MDIzOkludGVncmF0aW9uSW5zdGFsbGF0aW9uOTk5OTk5"}
    assert await bot.post_signed("issue_comment", payload, "gone") == 202
    await bot.drain()
    row = await bot.store.delivery("gone")
    assert row["status"] == "skipped"
    assert "installation 999999: GitHub answered 404" in row["error"]
    assert len(comment_posts(bot, number)) == 1


@pytest.mark.e2e
@pytest.mark.slow
async def test_a_delivery_without_installation_is_skipped(pull: tuple[BotHarness, Recorder, int]) -> None:
    bot, _, number = pull
    comment = await bot.fake.comment(REPO, number, "seed", by=HUMAN)
    await bot.drain()
    payload = bot.fake.issue_comment_payload(REPO, number, int(comment["id"]), sender=HUMAN)
    payload.pop("installation")
    assert await bot.post_signed("issue_comment", payload, "repo-hook") == 202
    await bot.drain()
    row = await bot.store.delivery("repo-hook")
    assert (row["status"], row["error"]) == ("skipped", "delivery has no installation (not sent to an App)")


@pytest.mark.e2e
@pytest.mark.slow
async def test_a_payload_that_does_not_flatten_fails_with_its_reason(
    pull: tuple[BotHarness, Recorder, int],
) -> None:
    bot, _, _ = pull
    assert (
        await bot.post_signed("pull_request", {"action": "opened", "installation": {"id": 1}}, "odd") == 202
    )
    await bot.drain()
    row = await bot.store.delivery("odd")
    assert row["status"] == "failed"
    assert row["error"].startswith("FlattenError:") and "pull_request" in row["error"]


def ordering_router(log: list[tuple[str, str, str]], subjects: int) -> OrderedRouter:
    """Each job logs its start and end. The first job of every subject waits, at a gate, until
    the first jobs of all subjects have started: a worker that runs subjects concurrently opens
    the gate at once; one that ran them one at a time would never open it (the wait gives up
    after a generous deadline and the test fails on the peak). No timing is involved."""
    router = OrderedRouter()
    all_started = asyncio.Event()
    first_seen: set[str] = set()

    @router.register("issue_comment", action="created")
    async def gated(event: IssueCommentEvent, ctx: Context) -> None:
        subject = f"{event.repo}#{event.issue_number}"
        log.append(("start", subject, event.body))
        if subject not in first_seen:
            first_seen.add(subject)
            if len(first_seen) == subjects:
                all_started.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(all_started.wait(), 30)
        await asyncio.sleep(0)  # let another job interleave here if the worker allowed it
        log.append(("end", subject, event.body))

    return router


@pytest.mark.e2e
@pytest.mark.slow
async def test_one_job_per_subject_in_order_while_subjects_run_concurrently(tmp_path: Path) -> None:
    log: list[tuple[str, str, str]] = []
    bot = BotHarness(tmp_path, router=ordering_router(log, subjects=3))
    numbers = [bot.open_pull({"a.py": "x = 1\n"}, branch=f"topic-{n}") for n in range(3)]
    await bot.start()
    try:
        sent: dict[str, list[str]] = {}
        for i in range(8):
            for number in numbers:
                body = f"comment {i} on #{number}"
                sent.setdefault(f"{REPO}#{number}", []).append(body)
                await bot.fake.comment(REPO, number, body, by=HUMAN)
        await bot.drain(within=60)
    finally:
        await bot.stop()
    bot.assert_conforms()
    running: set[str] = set()
    peak = 0
    for kind, subject, _ in log:
        if kind == "start":
            assert subject not in running, f"two jobs of {subject} ran at once"
            running.add(subject)
            peak = max(peak, len(running))
        else:
            running.discard(subject)
    for subject, bodies in sent.items():
        assert [body for kind, s, body in log if kind == "start" and s == subject] == bodies
    assert peak == 3


def flood_router(worker: dict[str, Worker], rest_recorded: asyncio.Event, done: list[str]) -> OrderedRouter:
    """The first job makes the worker's coalescing interval an hour and waits until the deliveries
    behind it are recorded; every job then wakes the worker as a delivery arriving meanwhile would."""
    router = OrderedRouter()

    @router.register("issue_comment", action="created")
    async def flooded(event: IssueCommentEvent, ctx: Context) -> None:
        if not done:
            worker["it"].options = dataclasses.replace(worker["it"].options, claim_interval=3600.0)
            await asyncio.wait_for(rest_recorded.wait(), 30)
        worker["it"].wake()
        done.append(event.body)

    return router


async def flood(bot: BotHarness, number: int, count: int, *, then: asyncio.Event) -> list[str]:
    """``count`` comments on one pull request, all recorded before ``then`` is set (the first
    job waits for it); then until the bot is quiet, and stopped. Returns the bodies, in order."""
    bodies = [f"comment {n}" for n in range(count)]
    try:
        for body in bodies:
            await bot.fake.comment(REPO, number, body, by=HUMAN)
        then.set()
        await bot.drain(within=60)
    finally:
        await bot.stop()
    return bodies


@pytest.mark.e2e
@pytest.mark.slow
async def test_a_flood_of_one_pull_requests_deliveries_never_waits_out_the_coalescing_interval(
    tmp_path: Path,
) -> None:
    """New deliveries keep arriving (each wakes the worker) while one PR's jobs run one at a time:
    a job that ends frees the next of its subject, which is claimed at once. Waiting out the
    coalescing interval here (an hour) would work such a flood one job per interval."""
    worker: dict[str, Worker] = {}
    rest_recorded = asyncio.Event()
    done: list[str] = []
    bot = BotHarness(tmp_path, router=flood_router(worker, rest_recorded, done))
    number = bot.open_pull({"a.py": "x = 1\n"})
    await bot.start()
    assert bot.runtime is not None and bot.runtime.worker is not None
    worker["it"] = bot.runtime.worker
    bodies = await flood(bot, number, 4, then=rest_recorded)
    assert done == bodies


@pytest.mark.e2e
@pytest.mark.slow
async def test_deliveries_are_recorded_while_github_is_unreachable_and_worked_once_it_answers(
    tmp_path: Path,
) -> None:
    recorder = Recorder()
    bot = BotHarness(tmp_path, router=echo_router(recorder), start_fake=False)
    number = bot.open_pull({"a.py": "x = 1\n"})
    await bot.start()
    try:
        assert bot.runtime is not None and bot.runtime.identity is not None
        # GitHub's API is down, but a webhook still arrives (sent before the outage, or late).
        await bot.fake.dispatcher.start()
        await bot.fake.comment(REPO, number, "anyone there?", by=HUMAN)
        await bot.fake.settle()  # the delivery was answered (202): it is in the ledger
        assert bot.runtime.identity.known is None
        assert await bot.store.jobs_by_status() == {"queued": 1}
        await bot.fake.start(port=bot.fake_port)
        await bot.drain()
    finally:
        await bot.stop()
    bot.assert_conforms()
    assert next(c.path for c in bot.fake.calls if c.auth == "jwt") == "/app"
    assert recorder.seen[0] == ("answer", "anyone there?", HUMAN)
    assert [c.body for c in comment_posts(bot, number)] == [{"body": "echo: anyone there?"}]


@pytest.mark.e2e
@pytest.mark.slow
async def test_github_enterprise_urls_are_used_for_rest_and_app_calls(tmp_path: Path) -> None:
    recorder = Recorder()
    port = free_port()
    bot = BotHarness(
        tmp_path,
        router=echo_router(recorder),
        fake_port=port,
        env={"GITHUB_API_URL": f"http://127.0.0.1:{port}/api/v3"},
    )
    number = bot.open_pull({"a.py": "x = 1\n"})
    await bot.start()
    try:
        assert bot.runtime is not None
        assert bot.runtime.settings.graphql_url == f"http://127.0.0.1:{port}/api/graphql"
        await bot.fake.comment(REPO, number, "on enterprise", by=HUMAN)
        await bot.drain()
    finally:
        await bot.stop()
    bot.assert_conforms()
    assert bot.fake.calls and all(c.raw_path.startswith("/api/v3/") for c in bot.fake.calls)
    assert len(comment_posts(bot, number)) == 1


@pytest.mark.e2e
@pytest.mark.slow
async def test_a_job_of_a_killed_worker_is_redone_after_its_lease(tmp_path: Path) -> None:
    bot = BotHarness(tmp_path, run_worker=False)
    number = bot.open_pull({"a.py": "x = 1\n"})
    await bot.start()
    read = f"/repos/{REPO}/pulls/{number}"
    env = {**os.environ, **bot.env(), "APP_SLUG": "revbot", "PYTHONPATH": str(ROOT)}
    script = [sys.executable, str(ROOT / "tests" / "crashable_worker.py")]
    worker = await asyncio.create_subprocess_exec(*script, env=env, cwd=ROOT, stderr=subprocess.DEVNULL)
    try:
        bot.fake.delay("GET", read, 3)  # the first worker hangs mid-job, then dies
        await bot.fake.comment(REPO, number, "please answer", by=HUMAN)
        deadline = time.monotonic() + 20
        while not [c for c in bot.fake.calls if c.path == read]:
            assert time.monotonic() < deadline, "the worker process never called GitHub"
            await asyncio.sleep(0.05)
        worker.kill()
        await asyncio.wait_for(worker.wait(), 10)
        [job] = await bot.store.all_jobs()
        assert (job["status"], job["attempts"]) == ("running", 1)
        bot.fake.clear_delays()
        worker = await asyncio.create_subprocess_exec(*script, env=env, cwd=ROOT, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while (await bot.store.job(job["id"]))["status"] != "done":
            assert time.monotonic() < deadline, "the job was never redone"
            await asyncio.sleep(0.1)
        redone = await bot.store.job(job["id"])
    finally:
        worker.send_signal(signal.SIGTERM)
        await asyncio.wait_for(worker.wait(), 30)
        await bot.stop()
    assert redone["attempts"] == 2
    posts = [
        c
        for c in bot.fake.calls
        if c.method == "POST" and c.path == f"/repos/{REPO}/issues/{number}/comments"
    ]
    assert [(c.status, c.body) for c in posts] == [(201, {"body": "answer"})]


def gated_router(started: dict[str, asyncio.Event], release_quick: asyncio.Event) -> OrderedRouter:
    router = OrderedRouter()

    @router.register("issue_comment", action="created")
    async def gated(event: IssueCommentEvent, ctx: Context) -> None:
        started.setdefault(event.body, asyncio.Event()).set()
        if event.body == "quick":
            await release_quick.wait()
        else:
            await asyncio.Event().wait()  # never ends by itself

    return router


@pytest.mark.e2e
@pytest.mark.slow
async def test_shutdown_lets_running_jobs_finish_within_grace_and_hands_back_the_rest(tmp_path: Path) -> None:
    started = {"quick": asyncio.Event(), "slow": asyncio.Event()}
    release_quick = asyncio.Event()
    options = WorkerOptions(poll_seconds=0.05, claim_interval=0.0, shutdown_grace=5.0)
    bot = BotHarness(tmp_path, router=gated_router(started, release_quick), worker_options=options)
    quick = bot.open_pull({"a.py": "x = 1\n"}, branch="quick")
    slow = bot.open_pull({"b.py": "y = 2\n"}, branch="slow")
    await bot.start()
    assert bot.runtime is not None and bot.runtime.worker is not None
    worker = bot.runtime.worker
    await bot.fake.comment(REPO, slow, "slow", by=HUMAN)
    await bot.fake.comment(REPO, slow, "behind the slow one", by=HUMAN)
    await bot.fake.comment(REPO, quick, "quick", by=HUMAN)
    await bot.fake.comment(REPO, quick, "behind the quick one", by=HUMAN)
    await asyncio.wait_for(asyncio.gather(started["quick"].wait(), started["slow"].wait()), 30)
    stopping = asyncio.create_task(worker.stop())
    deadline = time.monotonic() + 30
    while worker.status().running:  # the claim loop has ended: shutdown has begun
        assert time.monotonic() < deadline
        await asyncio.sleep(0.01)
    release_quick.set()  # the quick job finishes during the grace period; the slow one never does
    await asyncio.wait_for(stopping, 60)
    await bot.stop()
    store = Store(f"sqlite+aiosqlite:///{tmp_path / 'bot.sqlite3'}")
    jobs = sorted((j["status"], j["attempts"]) for j in await store.all_jobs())
    await store.close()
    # the quick job's end, during shutdown, promoted the job behind it but did not claim it
    assert "behind the quick one" not in started
    assert jobs == [("done", 1), ("queued", 0), ("queued", 0), ("waiting", 0)]


@pytest.mark.e2e
@pytest.mark.slow
async def test_an_error_kept_on_a_job_is_masked_like_the_logs(pull: tuple[BotHarness, Recorder, int]) -> None:
    """An upstream error body may echo a token; the ledger keeps the error, never the token."""
    bot, _, number = pull
    token = "ghs_" + "A1b2C3d4E5" * 4
    bot.fake.fail_next(
        "POST",
        rf"/repos/{REPO}/issues/{number}/comments",
        status=502,
        body={"message": f"upstream said: bad credentials {token}"},
    )
    await bot.fake.comment(REPO, number, "flaky", by=HUMAN)
    await bot.drain()
    [job] = [j for j in await bot.store.all_jobs() if j["attempts"] == 2]
    assert job["error"] == "GitHubBroken: upstream said: bad credentials [redacted]"


async def test_an_unexpected_error_restarts_the_worker_loop_instead_of_ending_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = Store(f"sqlite+aiosqlite:///{tmp_path / 'w.sqlite3'}")
    await store.create_schema()
    asked = 0

    async def identity() -> BotIdentity:
        nonlocal asked
        asked += 1
        if asked == 1:
            raise RuntimeError("a bug the loop did not expect")
        return BotIdentity.from_slug("revbot")

    async def no_context(*_: object) -> Context:
        raise AssertionError("no job was queued")

    options = WorkerOptions(poll_seconds=0.01, db_retry_base=0.01, db_retry_cap=0.05)
    worker = Worker(store, OrderedRouter(), identity=identity, context_for=no_context, options=options)
    worker.start()
    try:
        deadline = time.monotonic() + 30
        while worker.status().since_claim_loop is None:
            assert time.monotonic() < deadline, "the worker never claimed after the error"
            await asyncio.sleep(0.01)
        assert worker.status().running and asked == 2
    finally:
        await worker.stop()
        await store.close()
    assert not worker.status().running
    [failure] = [r for r in caplog.records if r.name == "app.jobs.worker" and r.levelno >= logging.WARNING]
    assert failure.getMessage() == "worker loop failed; restarting it" and failure.exc_info is not None


def backlog_router(first_may_end: asyncio.Event, done: list[str], flaky: set[str]) -> OrderedRouter:
    """The first job waits until the backlog behind it is recorded; a body in ``flaky`` fails
    once with a 5xx-like error (transient), then succeeds."""
    router = OrderedRouter()

    @router.register("issue_comment", action="created")
    async def work(event: IssueCommentEvent, ctx: Context) -> None:
        if not done:
            await asyncio.wait_for(first_may_end.wait(), 30)
        if event.body in flaky:
            flaky.discard(event.body)
            raise TimeoutError("GitHub did not answer")
        done.append(event.body)

    return router


@pytest.mark.e2e
@pytest.mark.slow
@pytest.mark.parametrize(
    ("flaky", "writes"),
    [
        # the head alone (claimed by the claim loop), then runs of up to 4: one write per run
        (set(), [1, 4, 4, 2]),
        # a retry in the middle of a run (5, 6, 7, 8): the end before it is written, the rest goes
        # back behind it; once due, the claim loop takes it alone, and its end claims 7 to 10
        ({"comment 6"}, [1, 4, 1, 1, 4]),
    ],
)
async def test_a_pull_requests_backlog_is_worked_in_runs_with_a_write_per_run(
    tmp_path: Path, flaky: set[str], writes: list[int]
) -> None:
    first_may_end = asyncio.Event()
    done: list[str] = []
    options = dataclasses.replace(FAST_WORKER, run_length=4, end_delay=3600.0, backoff_cap=0.05)
    bot = BotHarness(tmp_path, router=backlog_router(first_may_end, done, set(flaky)), worker_options=options)
    number = bot.open_pull({"a.py": "x = 1\n"})
    await bot.start()
    ends: list[int] = []
    finish_jobs = bot.store.finish_jobs

    async def counted(ends_: Any, **kwargs: Any) -> Any:
        ends.append(len(ends_))
        return await finish_jobs(ends_, **kwargs)

    bot.store.finish_jobs = counted
    bodies = await flood(bot, number, 11, then=first_may_end)
    assert done == bodies
    assert ends == writes
    rows = await Store(f"sqlite+aiosqlite:///{tmp_path / 'bot.sqlite3'}").all_jobs()
    attempts = {json.loads(decompress_payload(r["payload"]))["comment"]["body"]: r["attempts"] for r in rows}
    assert attempts == {body: 2 if body in flaky else 1 for body in bodies}
    assert {r["status"] for r in rows} == {"done"}


async def test_a_job_waits_while_a_delivery_is_being_received() -> None:
    first = AckFirst(quiet=0.0)
    handed_over = first.request_started()
    waiting = asyncio.create_task(first.wait(at_most=60))
    for _ in range(20):
        await asyncio.sleep(0)
    assert not waiting.done()
    handed_over()
    handed_over()  # once is counted once
    await asyncio.wait_for(waiting, 30)
    assert first.receiving == 0
    # a request that never hands over holds a job back for ``at_most`` only
    first.request_started()
    await asyncio.wait_for(first.wait(at_most=0.01), 30)


@pytest.mark.e2e
@pytest.mark.slow
async def test_a_slot_that_breaks_is_logged_and_its_job_runs_again_after_its_lease(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Not a job's failure but the slot's own bookkeeping (here, reading the store's clock for
    the job's end): the slot is logged as stopped, the worker goes on, and the job is redone
    once its lease runs out."""
    first_may_end = asyncio.Event()
    first_may_end.set()
    done: list[str] = []
    options = dataclasses.replace(FAST_WORKER, lease_seconds=1.0)
    bot = BotHarness(tmp_path, router=backlog_router(first_may_end, done, set()), worker_options=options)
    number = bot.open_pull({"a.py": "x = 1\n"})
    await bot.start()
    now = bot.store.now
    broken = [True]

    def breaks_once() -> float:
        if broken:
            broken.clear()
            raise RuntimeError("the clock broke")
        return float(now())

    bot.store.now = breaks_once
    try:
        await bot.fake.comment(REPO, number, "once", by=HUMAN)
        await bot.drain(within=60)
    finally:
        await bot.stop()
    assert done == ["once", "once"]
    assert any(r.getMessage() == "a worker slot stopped unexpectedly" and r.exc_info for r in caplog.records)
    rows = await Store(f"sqlite+aiosqlite:///{tmp_path / 'bot.sqlite3'}").all_jobs()
    assert [(r["status"], r["attempts"]) for r in rows] == [("done", 2)]


class FrozenClaims(Store):
    """A store whose claim never answers and ignores being cancelled, as asyncpg's cleanup does
    on a frozen server (it waits for the server to acknowledge the cancel)."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.claiming = asyncio.Event()
        self.claim_cancelled = asyncio.Event()
        self.thaw = asyncio.Event()

    async def claim(
        self, *, worker_id: str, limit: int, lease_seconds: float, share: int | None = None
    ) -> list[Any]:
        self.claiming.set()
        while not self.thaw.is_set():
            try:
                await self.thaw.wait()
            except asyncio.CancelledError:
                self.claim_cancelled.set()
        return []


async def test_stopping_during_a_frozen_claim_is_bounded_and_keeps_the_callers_cancellation(
    tmp_path: Path,
) -> None:
    """``stop`` cancels a claim loop that does not stop within the grace and waits for it only
    ``stop_margin``; and being cancelled itself meanwhile (a caller's own deadline) raises
    CancelledError instead of being swallowed with the claim loop's."""
    store = FrozenClaims(f"sqlite+aiosqlite:///{tmp_path / 'w.sqlite3'}")
    await store.create_schema()

    async def identity() -> BotIdentity:
        return BotIdentity.from_slug("revbot")

    async def no_context(*_: object) -> Context:
        raise AssertionError("nothing is claimed")

    try:
        options = WorkerOptions(shutdown_grace=0.01, stop_margin=0.01)
        worker = Worker(store, OrderedRouter(), identity=identity, context_for=no_context, options=options)
        worker.start()
        await asyncio.wait_for(store.claiming.wait(), 30)
        stopping = asyncio.create_task(worker.stop())
        await asyncio.wait({stopping}, timeout=30)
        assert stopping.done(), "stop() waited for a claim that never ends"
        assert store.claim_cancelled.is_set() and not worker.status().running

        store.claiming.clear()
        store.claim_cancelled.clear()
        patient = dataclasses.replace(options, stop_margin=3600.0)  # the caller's deadline comes first
        worker = Worker(store, OrderedRouter(), identity=identity, context_for=no_context, options=patient)
        worker.start()
        await asyncio.wait_for(store.claiming.wait(), 30)
        stopping = asyncio.create_task(worker.stop())
        await asyncio.wait_for(store.claim_cancelled.wait(), 30)
        stopping.cancel()
        await asyncio.wait({stopping}, timeout=30)
        assert stopping.cancelled(), "stop() swallowed its caller's cancellation"
    finally:
        store.thaw.set()
        await store.close()


LOCALS = f"{__name__}.marking_router.<locals>"


def marking_router(recorder: Recorder, third_may_end: asyncio.Event) -> OrderedRouter:
    """Three handlers of one comment: one that posts, one that sends GitHub nothing, and one that
    fails once (a 502 from GitHub) after waiting for the test."""
    router = OrderedRouter()

    @router.register("issue_comment", action="created")
    async def talks(event: IssueCommentEvent, ctx: Context) -> None:
        recorder.seen.append(("talks", event.body, event.sender_login))
        await ctx.gh.post(f"/repos/{event.repo}/issues/{event.issue_number}/comments", data={"body": "seen"})

    @router.register("issue_comment", action="created")
    async def quiet(event: IssueCommentEvent, ctx: Context) -> None:
        recorder.seen.append(("quiet", event.body, event.sender_login))

    @router.register("issue_comment", action="created")
    async def flaky(event: IssueCommentEvent, ctx: Context) -> None:
        recorder.seen.append(("flaky", event.body, event.sender_login))
        await third_may_end.wait()
        await ctx.gh.getitem(f"/repos/{event.repo}/pulls/{event.issue_number}")

    return router


async def comment_jobs(bot: BotHarness, body: str) -> list[dict[str, Any]]:
    return [
        j
        for j in await bot.store.all_jobs()
        if j["event"] == "issue_comment"
        and json.loads(decompress_payload(j["payload"]))["comment"]["body"] == body
    ]


@pytest.mark.e2e
@pytest.mark.slow
async def test_only_a_handler_that_talked_to_github_is_marked_done_at_once(tmp_path: Path) -> None:
    recorder = Recorder()
    third_may_end = asyncio.Event()
    options = dataclasses.replace(FAST_WORKER, backoff_cap=0.05)
    bot = BotHarness(tmp_path, router=marking_router(recorder, third_may_end), worker_options=options)
    number = bot.open_pull({"a.py": "x = 1\n"})
    await bot.start()
    try:
        bot.fake.fail_next(
            "GET", rf"/repos/{REPO}/pulls/{number}", status=502, body={"message": "Bad Gateway"}
        )
        await bot.fake.comment(REPO, number, "mark me", by=HUMAN)
        await until(lambda: ("flaky", "mark me", HUMAN) in recorder.seen, "the third handler")
        [job] = await comment_jobs(bot, "mark me")
        # A crash now would run the quiet handler again, and not the one that posted.
        assert json.loads(job["done_handlers"]) == [f"{LOCALS}.talks"]
        third_may_end.set()
        await bot.drain()
        # The retry kept both: only the failed handler ran again, and the comment was posted once.
        assert [name for name, *_ in recorder.seen] == ["talks", "quiet", "flaky", "flaky"]
        [job] = await comment_jobs(bot, "mark me")
        assert (job["status"], job["attempts"]) == ("done", 2)
        assert json.loads(job["done_handlers"]) == [f"{LOCALS}.talks", f"{LOCALS}.quiet", f"{LOCALS}.flaky"]
        assert [c.body for c in comment_posts(bot, number)] == [{"body": "seen"}]
    finally:
        await bot.stop()
    bot.assert_conforms()
