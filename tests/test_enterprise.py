"""GitHub Enterprise Server: the fake serves REST only under ``/api/v3`` and GraphQL only at
``/api/graphql`` (every other address but its web pages is a 404, recorded as a problem), and its
answers' URLs say so. The bot, with ``GITHUB_API_URL=http://127.0.0.1:PORT/api/v3``, reviews,
re-reviews and resolves its threads there; ``setup`` and ``doctor`` work against it too."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from app.ops.setup import SetupOptions
from app.sandbox import FakeGitHub
from tests.conformance import GitHubConformance
from tests.harness import REPO, BotHarness, free_port
from tests.test_doctor import MANIFEST, by_name, doctor
from tests.test_setup import HOST, register

AUTHOR = "alice"
DECOY = "revbot"
BROKEN = {"src/app.py": "def handler():\n    return undefined_thing + 1\n"}
FIXED = {"src/app.py": "def handler():\n    return 1\n"}


@pytest.fixture
async def enterprise(tmp_path: Path) -> AsyncIterator[BotHarness]:
    bot = BotHarness(tmp_path, enterprise=True)
    bot.fake.add_user(DECOY)
    info = bot.fake.shapes.app_info
    info.events = list(MANIFEST["default_events"])
    info.permissions = dict(MANIFEST["default_permissions"])
    await bot.start()
    yield bot
    await bot.stop()
    bot.assert_conforms()  # includes: no request to a non-Enterprise address


async def test_the_fake_answers_the_api_only_under_the_enterprise_prefixes(enterprise: BotHarness) -> None:
    base = enterprise.fake.base_url
    async with aiohttp.ClientSession() as session:
        for url in (f"{base}/app", f"{base}/graphql", f"{base}/api/uploads/app"):
            async with session.get(url) as response:
                assert response.status == 404, url
        async with session.get(f"{base}/api/v3/app") as response:
            assert response.status == 401  # the API: it wants the App's JWT
    assert len(enterprise.fake.problems) == 3
    enterprise.fake.problems.clear()


@pytest.mark.slow
async def test_review_rereview_and_thread_resolution_on_enterprise_server(enterprise: BotHarness) -> None:
    bot = enterprise
    assert bot.env()["GITHUB_API_URL"] == f"http://127.0.0.1:{bot.fake_port}/api/v3"
    assert bot.runtime is not None and bot.runtime.settings.graphql_url == bot.fake.graphql_url
    number = bot.open_pull(BROKEN, author=AUTHOR)
    await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR)
    await bot.drain()
    assert bot.fake.review_decision(REPO, number) == "CHANGES_REQUESTED"

    bot.fake.push(REPO, "feature", FIXED)  # the push resolves the fixed thread
    await bot.drain()
    await bot.fake.request_review(REPO, number, DECOY, by=AUTHOR)  # the re-review approves
    await bot.drain()
    assert bot.fake.review_decision(REPO, number) == "APPROVED"
    threads = bot.fake.world.threads_of(bot.fake.world.pull(bot.fake.world.repo(REPO), number))
    assert threads and all(t.is_resolved for t in threads)

    raw = {c.raw_path for c in bot.fake.calls}
    assert "/api/graphql" in raw  # thread reads and resolution
    assert all(p.startswith("/api/v3/") or p == "/api/graphql" for p in raw), sorted(raw)
    # The answers' URLs carry the prefix too (what a client following them would use).
    pull = next(c.response for c in bot.fake.calls if c.path == f"/repos/{REPO}/pulls/{number}")
    assert pull["url"].startswith(f"{bot.fake.base_url}/api/v3/repos/")
    assert pull["html_url"].startswith(f"{bot.fake.base_url}/{REPO}/pull/")


async def test_doctor_checks_an_enterprise_deployment(enterprise: BotHarness) -> None:
    checks = await doctor(enterprise)
    found = by_name(checks)
    assert found["github"].level == "ok" and found["permissions and events"].level == "ok"
    assert all(c.raw_path.startswith("/api/v3/") for c in enterprise.fake.calls if c.auth == "jwt")


async def test_setup_registers_the_app_on_enterprise_server(tmp_path: Path) -> None:
    github = FakeGitHub(
        app_id=9001,
        app_slug="revbot",
        webhook_secret="made-by-github",
        validator=GitHubConformance(),
        enterprise=True,
    )
    await github.start()
    try:
        options = SetupOptions(
            env_path=tmp_path / ".env", github_url=github.base_url, host=HOST, port=free_port()
        )
        registered, _, form = await register(options)
    finally:
        await github.stop()
    assert github.problems == []
    assert form.action.startswith(f"{github.base_url}/settings/apps/new?state=")  # a web page: the root
    [conversion] = [c for c in github.calls if c.path.startswith("/app-manifests/")]
    assert conversion.status == 201 and conversion.raw_path.startswith("/api/v3/app-manifests/")
    assert registered.install_url == f"{github.base_url}/apps/revbot/installations/new"
