"""Scale-out (issue 38): the door (the webhook endpoint and the ledger, no worker of its own) and
two ``python -m app worker`` processes on one PostgreSQL database drain the reviews of two
installations, and no job runs twice although both processes claim from the same queue. How fast
that goes, and how it scales, is ``bench/scale_out.py``'s to measure."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from app.events import TIMER_EVENT
from tests.conftest import until
from tests.harness import BOT, REPO, SLUG, BotHarness

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
OTHER_REPO, OTHER_INSTALLATION = "acme/gadgets", 78
PULLS = 4  # per installation


def posted_reviews(bot: BotHarness) -> Counter[tuple[str, int]]:
    """The bot's review POSTs that GitHub accepted, per pull request."""
    posted: Counter[tuple[str, int]] = Counter()
    for call in bot.fake.calls:
        parts = call.path.split("/")
        if call.method == "POST" and call.path.endswith("/reviews") and 200 <= call.status < 300:
            posted[(f"{parts[2]}/{parts[3]}", int(parts[5]))] += 1
    return posted


def open_pulls(bot: BotHarness) -> list[tuple[str, int]]:
    """``PULLS`` pull requests in each installation's repository, each with a file of its own."""
    bot.fake.add_installation(OTHER_INSTALLATION, OTHER_REPO.split("/")[0])
    bot.fake.add_repo(OTHER_REPO, installation_id=OTHER_INSTALLATION)
    bot.fake.push(OTHER_REPO, "main", {"README.md": "# gadgets\n"})
    pulls = []
    for n in range(PULLS):
        files = {f"pkg/m{n}.py": f"def f{n}(value):\n    return value + {n}\n"}
        pulls.append((REPO, bot.open_pull(files, branch=f"b{n}")))
        bot.fake.push(OTHER_REPO, f"b{n}", files)
        other = bot.fake.open_pull(OTHER_REPO, head=f"b{n}", author="alice")
        pulls.append((OTHER_REPO, int(other["number"])))
    return pulls


async def test_two_worker_processes_review_each_pull_request_once(tmp_path: Path, pg_url: str) -> None:
    bot = BotHarness(tmp_path, run_worker=False, env={"DATABASE_URL": pg_url})
    pulls = open_pulls(bot)
    await bot.start()
    env = {**os.environ, **bot.env()}
    workers = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-m", "app", "worker", env=env, cwd=ROOT, stderr=subprocess.DEVNULL
        )
        for _ in range(2)
    ]
    try:
        for repo, number in pulls:  # the door records each; only the worker processes can run them
            assert await bot.fake.request_review(repo, number, SLUG, by="alice") == 202
        await until(lambda: posted_reviews(bot).keys() >= set(pulls), "every review posted", within=300)
        await bot.drain(within=300)  # and the echoes of the reviews worked too
        jobs = await bot.store.all_jobs()
    finally:
        for worker in workers:
            if worker.returncode is None:
                worker.send_signal(signal.SIGTERM)
        exits = [await asyncio.wait_for(worker.wait(), 60) for worker in workers]
        await bot.stop()
    assert exits == [0, 0]
    bot.assert_conforms()
    world = bot.fake.world
    reviews = {
        (repo, number): [r for r in world.reviews_of(world.pull(world.repo(repo), number)) if r.user == BOT]
        for repo, number in pulls
    }
    assert {key: len(mine) for key, mine in reviews.items()} == dict.fromkeys(pulls, 1)
    assert posted_reviews(bot) == Counter(dict.fromkeys(pulls, 1))
    # every job the processes ran ran once; readiness's later looks (a day away here) wait
    ran = [j for j in jobs if not (j["event"] == TIMER_EVENT and j["status"] == "queued")]
    assert {(j["status"], j["attempts"]) for j in ran} <= {("done", 1), ("skipped", 1)}
    asked = [j for j in ran if j["action"] == "review_requested"]
    assert len(asked) == len(pulls) and all(j["worker_id"] for j in asked)
