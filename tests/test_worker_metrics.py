"""``/metrics`` of a separate worker process: ``python -m app worker`` with ``WORKER_METRICS_PORT``
serves its own metrics (the jobs it ran, the reviews it posted, its GitHub calls), which the web
process, which ran none of them, cannot show."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from tests.conftest import until
from tests.harness import REPO, BotHarness, free_port

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "worker-metrics-token"


async def scrape(url: str, token: str | None = TOKEN) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        async with aiohttp.ClientSession() as session, session.get(url, headers=headers) as response:
            return response.status, await response.text()
    except aiohttp.ClientConnectionError:
        return 0, ""


def sample(text: str, name: str) -> float:
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


@pytest.mark.slow
async def test_a_separate_worker_serves_its_own_metrics(tmp_path: Path) -> None:
    web = BotHarness(tmp_path, run_worker=False, env={"METRICS_TOKEN": TOKEN})
    number = web.open_pull({"src/a.py": "x = 1\n"})
    await web.start()
    port = free_port()
    metrics = f"http://127.0.0.1:{port}/metrics"
    reviewed = 'revbot_reviews_total{verdict="approve"}'
    web_metrics = f"http://127.0.0.1:{web.bot_port}/metrics"
    # The test's process holds the web side, and its registry what earlier tests counted.
    before = sample((await scrape(web_metrics))[1], reviewed)
    env = {**os.environ, **web.env(), "WORKER_METRICS_PORT": str(port), "HOST": "127.0.0.1"}
    worker = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "app", "worker", env=env, cwd=ROOT, stderr=subprocess.DEVNULL
    )
    try:
        await web.fake.comment(REPO, number, "@revbot review", by="alice")
        await until(lambda: web.fake.review_decision(REPO, number) == "APPROVED", "the worker's review")

        done = 'revbot_job_duration_seconds_count{outcome="done"}'

        # The review is counted inside its job, the job's duration only once the job ends.
        async def counted() -> bool:
            text = (await scrape(metrics))[1]
            return sample(text, reviewed) == 1.0 and sample(text, done) >= 1

        await until(counted, "the worker's /metrics counting its review and its job")
        status, text = await scrape(metrics)
        assert status == 200
        assert sample(text, reviewed) == 1.0
        # The queue's gauges are the worker's too (readiness may still be looking: no count here).
        assert re.search(r"^revbot_queue_depth \d", text, re.M)
        assert (await scrape(metrics, token=None))[0] == 401  # METRICS_TOKEN holds here too
        # The web process ran no job: its own /metrics cannot show the review.
        assert sample((await scrape(web_metrics))[1], reviewed) == before
    finally:
        worker.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(worker.wait(), 60) == 0
        await web.stop()
    web.assert_conforms()


@pytest.mark.slow
def test_a_worker_metrics_port_in_use_stops_the_start_with_one_line(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        harness = BotHarness(tmp_path)
        env = {
            **os.environ,
            **harness.env(),
            "HOST": "127.0.0.1",
            "WORKER_METRICS_PORT": str(busy.getsockname()[1]),
        }
        done = subprocess.run(
            [sys.executable, "-m", "app", "worker"], env=env, cwd=ROOT, capture_output=True, timeout=120
        )
    assert done.returncode == 1
    # The one line for a person; the structured log lines before it (the event loop chosen) aside.
    said = "".join(line for line in done.stderr.decode().splitlines(True) if not line.startswith("{"))
    assert re.fullmatch(r"revbot: cannot listen on 127\.0\.0\.1:\d+: address already in use\n", said)


@pytest.mark.slow
def test_a_bad_worker_metrics_port_exits_2_naming_it(tmp_path: Path) -> None:
    env = {**os.environ, **BotHarness(tmp_path).env(), "WORKER_METRICS_PORT": "70000"}
    done = subprocess.run(
        [sys.executable, "-m", "app", "worker"], env=env, cwd=ROOT, capture_output=True, timeout=120
    )
    assert done.returncode == 2 and "WORKER_METRICS_PORT" in done.stderr.decode()
