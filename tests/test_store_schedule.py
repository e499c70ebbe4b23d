"""``Store.schedule``: a job the bot gives itself, due later, recorded once per key, durable."""

from __future__ import annotations

from app.store import Store
from app.store.model import IncomingDelivery
from tests.conftest import FakeClock


def timer(key: str, subject: str = "o/r#1~timer@1") -> IncomingDelivery:
    return IncomingDelivery(key, "revbot_timer", None, 7, "o/r", subject, b'{"pull_request": {"number": 1}}')


async def test_a_scheduled_job_is_claimed_only_when_due(store: Store, clock: FakeClock) -> None:
    assert await store.schedule(timer("t1"), run_after=clock.now + 600)
    assert await store.claim(worker_id="w", limit=10, lease_seconds=30) == []
    clock.advance(599)
    assert await store.claim(worker_id="w", limit=10, lease_seconds=30) == []
    clock.advance(1)
    (job,) = await store.claim(worker_id="w", limit=10, lease_seconds=30)
    assert (job.delivery_id, job.event, job.subject) == ("t1", "revbot_timer", "o/r#1~timer@1")


async def test_the_same_key_is_recorded_once(store: Store, clock: FakeClock) -> None:
    assert await store.schedule(timer("t1"), run_after=clock.now + 10)
    assert not await store.schedule(timer("t1"), run_after=clock.now + 20)
    rows = await store.all_jobs()
    assert [(r["delivery_id"], r["run_after"]) for r in rows] == [("t1", clock.now + 10)]


async def test_on_a_busy_subject_it_waits_behind_the_head(store: Store, clock: FakeClock) -> None:
    assert await store.schedule(timer("first", "o/r#1"), run_after=clock.now)
    assert await store.schedule(timer("second", "o/r#1"), run_after=clock.now)
    statuses = {r["delivery_id"]: r["status"] for r in await store.all_jobs()}
    assert statuses == {"first": "queued", "second": "waiting"}
    (job,) = await store.claim(worker_id="w", limit=10, lease_seconds=30)
    assert job.delivery_id == "first"


async def test_a_scheduled_job_survives_a_restart(store: Store, clock: FakeClock) -> None:
    assert await store.schedule(timer("t1"), run_after=clock.now + 60)
    again = Store(store.url, clock=clock)
    try:
        clock.advance(61)
        (job,) = await again.claim(worker_id="w2", limit=10, lease_seconds=30)
        assert job.delivery_id == "t1"
    finally:
        await again.close()
