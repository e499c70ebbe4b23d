"""Ledger and queue, on SQLite and on a real PostgreSQL server."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import random
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, func, insert, select, text
from sqlalchemy.ext.asyncio import create_async_engine

from app.store import (
    SCHEMA_VERSION,
    IncomingDelivery,
    Job,
    JobEnd,
    JobStatus,
    Ledger,
    QueueStats,
    Store,
    deliveries,
    ledger_rows,
    schema_version,
)
from app.store.model import run_of
from app.store.sqlite import SqliteBackend
from tests.conftest import FakeClock, until

ROOT = Path(__file__).resolve().parents[1]
_ids = itertools.count(1)


def delivery(
    subject: str = "octo/app#1", delivery_id: str | None = None, payload: bytes = b"{}"
) -> IncomingDelivery:
    return IncomingDelivery(
        delivery_id=delivery_id or f"delivery-{next(_ids)}",
        event="pull_request",
        action="opened",
        installation_id=42,
        repo="octo/app",
        subject=subject,
        payload=payload,
    )


async def test_a_delivery_id_is_recorded_once_forever(store: Store) -> None:
    first = delivery(delivery_id="abc")
    assert await store.record_deliveries([first]) == [True]
    assert await store.record_deliveries([delivery(delivery_id="abc")]) == [False]
    assert await store.record_deliveries([delivery(delivery_id="x"), delivery(delivery_id="x")]) == [
        True,
        False,
    ]
    rows = await store.all_jobs()
    assert [r["delivery_id"] for r in rows] == ["abc", "x"]
    row = await store.delivery("abc")
    assert row is not None
    assert (row["event"], row["action"], row["installation_id"], row["repo"], row["status"]) == (
        "pull_request",
        "opened",
        42,
        "octo/app",
        "queued",
    )


async def test_schema_creation_is_idempotent_and_refuses_a_newer_schema(store: Store) -> None:
    await store.create_schema()
    async with store.begin() as conn:
        assert (await conn.execute(select(schema_version.c.version))).scalars().all() == [SCHEMA_VERSION]
        await conn.execute(insert(schema_version).values(version=SCHEMA_VERSION + 1))
    with pytest.raises(RuntimeError, match="newer than this code"):
        await store.create_schema()


async def test_one_job_per_subject_at_a_time_in_arrival_order(store: Store) -> None:
    await store.record_deliveries([delivery("o/r#1"), delivery("o/r#2"), delivery("o/r#1"), delivery("o/r")])
    first = await store.claim(worker_id="w1", limit=10, lease_seconds=60)
    assert [(j.id, j.subject) for j in first] == [(1, "o/r#1"), (2, "o/r#2"), (4, "o/r")]
    assert await store.claim(worker_id="w2", limit=10, lease_seconds=60) == []
    assert await store.finish(first[0], worker_id="w1", status=JobStatus.DONE)
    second = await store.claim(worker_id="w2", limit=10, lease_seconds=60)
    assert [(j.id, j.subject) for j in second] == [(3, "o/r#1")]
    statuses = {r["id"]: r["status"] for r in await store.all_jobs()}
    assert statuses == {1: "done", 2: "running", 3: "running", 4: "running"}
    assert (await store.delivery(first[0].delivery_id) or {})["status"] == "done"


async def test_an_expired_lease_is_claimed_again_and_the_old_owner_cannot_finish(
    store: Store, clock: FakeClock
) -> None:
    await store.record_deliveries([delivery("o/r#9"), delivery("o/r#9")])
    [job] = await store.claim(worker_id="dead", limit=5, lease_seconds=20)
    assert job.attempts == 1
    clock.advance(19)
    await store.extend_leases([job.id], worker_id="someone else", lease_seconds=20)
    clock.advance(1)
    assert await store.claim(worker_id="alive", limit=5, lease_seconds=60) == []
    clock.advance(0.001)
    [again] = await store.claim(worker_id="alive", limit=5, lease_seconds=60)
    assert (again.id, again.attempts) == (job.id, 2)
    assert not await store.finish(job, worker_id="dead", status=JobStatus.DONE)
    assert await store.finish(again, worker_id="alive", status=JobStatus.DONE)
    [next_job] = await store.claim(worker_id="alive", limit=5, lease_seconds=60)
    assert next_job.id == job.id + 1


async def test_a_heartbeat_keeps_a_lease(store: Store, clock: FakeClock) -> None:
    await store.record_deliveries([delivery("o/r#8")])
    [job] = await store.claim(worker_id="w", limit=1, lease_seconds=20)
    for _ in range(5):
        clock.advance(15)
        await store.extend_leases([job.id], worker_id="w", lease_seconds=20)
    clock.advance(19)
    assert await store.claim(worker_id="other", limit=1, lease_seconds=20) == []
    assert await store.finish(job, worker_id="w", status=JobStatus.DONE)


async def test_a_retried_job_holds_back_its_subject_until_due(store: Store, clock: FakeClock) -> None:
    await store.record_deliveries([delivery("o/r#3"), delivery("o/r#3"), delivery("o/r#4")])
    first, other = await store.claim(worker_id="w", limit=5, lease_seconds=60)
    assert await store.retry_later(first, worker_id="w", delay=30, error="GitHubBroken: 502")
    clock.advance(29.9)
    assert await store.claim(worker_id="w", limit=5, lease_seconds=60) == []
    clock.advance(0.1)
    [retried] = await store.claim(worker_id="w", limit=5, lease_seconds=60)
    assert (retried.id, retried.attempts) == (first.id, 2)
    assert (await store.job(first.id) or {})["error"] == "GitHubBroken: 502"
    del other


async def test_release_hands_jobs_back_without_counting_the_attempt(store: Store) -> None:
    await store.record_deliveries([delivery("o/r#5")])
    [job] = await store.claim(worker_id="w", limit=1, lease_seconds=60)
    await store.release([job.id], worker_id="w")
    [again] = await store.claim(worker_id="w2", limit=1, lease_seconds=60)
    assert again.attempts == 1


async def test_done_handlers_survive_a_retry(store: Store) -> None:
    await store.record_deliveries([delivery("o/r#6")])
    [job] = await store.claim(worker_id="w", limit=1, lease_seconds=60)
    await store.mark_handler_done(job, "app.handlers.review.on_request")
    await store.retry_later(job, worker_id="w", delay=0, error="timeout")
    [again] = await store.claim(worker_id="w", limit=1, lease_seconds=60)
    assert again.done_handlers == ["app.handlers.review.on_request"]


async def test_a_retry_keeps_the_handlers_done_in_its_attempt(store: Store) -> None:
    await store.record_deliveries([delivery("o/r#6")])
    [job] = await store.claim(worker_id="w", limit=1, lease_seconds=60)
    job.done_handlers.append("app.handlers.readiness.on_pull_request")  # done, not yet written
    await store.retry_later(job, worker_id="w", delay=0, error="timeout")
    [again] = await store.claim(worker_id="w", limit=1, lease_seconds=60)
    assert again.done_handlers == ["app.handlers.readiness.on_pull_request"]


def end(
    job: Job, status: JobStatus = JobStatus.DONE, error: str | None = None, ended_at: float | None = None
) -> JobEnd:
    return JobEnd(job, status, error, ended_at)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("backlog", "taken_over", "status", "run_limit", "run"),
    [
        # the subject's next deliveries are claimed in the transaction that ends the job
        (["o/r#1", "o/r#2", "o/r#1"], False, JobStatus.DONE, 8, [3]),
        (["o/r#1", "o/r#1"], False, JobStatus.FAILED, 8, [2]),
        (["o/r#1", "o/r#1"], False, JobStatus.SKIPPED, 8, [2]),
        # a backlog: as much of it as the limit allows, oldest first, another subject's row untouched
        (["o/r#1", "o/r#1", "o/r#2", "o/r#1", "o/r#1"], False, JobStatus.DONE, 8, [2, 4, 5]),
        (["o/r#1", "o/r#1", "o/r#2", "o/r#1", "o/r#1"], False, JobStatus.DONE, 2, [2, 4]),
        # nothing more of the subject: nothing claimed, another subject's job stays for a claim
        (["o/r#1", "o/r#2"], False, JobStatus.DONE, 8, []),
        # the job is no longer ours: nothing ends, nothing is claimed
        (["o/r#1", "o/r#1"], True, JobStatus.DONE, 8, []),
    ],
)
async def test_finishing_a_job_claims_its_subjects_next_run_for_the_same_worker(
    store: Store,
    clock: FakeClock,
    backlog: list[str],
    taken_over: bool,
    status: JobStatus,
    run_limit: int,
    run: list[int],
) -> None:
    await store.record_deliveries([delivery(subject) for subject in backlog])
    [job] = await store.claim(worker_id="w", limit=1, lease_seconds=20)
    if taken_over:
        clock.advance(21)
        [stolen] = await store.claim(worker_id="other", limit=1, lease_seconds=20)
        assert stolen.id == job.id
    before = {r["id"]: r["status"] for r in await store.all_jobs()}
    ours, claimed = await store.finish_jobs(
        [end(job, status)], worker_id="w", claim_next_for=60, run_limit=run_limit
    )
    assert ours is not taken_over
    assert [c.id for c in claimed] == run
    rows = {r["id"]: r for r in await store.all_jobs()}
    if taken_over:
        assert {i: r["status"] for i, r in rows.items()} == before
        return
    assert rows[job.id]["status"] == status
    for c in claimed:
        assert (c.subject, c.attempts, c.payload) == (job.subject, 1, b"{}")
        row = rows[c.id]
        assert (row["status"], row["worker_id"], row["lease_until"]) == ("running", "w", clock() + 60)
    # every other row is where a plain finish leaves it: claimable by the next claim, in order
    others = [i for i, r in rows.items() if i != job.id and i not in run and r["status"] != "waiting"]
    assert [j.id for j in await store.claim(worker_id="x", limit=10, lease_seconds=60)] == others


async def held_run(store: Store, subject: str, *, worker_id: str = "w") -> list[Job]:
    """Four deliveries of ``subject``: the first claimed and ended, and the three behind it held
    by ``worker_id`` as the run that end claimed."""
    await store.record_deliveries([delivery(subject) for _ in range(4)])
    [head] = await store.claim(worker_id=worker_id, limit=1, lease_seconds=60)
    _, run = await store.finish_jobs([end(head)], worker_id=worker_id, claim_next_for=60, run_limit=8)
    assert len(run) == 3
    return run


async def test_the_ends_of_a_run_are_written_together_with_their_own_times(
    store: Store, clock: FakeClock
) -> None:
    run = await held_run(store, "o/r#1")
    assert [j.id for j in run] == [2, 3, 4]
    run[0].done_handlers.append("app.handlers.review.on_review_requested")
    clock.advance(5)
    # the first two of the run end; the run goes on, so nothing is promoted or claimed
    ours, more = await store.finish_jobs(
        [end(run[0], ended_at=clock() - 3), end(run[1], JobStatus.FAILED, "boom", ended_at=clock() - 1)],
        worker_id="w",
        run_continues=True,
    )
    assert (ours, more) == (True, [])
    rows = {r["id"]: r for r in await store.all_jobs()}
    assert [(rows[i]["status"], rows[i]["updated_at"]) for i in (2, 3)] == [
        ("done", clock() - 3),
        ("failed", clock() - 1),
    ]
    assert json.loads(rows[2]["done_handlers"]) == ["app.handlers.review.on_review_requested"]
    assert rows[3]["error"] == "boom" and rows[4]["status"] == "running"
    assert await store.claim(worker_id="x", limit=10, lease_seconds=60) == []
    await store.record_deliveries([delivery("o/r#2")])
    [other] = await store.claim(worker_id="x", limit=1, lease_seconds=60)
    with pytest.raises(ValueError, match="one subject"):
        await store.finish_jobs([end(run[2]), end(other)], worker_id="w")


async def test_a_retry_in_the_middle_of_a_run_puts_the_rest_back_behind_it(
    store: Store, clock: FakeClock
) -> None:
    run = await held_run(store, "o/r#1")
    assert await store.retry_later(run[0], worker_id="w", delay=30, error="503")
    rows = {r["id"]: r for r in await store.all_jobs()}
    assert [(rows[i]["status"], rows[i]["attempts"], rows[i]["worker_id"]) for i in (2, 3, 4)] == [
        ("queued", 1, None),
        ("waiting", 0, None),
        ("waiting", 0, None),
    ]
    assert await store.claim(worker_id="x", limit=10, lease_seconds=60) == []  # not due yet
    clock.advance(30)
    [again] = await store.claim(worker_id="x", limit=10, lease_seconds=60)
    assert (again.id, again.attempts) == (2, 2)
    _, rest = await store.finish_jobs([end(again)], worker_id="x", claim_next_for=60, run_limit=8)
    assert [(j.id, j.attempts) for j in rest] == [(3, 1), (4, 1)]


async def test_a_released_run_keeps_its_order(store: Store) -> None:
    await store.record_deliveries([delivery("o/r#1") for _ in range(3)] + [delivery("o/r#2")])
    heads = await store.claim(worker_id="w", limit=2, lease_seconds=60)
    _, run = await store.finish_jobs([end(heads[0])], worker_id="w", claim_next_for=60, run_limit=8)
    await store.release([j.id for j in run] + [heads[1].id], worker_id="w")
    rows = {r["id"]: r for r in await store.all_jobs()}
    assert [(rows[i]["status"], rows[i]["attempts"]) for i in (2, 3, 4)] == [
        ("queued", 0),
        ("waiting", 0),
        ("queued", 0),
    ]
    assert [j.id for j in await store.claim(worker_id="x", limit=10, lease_seconds=60)] == [2, 4]


async def test_a_dead_workers_run_is_taken_over_in_order(store: Store, clock: FakeClock) -> None:
    run = await held_run(store, "o/r#1", worker_id="dead")
    await store.record_deliveries([delivery("o/r#1")])  # arrives while the run is held
    clock.advance(61)
    [first] = await store.claim(worker_id="alive", limit=10, lease_seconds=60)
    assert first.id == run[0].id
    ours, rest = await store.finish_jobs([end(first)], worker_id="alive", claim_next_for=60, run_limit=8)
    assert ours and [j.id for j in rest] == [3, 4, 5]
    # the dead worker's late write changes nothing
    assert await store.finish_jobs([end(run[1])], worker_id="dead") == (False, [])
    assert {r["id"]: r["worker_id"] for r in await store.all_jobs() if r["status"] == "running"} == {
        3: "alive",
        4: "alive",
        5: "alive",
    }


@pytest.mark.parametrize(
    ("pending", "run"),
    [
        ([], []),
        ([(1, "waiting", 0.0, None)], [1]),
        ([(1, "queued", 10.0, None), (2, "waiting", 10.0, None)], [1, 2]),
        ([(1, "queued", 11.0, None), (2, "waiting", 10.0, None)], []),  # a retry's backoff
        ([(1, "running", 0.0, 9.0), (2, "running", 0.0, 9.0), (3, "waiting", 0.0, None)], [1, 2, 3]),
        ([(1, "running", 0.0, 10.0), (2, "waiting", 0.0, None)], []),  # a live lease (until 10)
        ([(1, "waiting", 0.0, None), (2, "queued", 12.0, None), (3, "waiting", 0.0, None)], [1]),
        ([(1, "waiting", 0.0, None), (2, "running", 0.0, 11.0)], [1]),
    ],
)
def test_a_run_is_the_prefix_of_rows_free_to_start(
    pending: list[tuple[int, str, float, float | None]], run: list[int]
) -> None:
    assert run_of(pending, now=10.0) == run


async def test_chained_runs_work_one_subject_in_arrival_order(db_url: str) -> None:
    """Two stores (as two processes) drain one subject's backlog, each by chaining runs: never
    two of the subject at once, every job exactly once, in id order."""
    stores = [Store(db_url) for _ in range(2)]
    await stores[0].create_schema()
    await stores[0].record_deliveries([delivery("o/r#7") for _ in range(40)] + [delivery("o/r#8")])
    worked: list[int] = []
    running: set[int] = set()
    overlaps: list[int] = []

    async def chain(s: Store, name: str) -> None:
        while len(worked) < 41:  # the other store keeps claiming while this one chains
            for job in await s.claim(worker_id=name, limit=1, lease_seconds=60):
                run = [job]
                while run:
                    for current in run:
                        if current.subject == "o/r#7":
                            if running:
                                overlaps.append(current.id)
                            running.add(current.id)
                        await asyncio.sleep(0)
                        running.discard(current.id)
                        worked.append(current.id)
                    ours, run = await s.finish_jobs(
                        [end(j) for j in run], worker_id=name, claim_next_for=60, run_limit=3
                    )
                    assert ours
            await asyncio.sleep(0)

    await asyncio.gather(*(chain(s, f"w{i}") for i, s in enumerate(stores)))
    for s in stores:
        await s.close()
    subject_7 = [i for i in worked if i != 41]
    assert sorted(worked) == list(range(1, 42))
    assert subject_7 == list(range(1, 41))
    assert overlaps == []


@pytest.mark.slow
async def test_concurrent_workers_never_double_claim(db_url: str) -> None:
    """Four stores (four connection pools, as four processes would have) drain one queue."""
    stores = [Store(db_url) for _ in range(4)]
    await stores[0].create_schema()
    subjects = [f"o/r#{n}" for n in range(12)]
    await stores[0].record_deliveries([delivery(subjects[i % 12]) for i in range(120)])
    claimed: list[int] = []
    active_subjects: set[str] = set()
    overlaps: list[str] = []

    async def drain(s: Store, name: str) -> None:
        idle = 0
        while idle < 3:
            jobs = await s.claim(worker_id=name, limit=3, lease_seconds=60)
            if not jobs:
                idle += 1
                await asyncio.sleep(0.02)
                continue
            idle = 0
            for job in jobs:
                if job.subject in active_subjects:
                    overlaps.append(job.subject)
                active_subjects.add(job.subject)
            await asyncio.sleep(0.005)
            for job in jobs:
                active_subjects.discard(job.subject)
                claimed.append(job.id)
                assert await s.finish(job, worker_id=name, status=JobStatus.DONE)

    await asyncio.gather(*(drain(s, f"w{i}") for i, s in enumerate(stores)))
    for s in stores:
        await s.close()
    assert sorted(claimed) == list(range(1, 121))
    assert overlaps == []


async def test_ledger_commits_concurrent_deliveries_in_groups(store: Store) -> None:
    ledger = Ledger(store)
    ledger.start()
    batches: list[int] = []
    original = store.record_each

    async def counting(batch: list[IncomingDelivery]) -> list[bool | Exception]:
        batches.append(len(batch))
        return await original(batch)

    store.record_each = counting  # type: ignore[method-assign, assignment]
    answers = await asyncio.gather(*(ledger.record(delivery(delivery_id=f"g{i % 50}")) for i in range(100)))
    await ledger.stop()
    assert answers.count(True) == 50 and answers.count(False) == 50
    assert len(await store.all_jobs()) == 50
    assert sum(batches) == 100 and len(batches) < 100


async def test_ledger_hands_a_database_failure_to_every_waiting_request() -> None:
    unreachable = Store("postgresql+asyncpg://revbot:revbot@127.0.0.1:1/nothing")
    ledger = Ledger(unreachable)
    ledger.start()
    results = await asyncio.gather(*(ledger.record(delivery()) for _ in range(3)), return_exceptions=True)
    await ledger.stop()
    await unreachable.close()
    assert len(results) == 3 and all(isinstance(r, OSError) for r in results)


async def test_a_duplicate_in_a_batch_never_strands_the_rows_behind_it(store: Store) -> None:
    await store.record_deliveries([delivery("o/r#7", delivery_id="old")])
    [old] = await store.claim(worker_id="w", limit=1, lease_seconds=60)
    await store.finish(old, worker_id="w", status=JobStatus.DONE)
    assert await store.record_deliveries([delivery("o/r#7", "old"), delivery("o/r#7", "new")]) == [
        False,
        True,
    ]
    [new] = await store.claim(worker_id="w", limit=1, lease_seconds=60)
    assert new.delivery_id == "new"


async def test_a_refused_delivery_fails_alone_and_its_subject_still_gets_a_head(store: Store) -> None:
    """A value the database refuses (here an installation id past BIGINT) fails only its own row;
    the row behind it on the same subject becomes the head instead."""
    bad = IncomingDelivery("bad", "pull_request", "opened", 2**63, "o/r", "o/r#20", b"{}")
    batch = [delivery("o/r#21"), bad, delivery("o/r#20"), delivery("o/r#21")]
    answers = await store.record_each(batch)
    assert answers[0] is True and answers[2] is True and answers[3] is True
    assert isinstance(answers[1], Exception)
    with pytest.raises(Exception) as refused:
        await store.record_deliveries([bad])
    assert type(refused.value) is type(answers[1])
    assert await store.delivery("bad") is None
    jobs = await store.claim(worker_id="w", limit=5, lease_seconds=60)
    assert [j.delivery_id for j in jobs] == [batch[0].delivery_id, batch[2].delivery_id]


async def test_the_ledger_answers_each_request_with_its_own_outcome(store: Store) -> None:
    ledger = Ledger(store)
    ledger.start()
    bad = IncomingDelivery("bad", "pull_request", "opened", 2**63, "o/r", "o/r#22", b"{}")
    results = await asyncio.gather(
        ledger.record(delivery("o/r#22", "good")), ledger.record(bad), return_exceptions=True
    )
    await ledger.stop()
    assert results[0] is True and isinstance(results[1], Exception)
    assert (await store.delivery("good") or {})["status"] == "queued"


async def test_write_probe_commits_and_queue_stats_count_what_waits(store: Store, clock: FakeClock) -> None:
    await store.write_probe()
    assert await store.queue_stats() == QueueStats(depth=0, oldest_due_age=None)
    await store.record_deliveries([delivery("o/r#30"), delivery("o/r#30"), delivery("o/r#31")])
    clock.advance(5)
    assert await store.queue_stats() == QueueStats(depth=3, oldest_due_age=5.0)
    first, second = await store.claim(worker_id="w", limit=5, lease_seconds=60)
    assert await store.queue_stats() == QueueStats(depth=3, oldest_due_age=None)
    assert await store.retry_later(second, worker_id="w", delay=10, error="timeout")
    assert (await store.queue_stats()).oldest_due_age is None
    assert await store.queue_stats(now=clock.now + 12) == QueueStats(depth=3, oldest_due_age=2.0)
    assert await store.finish(first, worker_id="w", status=JobStatus.DONE)
    clock.advance(1)
    assert await store.queue_stats() == QueueStats(depth=2, oldest_due_age=1.0)
    await store.write_probe()
    async with store.backend.read() as conn:
        assert (await conn.execute(select(schema_version.c.version))).scalars().all() == [SCHEMA_VERSION]


async def test_the_sqlite_writer_rolls_back_a_failing_write_alone(tmp_path: Path) -> None:
    """Writes that wait while one commits share the next transaction; one that fails midway is
    rolled back to its savepoint, and the others commit."""
    store = Store(f"sqlite+aiosqlite:///{tmp_path / 'w.sqlite3'}")
    await store.create_schema()
    assert isinstance(store.backend, SqliteBackend)
    writer = store.backend.writer
    gate = threading.Event()
    blocked = writer.submit(lambda _conn: gate.wait(10))

    def half_then_fail(conn: Connection) -> None:
        conn.execute(insert(schema_version).values(version=99))
        raise RuntimeError("midway")

    grouped: list[Awaitable[object]] = [
        asyncio.ensure_future(store.record_deliveries([delivery("o/r#40", "first")])),
        writer.submit(half_then_fail),
        asyncio.ensure_future(store.record_deliveries([delivery("o/r#40", "second")])),
    ]
    await asyncio.sleep(0)  # let the two records hand their functions to the writer
    gate.set()
    assert await blocked is True
    results = await asyncio.gather(*grouped, return_exceptions=True)
    assert results[0] == [True] and results[2] == [True]
    assert isinstance(results[1], RuntimeError)
    async with store.backend.read() as conn:
        assert (await conn.execute(select(schema_version.c.version))).scalars().all() == [SCHEMA_VERSION]
    assert [j["status"] for j in await store.all_jobs()] == ["queued", "waiting"]
    await store.close()


@pytest.fixture
async def pg_store(pg_url: str) -> AsyncIterator[Store]:
    s = Store(pg_url)
    await s.create_schema()
    yield s
    await s.close()


Held = tuple["asyncio.Future[list[bool]]", Callable[[], Awaitable[int]], Callable[[], Awaitable[None]]]


@contextlib.asynccontextmanager
async def record_held_before_its_insert(pg_url: str, subject: str) -> AsyncIterator[Held]:
    """A record of a new delivery of ``subject`` by another store (another process), which has
    read whether the subject is busy and is held just before its INSERT: a third connection holds
    an uncommitted row with the same delivery id as the other one in its batch. Yields the record,
    how many connections wait on locks, and the call that lets the record go on."""
    engine = create_async_engine(pg_url)
    recorder = Store(pg_url)
    try:
        async with engine.connect() as holder:
            gate = delivery("o/r#gate", "gate")
            await holder.execute(insert(deliveries).values(ledger_rows([gate], set(), 0.0)[0]))

            async def waiting_on_locks() -> int:
                async with engine.connect() as probe:
                    found = await probe.scalar(
                        select(func.count())
                        .select_from(text("pg_stat_activity"))
                        .where(text("wait_event_type = 'Lock' AND datname = current_database()"))
                    )
                return int(found or 0)

            record = asyncio.ensure_future(recorder.record_deliveries([delivery(subject, "new"), gate]))
            await until(lambda: _const(waiting_on_locks, 1), "the record waits before its insert")
            yield record, waiting_on_locks, holder.rollback
    finally:
        await recorder.close()
        await engine.dispose()


@pytest.mark.slow
async def test_a_finish_racing_a_record_never_strands_the_new_row(pg_store: Store, pg_url: str) -> None:
    """Issue 9, item 0, run deterministically on two connections: the record has read whether
    the subject is busy; meanwhile the worker finishes the subject's head. Whatever the order the
    database then allows, the new row must end up runnable."""
    store = pg_store
    await store.record_deliveries([delivery("o/r#50", "head")])
    [head] = await store.claim(worker_id="w", limit=1, lease_seconds=60)
    async with record_held_before_its_insert(pg_url, "o/r#50") as (record, waiting_on_locks, release):
        finish = asyncio.ensure_future(store.finish(head, worker_id="w", status=JobStatus.DONE))
        # The finish either completes (it does not conflict) or waits for the record's lock.
        await until(lambda: _done_or(finish, waiting_on_locks, 2), "the finish ran or waits")
        await release()
        assert await record == [True, True]
        assert await finish is True
    jobs = await store.claim(worker_id="w", limit=5, lease_seconds=60)
    assert sorted(j.delivery_id for j in jobs) == ["gate", "new"]


@pytest.mark.slow
async def test_ending_a_run_racing_a_record_never_strands_the_new_row(pg_store: Store, pg_url: str) -> None:
    """The same race with a worker's run: the record locks only the subject's oldest active row,
    and the write that ends the run (and claims the next one) ends that row too."""
    store = pg_store
    run = await held_run(store, "o/r#52")
    async with record_held_before_its_insert(pg_url, "o/r#52") as (record, waiting_on_locks, release):
        ending = asyncio.ensure_future(
            store.finish_jobs([end(j) for j in run], worker_id="w", claim_next_for=60, run_limit=8)
        )
        await until(lambda: _done_or(ending, waiting_on_locks, 2), "the end ran or waits")
        await release()
        assert await record == [True, True]
        ours, claimed = await ending
        assert ours
    jobs = await store.claim(worker_id="w", limit=5, lease_seconds=60)
    assert sorted(j.delivery_id for j in [*claimed, *jobs]) == ["gate", "new"]


async def _const(count: Callable[[], Awaitable[int]], at_least: int) -> bool:
    return await count() >= at_least


async def _done_or(task: asyncio.Future[Any], count: Callable[[], Awaitable[int]], at_least: int) -> bool:
    return task.done() or await count() >= at_least


@pytest.mark.slow
async def test_soak_two_processes_recording_and_working_drain_every_subject(db_url: str) -> None:
    """Randomised: two processes each record 20 deliveries for each of 25 subjects (in random small
    batches) while four workers in each claim and finish; every subject drains, in order."""
    setup = Store(db_url)
    await setup.create_schema()
    await setup.close()
    url = db_url
    subjects, per_subject, processes = 25, 20, 2
    seed = random.randrange(1 << 30)
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            str(ROOT / "tests" / "queue_soak.py"),
            url,
            str(index),
            str(subjects),
            str(per_subject),
            str(processes),
            str(seed),
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.PIPE,
        )
        for index in range(processes)
    ]
    reports = [json.loads((await p.communicate())[0]) for p in procs]
    check = Store(db_url)
    counts = await check.jobs_by_status()
    await check.close()
    assert [p.returncode for p in procs] == [0, 0], f"seed {seed}"
    assert counts == {"done": subjects * per_subject * processes}, f"seed {seed}: {counts}"
    assert all(r["drained"] and r["violations"] == [] for r in reports), f"seed {seed}: {reports}"


def test_an_in_memory_sqlite_database_is_refused_clearly() -> None:
    with pytest.raises(ValueError, match="needs a database file"):
        Store("sqlite+aiosqlite:///:memory:")


async def test_the_sqlite_wal_is_checkpointed_beside_the_writer(tmp_path: Path) -> None:
    """The writer leaves checkpoints to its own thread (its automatic ones only past a backstop
    far above this test's writes): the rows reach the database file itself."""
    database = tmp_path / "c.sqlite3"
    store = Store(f"sqlite+aiosqlite:///{database}")
    await store.create_schema()
    empty = database.stat().st_size
    await store.record_deliveries([delivery("o/r#60", payload=os.urandom(4096)) for _ in range(40)])

    async def copied() -> bool:
        return database.stat().st_size > empty + 40 * 4096

    await until(copied, "the checkpointer copied the WAL into the database file")
    await store.close()


def tenant_delivery(installation_id: int, subject: str) -> IncomingDelivery:
    return IncomingDelivery(
        delivery_id=f"delivery-{next(_ids)}",
        event="pull_request",
        action="opened",
        installation_id=installation_id,
        repo=subject.partition("#")[0],
        subject=subject,
        payload=b"{}",
    )


async def test_a_quiet_installation_is_claimed_second_behind_a_flood_of_300(store: Store) -> None:
    flood = [tenant_delivery(1, f"flood/repo#{n}") for n in range(1, 301)]
    await store.record_deliveries(flood)
    await store.record_deliveries([tenant_delivery(2, "quiet/repo#1")])
    claimed: list[Job] = []
    for _ in range(3):  # one at a time, as a worker with one free slot claims
        claimed += await store.claim(worker_id="w", limit=1, lease_seconds=60)
    assert [job.subject for job in claimed] == ["flood/repo#1", "quiet/repo#1", "flood/repo#2"]
    # In one claim of eight too: the quiet one's turn (1) ties the flood's first and beats the rest.
    await store.release([job.id for job in claimed], worker_id="w")
    batch = await store.claim(worker_id="w2", limit=8, lease_seconds=60)
    assert {job.subject for job in batch} == {"quiet/repo#1"} | {f"flood/repo#{n}" for n in range(1, 8)}


async def test_fair_turns_keep_each_pull_requests_order(store: Store) -> None:
    # Installation 1 floods three deliveries on each of 20 pull requests; 2 sends two on one.
    await store.record_deliveries([tenant_delivery(1, f"flood/repo#{n % 20}") for n in range(60)])
    await store.record_deliveries([tenant_delivery(2, "quiet/repo#1") for _ in range(2)])
    order: list[Job] = []
    while len(order) < 62:
        batch = await store.claim(worker_id="w", limit=4, lease_seconds=60)
        assert len({job.subject for job in batch}) == len(batch)  # never two of one subject at once
        assert batch, "a subject stalled"
        order += batch
        for job in batch:
            await store.finish(job, worker_id="w", status=JobStatus.DONE)
    for subject in {job.subject for job in order}:
        ids = [job.id for job in order if job.subject == subject]
        assert ids == sorted(ids)
    assert [job.subject for job in order[:4]].count("quiet/repo#1") == 1


async def test_one_installation_never_takes_a_workers_last_slot_from_the_others(store: Store) -> None:
    await store.record_deliveries([tenant_delivery(1, f"flood/repo#{n}") for n in range(1, 11)])
    held = await store.claim(worker_id="w", limit=8, lease_seconds=60, share=7)
    assert len(held) == 7
    assert await store.claim(worker_id="w", limit=1, lease_seconds=60, share=7) == []
    # Another worker has its own slots; and the last slot here goes to the quiet installation.
    assert len(await store.claim(worker_id="w2", limit=1, lease_seconds=60, share=7)) == 1
    await store.record_deliveries([tenant_delivery(2, "quiet/repo#1")])
    (quiet,) = await store.claim(worker_id="w", limit=1, lease_seconds=60, share=7)
    assert quiet.subject == "quiet/repo#1"


async def test_waiting_for_a_rate_limit_gives_the_attempt_back(store: Store, clock: FakeClock) -> None:
    await store.record_deliveries([delivery()])
    (job,) = await store.claim(worker_id="w", limit=1, lease_seconds=60)
    assert await store.retry_later(job, worker_id="w", delay=30, error="RetryLater: pacing", counted=False)
    clock.advance(31)
    (again,) = await store.claim(worker_id="w", limit=1, lease_seconds=60)
    assert (again.id, again.attempts) == (job.id, 1)  # the wait was no failed attempt
    assert await store.retry_later(again, worker_id="w", delay=0, error="GitHubBroken: 502")
    (third,) = await store.claim(worker_id="w", limit=1, lease_seconds=60)
    assert third.attempts == 2
