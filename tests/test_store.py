"""Ledger and queue, on SQLite and on a real PostgreSQL server."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from sqlalchemy import insert

from app.store import SCHEMA_VERSION, IncomingDelivery, Ledger, Store, schema_version

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
    async with store.engine.begin() as conn:
        await conn.execute(insert(schema_version).values(version=SCHEMA_VERSION + 1))
    with pytest.raises(RuntimeError, match="newer than this code"):
        await store.create_schema()


async def test_one_job_per_subject_at_a_time_in_arrival_order(store: Store) -> None:
    await store.record_deliveries([delivery("o/r#1"), delivery("o/r#2"), delivery("o/r#1"), delivery("o/r")])
    first = await store.claim(worker_id="w1", limit=10, lease_seconds=60)
    assert [(j.id, j.subject) for j in first] == [(1, "o/r#1"), (2, "o/r#2"), (4, "o/r")]
    assert await store.claim(worker_id="w2", limit=10, lease_seconds=60) == []
    assert await store.finish(first[0], worker_id="w1", status="done")
    second = await store.claim(worker_id="w2", limit=10, lease_seconds=60)
    assert [(j.id, j.subject) for j in second] == [(3, "o/r#1")]
    statuses = {r["id"]: r["status"] for r in await store.all_jobs()}
    assert statuses == {1: "done", 2: "running", 3: "running", 4: "running"}
    assert (await store.delivery(first[0].delivery_id) or {})["status"] == "done"


async def test_an_expired_lease_is_claimed_again_and_the_old_owner_cannot_finish(store: Store) -> None:
    await store.record_deliveries([delivery("o/r#9"), delivery("o/r#9")])
    [job] = await store.claim(worker_id="dead", limit=5, lease_seconds=0.2)
    assert job.attempts == 1
    assert await store.claim(worker_id="alive", limit=5, lease_seconds=60) == []
    await asyncio.sleep(0.3)
    [again] = await store.claim(worker_id="alive", limit=5, lease_seconds=60)
    assert (again.id, again.attempts) == (job.id, 2)
    assert not await store.finish(job, worker_id="dead", status="done")
    assert await store.finish(again, worker_id="alive", status="done")
    [next_job] = await store.claim(worker_id="alive", limit=5, lease_seconds=60)
    assert next_job.id == job.id + 1


async def test_a_retried_job_holds_back_its_subject_until_due(store: Store) -> None:
    await store.record_deliveries([delivery("o/r#3"), delivery("o/r#3"), delivery("o/r#4")])
    first, other = await store.claim(worker_id="w", limit=5, lease_seconds=60)
    assert await store.retry_later(first, worker_id="w", delay=0.3, error="GitHubBroken: 502")
    assert await store.claim(worker_id="w", limit=5, lease_seconds=60) == []
    await asyncio.sleep(0.35)
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
                assert await s.finish(job, worker_id=name, status="done")

    await asyncio.gather(*(drain(s, f"w{i}") for i, s in enumerate(stores)))
    for s in stores:
        await s.close()
    assert sorted(claimed) == list(range(1, 121))
    assert overlaps == []


async def test_ledger_commits_concurrent_deliveries_in_groups(store: Store) -> None:
    ledger = Ledger(store)
    ledger.start()
    batches: list[int] = []
    original = store.record_deliveries

    async def counting(batch: list[IncomingDelivery]) -> list[bool]:  # type: ignore[override]
        batches.append(len(batch))
        return await original(batch)

    store.record_deliveries = counting  # type: ignore[method-assign]
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
    await store.finish(old, worker_id="w", status="done")
    assert await store.record_deliveries([delivery("o/r#7", "old"), delivery("o/r#7", "new")]) == [
        False,
        True,
    ]
    [new] = await store.claim(worker_id="w", limit=1, lease_seconds=60)
    assert new.delivery_id == "new"
