"""Fair turns between installations: the pure queue, and the analysis pool that uses it."""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

import pytest

from app import tenancy
from app.review.isolation.limits import AnalysisError, Limits
from app.review.isolation.pool import ProcessPool
from app.tenancy import Turns
from tests.isolation_jobs import Echo, Held


@pytest.mark.parametrize(
    ("arrivals", "running", "expected"),
    [
        # A flood from 1, then one from 2: 2 takes the second turn, then 1 goes on in order.
        ([(1, "a1"), (1, "a2"), (1, "a3"), (2, "b1")], {}, ["a1", "b1", "a2", "a3"]),
        # 1 already has work running: 2 goes first although it came last.
        ([(1, "a1"), (1, "a2"), (2, "b1")], {1: 1}, ["b1", "a1", "a2"]),
        # Three installations take turns round robin, each in its own order.
        (
            [(1, "a1"), (1, "a2"), (2, "b1"), (2, "b2"), (None, "n1")],
            {},
            ["a1", "b1", "n1", "a2", "b2"],
        ),
    ],
)
def test_turns_go_to_the_least_busy_installation_oldest_first(
    arrivals: list[tuple[int | None, str]], running: dict[int, int], expected: list[str]
) -> None:
    turns: Turns[str] = Turns()
    for busy, count in running.items():
        for _ in range(count):
            turns.put(busy, "already")
            assert turns.take() == (busy, "already")
    for key, item in arrivals:
        turns.put(key, item)
    order = []
    while (turn := turns.take()) is not None:
        key, item = turn
        order.append(item)
        turns.done(key)  # one at a time: each ends before the next starts
    assert order == expected
    assert len(turns) == 0


def test_a_running_item_counts_until_it_is_done() -> None:
    turns: Turns[str] = Turns()
    for key, item in [(1, "a1"), (1, "a2"), (2, "b1"), (2, "b2")]:
        turns.put(key, item)
    assert turns.take() == (1, "a1")  # 1 runs one now
    assert turns.take() == (2, "b1")
    assert turns.take() == (1, "a2")  # both run one: 1 waited longer for its turn
    assert turns.drain() == ["b2"]


async def test_the_pool_serves_a_quiet_installation_before_a_floods_backlog(tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    gate.mkdir()
    entered, release = gate / "entered", gate / "release"
    os.mkfifo(entered)
    os.mkfifo(release)
    pool = ProcessPool(Limits(workers=1), readable=(gate,))
    finished: list[int] = []

    async def job(installation: int, value: int) -> None:
        tenancy.installation.set(installation)  # as the worker sets it for each job
        assert await pool.run(Echo(value)) == value
        finished.append(value)

    try:
        held = asyncio.ensure_future(pool.run(Held(str(entered), str(release))))
        await asyncio.wait_for(asyncio.to_thread(entered.read_text), 120)  # the one child is busy
        tasks = []
        for installation, value in [(1, 1), (1, 2), (1, 3), (1, 4), (2, 99)]:
            tasks.append(asyncio.create_task(job(installation, value)))
            await asyncio.sleep(0)  # queued in this order
        await asyncio.to_thread(release.write_text, "go")
        assert await held is True
        await asyncio.wait_for(asyncio.gather(*tasks), 120)
    finally:
        with contextlib.suppress(OSError):
            os.close(os.open(release, os.O_RDWR | os.O_NONBLOCK))
        pool.close()
    assert finished == [1, 99, 2, 3, 4]


async def test_closing_the_pool_answers_the_jobs_still_waiting_for_a_turn(tmp_path: Path) -> None:
    entered, release = tmp_path / "entered", tmp_path / "release"
    os.mkfifo(entered)
    os.mkfifo(release)
    pool = ProcessPool(Limits(workers=1), readable=(tmp_path,))
    held = asyncio.ensure_future(pool.run(Held(str(entered), str(release))))
    await asyncio.wait_for(asyncio.to_thread(entered.read_text), 120)
    waiting = asyncio.ensure_future(pool.run(Echo(1)))
    await asyncio.sleep(0)
    pool.close()  # kills the held child; the waiting job is answered, not left hanging
    with pytest.raises(AnalysisError, match="closed"):
        await asyncio.wait_for(waiting, 30)
    # The held job ends with its child, however the closing pipes reach its thread.
    await asyncio.wait_for(asyncio.gather(held, return_exceptions=True), 30)
