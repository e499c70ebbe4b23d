"""Least exposure (issue 18 item 7): private database files, closed /metrics, /healthz details
behind the token, and no configured secret in a log line."""

from __future__ import annotations

import io
import json
import logging
import os
import stat
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from app.settings.config import load_settings
from app.settings.logs import redact, secret_values, setup_logging
from app.store import IncomingDelivery, Store
from tests.harness import APP_KEY, SECRET, BotHarness

TOKEN = "exposure-metrics-token"
MODEL_KEY = "sk-model-key-for-exposure-tests"
CLIENT_SECRET = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def loose_umask() -> Iterator[None]:
    """The umask most systems start with: what made the files 0755/0644 before."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def modes(directory: Path) -> dict[str, int]:
    return {p.name: mode(p) for p in directory.iterdir()}


@pytest.mark.usefixtures("loose_umask")
async def test_the_sqlite_directory_and_every_file_of_the_database_are_private(tmp_path: Path) -> None:
    database = tmp_path / "deep" / "data" / "revbot.sqlite3"
    store = Store(f"sqlite+aiosqlite:///{database}")
    try:
        await store.create_schema()
        await store.record_deliveries(
            [
                IncomingDelivery(
                    delivery_id="d-1",
                    event="ping",
                    action=None,
                    installation_id=None,
                    repo=None,
                    subject="global",
                    payload=b"{}",
                )
            ]
        )
        files = modes(database.parent)
        assert {"revbot.sqlite3", "revbot.sqlite3-wal", "revbot.sqlite3-shm"} <= set(files)
        assert set(files.values()) == {0o600}, files
        assert mode(database.parent) == 0o700
        assert mode(database.parent.parent) == 0o700  # every directory the bot created
    finally:
        await store.close()


@pytest.mark.usefixtures("loose_umask")
async def test_files_left_readable_by_an_earlier_run_are_narrowed(tmp_path: Path) -> None:
    database = tmp_path / "revbot.sqlite3"
    for suffix in ("", "-wal", "-shm"):
        path = tmp_path / f"revbot.sqlite3{suffix}"
        path.touch()
        path.chmod(0o644)
    store = Store(f"sqlite+aiosqlite:///{database}")
    await store.close()
    assert modes(tmp_path) == {
        "revbot.sqlite3": 0o600,
        "revbot.sqlite3-wal": 0o600,
        "revbot.sqlite3-shm": 0o600,
    }


# ------------------------------------------------------------------ /metrics and /healthz


@pytest.fixture
async def bot(tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[BotHarness]:
    env: dict[str, str] = {"METRICS_TOKEN": "", **getattr(request, "param", {})}
    harness = BotHarness(tmp_path, env=env)
    await harness.start()
    yield harness
    await harness.stop()


async def get(bot: BotHarness, path: str, token: str | None = None) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    url = f"http://127.0.0.1:{bot.bot_port}{path}"
    async with aiohttp.ClientSession() as session, session.get(url, headers=headers) as response:
        return response.status, await response.text()


async def test_metrics_are_closed_without_a_token(bot: BotHarness) -> None:
    status, text = await get(bot, "/metrics")
    assert status == 403 and "METRICS_TOKEN" in json.loads(text)["error"]
    assert "revbot_" not in text


@pytest.mark.parametrize("bot", [{"METRICS_PUBLIC": "1"}], indirect=True)
async def test_metrics_are_served_to_anyone_when_the_operator_opens_them(bot: BotHarness) -> None:
    status, text = await get(bot, "/metrics")
    assert status == 200 and "revbot_queue_depth" in text


@pytest.mark.parametrize("bot", [{"METRICS_PUBLIC": "1", "METRICS_TOKEN": TOKEN}], indirect=True)
async def test_a_token_is_required_whenever_one_is_set(bot: BotHarness) -> None:
    assert (await get(bot, "/metrics"))[0] == 401
    assert (await get(bot, "/metrics", TOKEN))[0] == 200


@pytest.mark.parametrize("bot", [{"METRICS_TOKEN": TOKEN}], indirect=True)
async def test_healthz_gives_status_to_anyone_and_details_only_with_the_token(bot: BotHarness) -> None:
    for token in (None, "wrong"):
        status, text = await get(bot, "/healthz", token)
        assert (status, json.loads(text)) == (200, {"status": "ok"})
    status, text = await get(bot, "/healthz", TOKEN)
    details: dict[str, Any] = json.loads(text)
    assert status == 200 and details["status"] == "ok"
    assert {"database", "queue", "worker", "app_slug", "delivery_recovery"} <= set(details)
    assert details["app_slug"] == "revbot"


async def test_healthz_shows_no_details_when_no_token_is_configured(bot: BotHarness) -> None:
    for token in (None, "", "anything"):
        status, text = await get(bot, "/healthz", token)
        assert (status, json.loads(text)) == (200, {"status": "ok"})


# ------------------------------------------------------------------ the log filter

SECRETS = {"METRICS_TOKEN": TOKEN, "LLM_API_KEY": MODEL_KEY, "GITHUB_CLIENT_SECRET": CLIENT_SECRET}


@pytest.mark.parametrize("bot", [SECRETS], indirect=True)
async def test_no_configured_secret_reaches_a_log_line(bot: BotHarness) -> None:
    key_line = next(line for line in APP_KEY.splitlines() if len(line) >= 60)
    leaks = {
        "webhook secret": SECRET,
        "metrics token": TOKEN,
        "model key": MODEL_KEY,
        "client secret": CLIENT_SECRET,
        "a line of the App's private key": key_line,
        "the private key as an environment variable": APP_KEY.replace("\n", "\\n"),
    }
    for json_lines in (True, False):
        out = io.StringIO()
        setup_logging(logging.INFO, stream=out, json_lines=json_lines)
        log = logging.getLogger("app.test_exposure")
        for what, value in leaks.items():
            log.warning("%s: %s in a message", what, value)
            try:
                raise RuntimeError(f"failed with {value}")
            except RuntimeError:
                log.exception("and in a traceback")
        text = out.getvalue()
        for what, value in leaks.items():
            assert f"{what}: [redacted] in a message" in text
            assert value not in text, what
        assert SECRET not in text and "[redacted]" in text


def test_the_secret_values_are_read_from_every_secret_setting() -> None:
    settings, _pem = load_settings(
        {
            "APP_ID": "1",
            "PRIVATE_KEY": APP_KEY.replace("\n", "\\n"),
            "WEBHOOK_SECRET": "hook-secret",
            **SECRETS,
        }
    )
    values = set(secret_values(settings))
    assert {"hook-secret", TOKEN, MODEL_KEY, CLIENT_SECRET, APP_KEY.replace("\n", "\\n")} <= values
    assert redact("nothing secret here") == "nothing secret here"
