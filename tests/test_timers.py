"""Durable timers: a burst of asks for one pull request's moment is one row and one write."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from app.events import TIMER_EVENT
from app.jobs.timers import FILED_SECONDS, StoreTimers
from app.store import Store
from app.store.model import IncomingDelivery
from tests.conftest import FakeClock

BUCKET = 30.0
REPO = "octo/repo"


class CountingStore(Store):
    """The real store, counting the writes the timers ask of it."""

    schedules = 0

    async def schedule(self, item: IncomingDelivery, *, run_after: float) -> bool:
        self.schedules += 1
        return await super().schedule(item, run_after=run_after)


@pytest.fixture
async def counted(db_url: str, clock: FakeClock) -> AsyncIterator[CountingStore]:
    store = CountingStore(db_url, clock=clock)
    await store.create_schema()
    yield store
    await store.close()


async def timer_rows(store: Store) -> list[dict[str, object]]:
    return [job for job in await store.all_jobs() if job["event"] == TIMER_EVENT]


async def ask(timers: StoreTimers, at: float, pr_number: int = 7) -> None:
    await timers.look_again(repo=REPO, pr_number=pr_number, installation_id=1, at=at, since=at - BUCKET)


async def test_a_burst_for_one_moment_is_one_row_and_one_write(
    counted: CountingStore, clock: FakeClock
) -> None:
    timers = StoreTimers(counted, wake=lambda: None, bucket=BUCKET)
    start = clock.now - clock.now % BUCKET  # the start of a slot, so the burst stays in it
    clock.now = start + 1
    for _ in range(50):  # a burst of deliveries, each asking for a look once it has settled
        await ask(timers, clock.now + BUCKET)
        clock.advance(0.1)
    rows = await timer_rows(counted)
    assert len(rows) == 1 and counted.schedules == 1
    assert rows[0]["run_after"] == start + 2 * BUCKET  # the slot's end: never early


async def test_each_slot_and_each_pull_request_has_its_own_timer(
    counted: CountingStore, clock: FakeClock
) -> None:
    timers = StoreTimers(counted, wake=lambda: None, bucket=BUCKET)
    at = clock.now + BUCKET
    await ask(timers, at)
    await ask(timers, at + BUCKET)  # the next slot
    await ask(timers, at, pr_number=8)  # another pull request
    await ask(timers, at)  # asked before: nothing written
    assert counted.schedules == 3 and len(await timer_rows(counted)) == 3


async def test_a_slot_asked_for_again_after_the_memory_is_still_one_row(
    counted: CountingStore, clock: FakeClock
) -> None:
    timers = StoreTimers(counted, wake=lambda: None, bucket=BUCKET)
    at = clock.now + 2 * FILED_SECONDS  # a verdict's later time, asked for across the memory
    await ask(timers, at)
    clock.advance(FILED_SECONDS + 1)
    await ask(timers, at)  # forgotten here: written again, and the database keeps one row
    assert counted.schedules == 2 and len(await timer_rows(counted)) == 1


async def test_a_timer_whose_write_failed_is_asked_for_again(
    counted: CountingStore, clock: FakeClock
) -> None:
    timers = StoreTimers(counted, wake=lambda: None, bucket=BUCKET)
    real = counted.schedule

    async def unavailable(item: IncomingDelivery, *, run_after: float) -> bool:
        raise ConnectionError("database unavailable")

    counted.schedule = unavailable  # type: ignore[method-assign]
    with pytest.raises(ConnectionError):
        await ask(timers, clock.now + BUCKET)
    counted.schedule = real  # type: ignore[method-assign]
    await ask(timers, clock.now + BUCKET)  # the same ask once the database is back
    assert counted.schedules == 1 and len(await timer_rows(counted)) == 1
