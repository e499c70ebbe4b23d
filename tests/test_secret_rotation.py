"""Rotating the webhook secret: GitHub signs with the one secret the App has, so while an operator
changes it, deliveries signed with the old one (already on their way, or redelivered) and with the
new one both arrive. ``WEBHOOK_SECRET_PREVIOUS`` is accepted beside ``WEBHOOK_SECRET`` until it is
unset; a delivery signed with neither is 401 and nothing is recorded."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from app.ops.doctor import check_hook_config
from app.settings.config import load_settings
from tests.harness import METRICS_TOKEN, SECRET, BotHarness

NEW_SECRET = "the new secret, set in the App's settings a moment ago"
PAYLOAD = {"zen": "Rotate often.", "hook_id": 1, "repository": {"full_name": "octo/widgets"}}


@pytest.fixture
async def rotating(tmp_path: Path) -> AsyncIterator[BotHarness]:
    # The fake (GitHub) still signs with SECRET: the operator has set the new one in the bot first.
    harness = BotHarness(tmp_path, env={"WEBHOOK_SECRET": NEW_SECRET, "WEBHOOK_SECRET_PREVIOUS": SECRET})
    await harness.start()
    yield harness
    await harness.stop()


async def post(bot: BotHarness, secret: str, delivery: str, event: str = "star") -> int:
    body = json.dumps({**PAYLOAD, "delivery": delivery}).encode()
    headers = {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest(),
        "Content-Type": "application/json",
    }
    async with (
        aiohttp.ClientSession() as session,
        session.post(bot.webhook_url, data=body, headers=headers) as response,
    ):
        return response.status


async def previous_secret_count(bot: BotHarness) -> float:
    async with (
        aiohttp.ClientSession() as session,
        session.get(
            f"http://127.0.0.1:{bot.bot_port}/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}
        ) as response,
    ):
        text = await response.text()
    [line] = [ln for ln in text.splitlines() if ln.startswith("revbot_webhook_previous_secret_total ")]
    return float(line.split()[1])


@pytest.mark.e2e
async def test_during_a_rotation_both_secrets_are_accepted_and_neither_is_not(rotating: BotHarness) -> None:
    counted = await previous_secret_count(rotating)  # the process's registry: what came before
    assert await post(rotating, SECRET, "signed-with-the-old") == 202
    assert await post(rotating, NEW_SECRET, "signed-with-the-new") == 202
    assert await post(rotating, "a guess", "signed-with-neither") == 401
    assert await rotating.store.delivery("signed-with-the-old") is not None
    assert await rotating.store.delivery("signed-with-the-new") is not None
    assert await rotating.store.delivery("signed-with-neither") is None
    assert await previous_secret_count(rotating) == counted + 1  # the operator sees the old one in use


@pytest.mark.e2e
async def test_once_the_previous_secret_is_unset_it_is_refused(tmp_path: Path) -> None:
    bot = BotHarness(tmp_path, env={"WEBHOOK_SECRET": NEW_SECRET})
    await bot.start()
    try:
        assert await post(bot, SECRET, "old-after-rotation") == 401
        assert await post(bot, NEW_SECRET, "new-after-rotation") == 202
        assert await bot.store.delivery("old-after-rotation") is None
    finally:
        await bot.stop()


@pytest.mark.parametrize(
    ("previous", "warned"),
    [(None, False), ("", False), ("  ", False), ("old", True)],
)
def test_doctor_says_when_a_previous_secret_is_still_set(
    private_key_pem: str, previous: str | None, warned: bool
) -> None:
    env = {"APP_ID": "1", "PRIVATE_KEY": private_key_pem, "WEBHOOK_SECRET": "new"}
    if previous is not None:
        env["WEBHOOK_SECRET_PREVIOUS"] = previous
    settings, _ = load_settings(env)
    checks = check_hook_config({"url": "https://bot.example/api/github/webhooks", "secret": "set"}, settings)
    named = [c for c in checks if c.name == "previous webhook secret"]
    assert bool(named) == warned
    if warned:
        assert named[0].level == "warn"
        assert "WEBHOOK_SECRET_PREVIOUS" in named[0].detail
