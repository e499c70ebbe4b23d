"""kill -9 during the quiet window: the delayed re-evaluation is a row of the durable queue, so
it still happens after a restart, and exactly once. Real processes and real time (the window is
nine seconds here), no fake clock: the worker is ``tests/crashable_worker.py`` with the bot's
own handlers."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from app.github import graphql as github_graphql
from app.review.rounds.markers import decode
from tests.conformance import validate_graphql
from tests.conftest import until
from tests.harness import BOT, REPO, BotHarness

ROOT = Path(__file__).resolve().parents[1]
# Nine seconds; every state in the comment, which the test watches.
CONFIG = "readiness:\n  enabled: true\n  quiet_minutes: 0.15\n  comment: always\n"


def readiness_bodies(bot: BotHarness, number: int) -> list[str]:
    world = bot.fake.world
    return [
        c.body
        for c in world.issue_comments_of(world.repo(REPO), number)
        if c.user == BOT and decode(c.body, "readiness") is not None
    ]


async def started(bot: BotHarness, name: str) -> None:
    """Wait until the worker process works (it may take a while to start on a loaded machine):
    a delivery no handler takes is done."""
    repository = {"full_name": REPO, "name": REPO.split("/")[1], "owner": {"login": REPO.split("/")[0]}}
    assert await bot.post_signed("push", {"repository": repository, "ref": name}, name) == 202
    await until(lambda: _done(bot, name), f"the worker's {name}")


async def _done(bot: BotHarness, delivery_id: str) -> bool:
    row = await bot.store.delivery(delivery_id)
    return row is not None and row["status"] == "done"


@pytest.mark.slow
async def test_a_worker_killed_in_the_quiet_window_still_makes_the_call_after_restart(tmp_path: Path) -> None:
    bot = BotHarness(tmp_path, run_worker=False, env={"READINESS_SETTLE_SECONDS": "0.2"})
    number = bot.open_pull({"a.py": "x = 1\n"}, base_files={".github/revbot.yml": CONFIG})
    await bot.start()
    assert (
        validate_graphql(github_graphql.READINESS_QUERY) == []
    )  # GitHub's whole schema, loaded before the clock runs
    env = {
        **os.environ,
        **bot.env(),
        "APP_SLUG": "revbot",
        "PYTHONPATH": str(ROOT),
        "CRASHABLE_WORKER_HANDLERS": "app",
    }
    script = [sys.executable, str(ROOT / "tests" / "crashable_worker.py")]
    worker = await asyncio.create_subprocess_exec(*script, env=env, cwd=ROOT, stderr=subprocess.DEVNULL)
    try:
        await started(bot, "first start")
        head = bot.fake.world.pull(bot.fake.world.repo(REPO), number).head_sha
        run = await bot.fake.start_check_run(REPO, head, "test")
        await bot.fake.complete_check_run(REPO, run, "success")

        async def quiet_window_timer() -> bool:
            bodies = readiness_bodies(bot, number)
            if not bodies or not bodies[0].startswith("⏳ Waiting — a quiet window"):
                return False
            jobs = await bot.store.all_jobs()
            return any(j["event"] == "revbot_timer" and j["status"] == "queued" for j in jobs)

        await until(quiet_window_timer, "the quiet-window comment and its timer")
        pending = [
            j for j in await bot.store.all_jobs() if j["event"] == "revbot_timer" and j["status"] == "queued"
        ]
        # The end of the quiet window is the latest: a settle timer (0.2 s) of a webhook that came
        # after the check run may still be queued beside it on a loaded machine.
        timer = max(pending, key=lambda j: j["run_after"])
        worker.send_signal(signal.SIGKILL)  # kill -9 while the window runs
        await asyncio.wait_for(worker.wait(), 10)
        assert readiness_bodies(bot, number)[0].startswith("⏳")

        worker = await asyncio.create_subprocess_exec(*script, env=env, cwd=ROOT, stderr=subprocess.DEVNULL)
        await until(lambda: readiness_bodies(bot, number)[0].startswith("✅"), "the ready call after restart")
        await until(lambda: _done(bot, f"{timer['delivery_id']}:run"), "the end of the delayed look")
        await started(bot, "settled")  # and the echoes of its writes are done
        jobs = await bot.store.all_jobs()
    finally:
        worker.send_signal(signal.SIGTERM)
        await asyncio.wait_for(worker.wait(), 30)
        await bot.stop()
    bot.assert_conforms()
    done = {j["delivery_id"]: j for j in jobs}
    assert done[timer["delivery_id"]]["status"] == "done"
    runs = [j for j in jobs if j["delivery_id"] == f"{timer['delivery_id']}:run"]
    assert [(j["status"], j["attempts"]) for j in runs] == [("done", 1)]  # evaluated exactly once
    ready_edits = [
        c
        for c in bot.fake.calls
        if c.method == "PATCH" and "/issues/comments/" in c.path and c.body["body"].startswith("✅")
    ]
    assert len(ready_edits) == 1
    assert len(readiness_bodies(bot, number)) == 1
