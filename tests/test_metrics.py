"""``GET /metrics``: Prometheus' text format, behind an optional bearer token, counting what the
bot did in a real story against the fake GitHub (deliveries, jobs, API calls, rate limit,
reviews, resolved threads) and reading the queue from the database when scraped."""

from __future__ import annotations

import io
import json
import logging
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.metrics import REGISTRY
from app.settings.logs import setup_logging
from app.store import IncomingDelivery
from app.web.metrics import observe_queue
from tests.harness import INSTALLATION, REPO, BotHarness

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

TOKEN = "metrics-token-for-tests"
DECOY = "revbot"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


async def scrape(bot: BotHarness, token: str | None = TOKEN) -> tuple[int, Samples]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    url = f"http://127.0.0.1:{bot.bot_port}/metrics"
    async with aiohttp.ClientSession() as session, session.get(url, headers=headers) as response:
        text = await response.text()
        if response.status != 200:
            return response.status, {}
        assert response.headers["Content-Type"].startswith("text/plain; version=")
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return 200, samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


@pytest.fixture
async def bot(tmp_path: Path) -> AsyncIterator[BotHarness]:
    harness = BotHarness(tmp_path, env={"METRICS_TOKEN": TOKEN})
    harness.fake.add_user(DECOY)
    yield harness
    await harness.stop()
    harness.assert_conforms()


async def test_metrics_need_the_token_when_one_is_set(bot: BotHarness) -> None:
    await bot.start()
    assert (await scrape(bot, token=None))[0] == 401
    assert (await scrape(bot, token="wrong"))[0] == 401
    status, samples = await scrape(bot)
    assert status == 200 and ("revbot_queue_jobs", frozenset({("status", "queued")})) in samples


async def test_a_review_story_is_counted(bot: BotHarness) -> None:
    logs = io.StringIO()
    setup_logging(logging.INFO, stream=logs, json_lines=True)
    number = bot.open_pull({"src/c.py": "value = undefined_name\n"}, author="alice")
    await bot.start()
    _, before = await scrape(bot)
    await bot.fake.request_review(REPO, number, DECOY, by="alice")
    await bot.drain()
    bot.fake.push(REPO, "feature", {"src/c.py": None})  # the fix: the bot resolves its thread
    await bot.drain()
    assert await bot.post_signed("pull_request", {"action": "opened"}, "x") == 202
    assert await bot.post_signed("pull_request", {"action": "opened"}, "x") == 200
    async with aiohttp.ClientSession() as session:
        await session.post(bot.webhook_url, data=b"{}", headers={"X-GitHub-Event": "push"})
    await bot.drain()
    _, after = await scrape(bot)

    def grew(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert grew("revbot_webhook_deliveries_total", event="pull_request", outcome="accepted") >= 3
    assert grew("revbot_webhook_deliveries_total", event="pull_request", outcome="duplicate") == 1
    assert grew("revbot_webhook_deliveries_total", event="unverified", outcome="refused_signature") == 1
    assert grew("revbot_reviews_total", verdict="request_changes") == 1
    assert grew("revbot_threads_resolved_total") == 1
    assert grew("revbot_github_api_calls_total", status="200") > 0
    assert grew("revbot_github_api_calls_total", status="201") > 0
    remaining = value(
        after, "revbot_github_rate_limit_remaining", installation=str(INSTALLATION), resource="core"
    )
    assert 0 < remaining < 5000
    assert grew("revbot_job_duration_seconds_count", outcome="done") >= 3
    assert grew("revbot_job_latency_seconds_count", outcome="done") >= 3
    # readiness's later looks are queued jobs, due later
    assert value(after, "revbot_queue_jobs", status="queued") == len(await bot.timers())
    assert ("revbot_queue_jobs", frozenset({("status", "done")})) not in after

    # The job's outcome line: repo, PR number, the handlers it ran, how long it took.
    lines = [json.loads(line) for line in logs.getvalue().splitlines()]
    outcome = re.compile(r"job done in \d+\.\d\ds \(handlers: (.+)\)$")
    reviewed = [e for e in lines if (m := outcome.match(e["msg"])) and "on_review_requested" in m.group(1)]
    assert len(reviewed) == 1
    assert reviewed[0]["repo"] == REPO and reviewed[0]["pr_number"] == number
    assert reviewed[0]["event"] == "pull_request" and reviewed[0]["job_id"]
    assert "app.handlers.review.on_review_requested" in reviewed[0]["msg"]


async def test_the_oldest_due_job_age_comes_from_the_queue(bot: BotHarness) -> None:
    bot.run_worker = False
    await bot.start()
    [new] = await bot.store.record_deliveries(
        [IncomingDelivery("d1", "pull_request", "opened", INSTALLATION, REPO, f"{REPO}#1", b"{}")]
    )
    assert new
    row = await bot.store.delivery("d1")
    assert row is not None
    await observe_queue(bot.store, now=row["run_after"] + 42.0)
    assert REGISTRY.get_sample_value("revbot_queue_oldest_due_age_seconds") == pytest.approx(42.0)
    await observe_queue(bot.store, now=row["run_after"] - 1.0)  # not due yet: nothing is waiting
    assert REGISTRY.get_sample_value("revbot_queue_oldest_due_age_seconds") == 0.0
    _, samples = await scrape(bot)
    assert value(samples, "revbot_queue_jobs", status="queued") == 1
    assert value(samples, "revbot_queue_depth") == 1
    assert 0 <= value(samples, "revbot_queue_oldest_due_age_seconds") < time.time() - row["run_after"] + 60
